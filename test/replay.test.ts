/**
 * Replays recorded histories of real rebuilds (test/histories/*.json) against the current workflow
 * code: a change that breaks replay of running rebuilds fails here. Workflow changes that alter
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
/** Recorded history name → its workflow id (index.json, written by test/helpers/record-histories.ts). */
const index: Record<string, string> = fs.existsSync(path.join(dir, 'index.json')) ? JSON.parse(fs.readFileSync(path.join(dir, 'index.json'), 'utf8')) : {};
const files = Object.keys(index).map((name) => `${name}.json`).sort();

test('recorded histories replay against the current workflow code', async () => {
  assert.ok(files.length >= 3, `expected at least 3 recorded histories in ${dir}, found ${files.length}`);
  const workflowBundle = await loadWorkflowBundle(); // what workers run: the prebuilt bundle
  const histories = files.map((f) => ({ workflowId: index[f.replace(/\.json$/, '')], history: JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) }));
  const results = [];
  for await (const r of Worker.runReplayHistories({ workflowBundle }, histories)) results.push(r);
  assert.equal(results.length, files.length);
  for (const r of results) assert.equal(r.error, undefined, `${r.workflowId}: ${r.error?.message}`);
  assert.deepEqual(results.map((r) => r.workflowId).sort(), Object.values(index).sort());
  const kinds = files.join(' ');
  assert.match(kinds, /normal/);
  assert.match(kinds, /killed/);
  assert.match(kinds, /continue-as-new/);
});
