/**
 * Replays recorded histories of real rebuilds (test/histories/*.json: a normal rebuild, a worker
 * killed mid-page, continue-as-new, pause and resume, the cancel signal, a setThrottle update, a
 * repaired bucket, a publish refused by the shrink guard) against the current workflow code: a
 * change that breaks replay of running rebuilds fails here. Workflow changes that alter
 * commands must be guarded with patched() (see docs/operations.md, "Changing workflow code").
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { projectRoot } from '../lib/paths';
import { loadWorkflowBundle } from '../worker/bundle';

Runtime.install({ logger: new DefaultLogger('WARN') });

const dir = path.join(projectRoot(), 'test', 'histories');
/** Recorded history name → its workflow id (index.json, written by dev/record-histories.ts). */
const index: Record<string, string> = fs.existsSync(path.join(dir, 'index.json'))
  ? JSON.parse(fs.readFileSync(path.join(dir, 'index.json'), 'utf8'))
  : {};
const files = Object.keys(index)
  .map((name) => `${name}.json`)
  .sort();

test('recorded histories replay against the current workflow code', async () => {
  assert.ok(files.length >= 9, `expected at least 9 recorded histories in ${dir}, found ${files.length}`);
  const workflowBundle = await loadWorkflowBundle(); // what workers run: the prebuilt bundle
  const histories = files.map((f) => ({
    workflowId: index[f.replace(/\.json$/, '')],
    history: JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')),
  }));
  const results = [];
  for await (const r of Worker.runReplayHistories({ workflowBundle }, histories)) results.push(r);
  assert.equal(results.length, files.length);
  const failed = results.filter((r) => r.error).map((r) => `${r.workflowId} (run ${r.runId}): ${r.error!.message}`);
  assert.equal(
    failed.length,
    0,
    `${failed.length} of ${results.length} histories do not replay:\n${failed.join('\n')}`,
  );
  assert.deepEqual(results.map((r) => r.workflowId).sort(), Object.values(index).sort());
  const kinds = files.join(' ');
  assert.match(kinds, /normal/);
  assert.match(kinds, /killed/);
  assert.match(kinds, /continue-as-new/);
  assert.match(kinds, /pause-resume/);
  assert.match(kinds, /cancel-signal/);
  assert.match(kinds, /set-throttle/);
  assert.match(kinds, /repaired-bucket/);
  assert.match(kinds, /shrink-refused/);
});
