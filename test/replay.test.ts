/**
 * Replays the recorded releases (test/releases/<tag>/: histories of real rebuilds, recorded by
 * `npm run record:histories -- --release <tag>`: a normal rebuild, a worker killed mid-page,
 * continue-as-new, pause and resume, the cancel signal, a setThrottle update, a repaired bucket, a
 * publish refused by the shrink guard, an activity paused by an operator):
 * - each release's histories on that release's own workflow bundle (the one its workers ran, kept
 *   beside them): the recording is faithful and the release is deterministic;
 * - the newest release's histories on this build's bundle. Rebuilds are pinned to their build, so a
 *   new build never has to replay them; this says whether this build could still take them over
 *   (the emergency path of docs/operations.md) and that the current code path is covered. When a
 *   workflow change makes it fail, the change is a new release: record its histories.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { projectRoot } from '../lib/paths';
import { loadWorkflowBundle } from '../worker/bundle';
import { bundleHash } from '../worker/build-id';

Runtime.install({ logger: new DefaultLogger('WARN') });

const RELEASES = path.join(projectRoot(), 'test', 'releases');

/** A recorded release: its tag, build id, workflow bundle and histories (workflow id → history JSON). */
interface Release {
  tag: string;
  packageVersion: string;
  buildId: string;
  bundle: string;
  histories: { name: string; workflowId: string; history: unknown }[];
}

/** The releases under test/releases, oldest first (by version). */
function releases(): Release[] {
  const tags = fs.existsSync(RELEASES) ? fs.readdirSync(RELEASES).filter((t) => /^v\d+\.\d+\.\d+$/.test(t)) : [];
  const num = (t: string) => t.slice(1).split('.').map(Number);
  tags.sort((a, b) => {
    const [x, y] = [num(a), num(b)];
    return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
  });
  return tags.map((tag) => {
    const dir = path.join(RELEASES, tag);
    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'release.json'), 'utf8')) as {
      buildId: string;
      packageVersion: string;
    };
    const index = JSON.parse(fs.readFileSync(path.join(dir, 'histories', 'index.json'), 'utf8')) as Record<
      string,
      string
    >;
    return {
      tag,
      packageVersion: meta.packageVersion,
      buildId: meta.buildId,
      bundle: gunzipSync(fs.readFileSync(path.join(dir, 'workflow-bundle.js.gz'))).toString('utf8'),
      histories: Object.entries(index).map(([name, workflowId]) => ({
        name,
        workflowId,
        history: JSON.parse(fs.readFileSync(path.join(dir, 'histories', `${name}.json`), 'utf8')),
      })),
    };
  });
}

/** Replays `r`'s histories on `code`; the failures as `<name>: <message>` lines. */
async function replayAll(r: Release, code: string): Promise<string[]> {
  const failed: string[] = [];
  let n = 0;
  for await (const res of Worker.runReplayHistories({ workflowBundle: { code } }, r.histories)) {
    n++;
    if (res.error) failed.push(`${res.workflowId}: ${res.error.message}`);
  }
  assert.equal(n, r.histories.length);
  return failed;
}

const recorded = releases();

test('every recorded release replays its histories on its own workflow bundle', async () => {
  assert.ok(recorded.length >= 1, `no recorded release in ${RELEASES}`);
  for (const r of recorded) {
    assert.equal(
      `${r.packageVersion}+${bundleHash(r.bundle)}`,
      r.buildId,
      `${r.tag}: the bundle has the recorded build id`,
    );
    const kinds = r.histories.map((h) => h.name).join(' ');
    for (const k of ['normal', 'killed', 'continue-as-new', 'pause-resume', 'cancel-signal', 'set-throttle'])
      assert.match(kinds, new RegExp(k), `${r.tag} has a ${k} history`);
    for (const k of ['repaired-bucket', 'shrink-refused', 'activity-pause'])
      assert.match(kinds, new RegExp(k), `${r.tag} has a ${k} history`);
    assert.deepEqual(await replayAll(r, r.bundle), [], `${r.tag} replays on its own bundle`);
  }
});

test('the newest release’s histories replay on this build’s workflow code', async () => {
  const newest = recorded[recorded.length - 1];
  const failed = await replayAll(newest, await loadWorkflowBundle());
  assert.deepEqual(
    failed,
    [],
    `this build's workflow code does not replay ${newest.tag}'s histories. Running rebuilds are pinned to their build, ` +
      `so that is allowed, but it makes this build a new release: record its histories ` +
      `(npm run record:histories -- --release <next tag>; docs/operations.md, "Releases and replay tests")`,
  );
});
