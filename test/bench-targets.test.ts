/**
 * The bench's verdicts (dev/bench/targets.ts): a ratio is judged on the value it is printed with,
 * three decimals, against the targets of its scale (0.556 misses 0.56); and `baseline drift`
 * (dev/bench/pipe.ts) calls a move of (p) by more than 10 % within a run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Figures } from '../dev/bench/context';
import type { PipeOutcome } from '../dev/bench/pipe';
import { DRIFT_NOTED, reportDrift } from '../dev/bench/pipe';
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
  assert.equal(judgedText(judge(0.3, pipeTargets(2000))), '0.300 (no target at 2,000 jobs)');
});

test('a refresh is judged by at-most bounds: 0.077 meets 0.10 and misses 0.03', () => {
  const j = judge(0.0774, { scale: '10,000,000 jobs', targets: REFRESH_TARGETS });
  assert.equal(judgedText(j), '0.077 (at 10,000,000 jobs: target ≤ 0.1 met, goal ≤ 0.03 MISSED)');
});

/** A (p) outcome of `s` seconds for 10^7 rows. */
const pipeOf = (s: number): PipeOutcome => ({
  rows: 10_000_000,
  ms: s * 1000,
  rate: 10_000_000 / s,
  cpu: { psql: 1000 },
});

test('baseline drift: 57.5 then 72.3 s is called a move, 60 then 65 s steady, and each ratio is printed', () => {
  const figures = new Figures();
  const productRate = 10_000_000 / 103.4;
  const moved = reportDrift({ figures }, pipeOf(57.5), pipeOf(72.3), productRate);
  assert.deepEqual(moved, {
    beforeMs: 57_500,
    afterMs: 72_300,
    drift: 0.257,
    ratioBefore: 0.556,
    ratioAfter: 0.699,
    moved: true,
  });
  const steady = reportDrift({ figures }, pipeOf(60), pipeOf(65), productRate);
  assert.equal(steady.moved, false);
  const still = reportDrift({ figures }, pipeOf(60), pipeOf(60.01), productRate);
  assert.equal(still.moved, false);
  assert.equal(reportDrift({ figures }, pipeOf(60), pipeOf(53.3), productRate).moved, true);
  assert.equal(DRIFT_NOTED, 0.1);
});
