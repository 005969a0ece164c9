/**
 * The bench's verdicts (dev/bench/targets.ts): a ratio is judged with three decimals against the
 * targets of its scale, so a figure just under a target is reported missed, not rounded up to it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { filePipeTargets, judge, judgedText, pipeTargets, REFRESH_TARGETS } from '../dev/bench/targets';

test('a 10^7 rebuild at 0.556 of (p) misses 0.56; at 0.5604 it holds it and misses the aim', () => {
  const under = judge(0.5561, pipeTargets(10_000_000));
  assert.equal(under.value, 0.556);
  assert.deepEqual(
    under.targets.map((t) => [t.name, t.met]),
    [
      ['hold', false],
      ['aim', false],
    ],
  );
  assert.equal(judgedText(under), '0.556 (at 10^7 jobs: hold ≥ 0.56 MISSED, aim ≥ 0.7 MISSED)');
  const held = judge(0.5604, pipeTargets(10_000_000));
  assert.deepEqual(
    held.targets.map((t) => t.met),
    [true, false],
  );
});

test('the scale picks the targets: 10^6 jobs, 10^7 file records, none for a smoke run', () => {
  assert.deepEqual(
    judge(0.47, pipeTargets(1_000_000)).targets.map((t) => [t.atLeast, t.met]),
    [
      [0.44, true],
      [0.6, false],
    ],
  );
  assert.equal(judge(0.87, filePipeTargets(10_000_000)).targets[0].met, false);
  assert.equal(judge(0.75, filePipeTargets(1_000_000)).targets[0].met, true);
  assert.equal(judgedText(judge(0.3, pipeTargets(2000))), '0.300 (no target at 2000 jobs)');
});

test('a refresh is judged by at-most bounds: 0.077 meets 0.10 and misses 0.03', () => {
  const j = judge(0.0774, { scale: '10,000,000 jobs', targets: REFRESH_TARGETS });
  assert.equal(judgedText(j), '0.077 (at 10,000,000 jobs: target ≤ 0.1 met, goal ≤ 0.03 MISSED)');
});
