/**
 * The patch lifecycle of workflows/patches.ts: every `patched()` / `deprecatePatch()` of the
 * workflows goes through its `patchApplies`, at most two patch ids are registered, and each stage
 * replays the histories of the stage before it, shown on four releases of a small fixture workflow
 * (dev/fixtures/patch-lifecycle/: before the fix, `patched`, `deprecated`, removed) run on a local
 * Temporal server and replayed with `Worker.runReplayHistories`.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { History } from '@temporalio/common/lib/proto-utils';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { projectRoot } from '../lib/paths';
import { PATCHES } from '../workflows/patches';
import { localTestEnv } from '../dev/harness/workflow-env';
import * as activities from '../dev/fixtures/patch-lifecycle/activities';

Runtime.install({ logger: new DefaultLogger('ERROR') });

const RELEASES = ['v1', 'v2', 'v3', 'v4'] as const;
type Release = (typeof RELEASES)[number];
const fixtureDir = path.join(projectRoot(), 'dist', 'dev', 'fixtures', 'patch-lifecycle');

let env: TestWorkflowEnvironment;
const bundles = new Map<Release, string>();
/** The history of one run of each release, recorded on the server. */
const histories = new Map<Release, History>();

before(async () => {
  env = await localTestEnv();
  for (const r of RELEASES) {
    const { code } = await bundleWorkflowCode({
      workflowsPath: path.join(fixtureDir, `${r}.js`),
      logger: new DefaultLogger('ERROR'),
    });
    bundles.set(r, code);
  }
});

after(async () => {
  await env?.teardown();
});

/** Runs the fixture workflow of `release` once on a worker of that release; records its history. */
async function record(release: Release): Promise<string> {
  const taskQueue = `patches-${release}-${randomBytes(3).toString('hex')}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: { code: bundles.get(release)! },
    activities,
  });
  const workflowId = `patch-lifecycle-${release}-${randomBytes(3).toString('hex')}`;
  const result = await worker.runUntil(
    env.client.workflow.execute('Fixture', { taskQueue, workflowId, workflowExecutionTimeout: '30 seconds' }),
  );
  histories.set(release, await env.client.workflow.getHandle(workflowId).fetchHistory());
  return result as string;
}

/** Replays `release`'s recorded history on the code of `code`; the replay error's message, or null. */
async function replay(release: Release, code: Release): Promise<string | null> {
  try {
    await Worker.runReplayHistory({ workflowBundle: { code: bundles.get(code)! } }, histories.get(release)!);
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

test('every patched() and deprecatePatch() of the workflows goes through workflows/patches.ts; at most two patch ids', () => {
  const dir = path.join(projectRoot(), 'workflows');
  const direct: string[] = [];
  const used = new Set<string>();
  for (const f of fs.readdirSync(dir).filter((n) => n.endsWith('.ts'))) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    if (f !== 'patches.ts' && /\b(patched|deprecatePatch)\s*\(/.test(text)) direct.push(f);
    for (const m of text.matchAll(/patchApplies\(\s*['"]([^'"]+)['"]/g)) used.add(m[1]);
  }
  assert.deepEqual(direct, [], 'patched()/deprecatePatch() called outside workflows/patches.ts');
  assert.ok(PATCHES.size <= 2, `at most two patch ids, found ${[...PATCHES.keys()].join(', ')}`);
  for (const id of used) assert.ok(PATCHES.has(id), `patch ${id} is used but not registered`);
  for (const id of PATCHES.keys()) assert.ok(used.has(id), `patch ${id} is registered but not used: remove it`);
});

test('lifecycle: patched replays the histories from before the patch, deprecated those of patched, removed those of deprecated', async () => {
  assert.equal(await record('v1'), 'old');
  assert.equal(await record('v2'), 'new', 'a new run takes the patched path');
  assert.equal(await record('v3'), 'new');
  assert.equal(await record('v4'), 'new');
  assert.deepEqual(activities.steps, ['old', 'new', 'new', 'new']);

  // Each stage replays its own history and the one before it.
  for (const [code, replays] of [
    ['v2', ['v1', 'v2']],
    ['v3', ['v2', 'v3']],
    ['v4', ['v3', 'v4']],
  ] as const) {
    for (const h of replays) assert.equal(await replay(h, code), null, `${code} replays the history of ${h}`);
  }
  // Skipping a stage breaks replay: that is why each step waits for the rebuilds of the last one.
  assert.match(String(await replay('v1', 'v3')), /[Nn]ondetermin/, 'deprecated cannot replay pre-patch histories');
});
