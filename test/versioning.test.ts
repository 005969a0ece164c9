/**
 * An upgrade under Worker Versioning, with two builds on one private dev server:
 * b1 = workers running the recorded v0.1.0 release's workflow bundle (test/releases/v0.1.0) with its
 * build id, b2 = HEAD's workers. A rebuild started on b1 stays pinned to b1 through the rollout to
 * b2 (`temporal worker deployment set-current-version`), while a new rebuild of another catalog runs
 * on b2. With b1's workers SIGKILLed the pinned rebuild waits (b2 commits none of its pages) and
 * `check --rebuild` (a CLI process) is CRITICAL naming b1; `status` names b1 too. When b1 returns, the
 * rebuild finishes and the catalog equals the source.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { setThrottle, startRebuild, waitForResult } from '../client';
import { pinnedBuildOf } from '../client/temporal-facts';
import type { DevServer } from '../dev/env/dev-server';
import { rebuildFixture, serverTimezone } from '../dev/harness/fixture';
import { events, ledger } from '../dev/harness/faults';
import { compareCatalogToSource, privateTemporal, runCliAsync } from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';
import { projectRoot } from '../lib/paths';

const RELEASE_DIR = path.join(projectRoot(), 'test', 'releases', 'v0.1.0');
const B1 = (JSON.parse(fs.readFileSync(path.join(RELEASE_DIR, 'release.json'), 'utf8')) as { buildId: string }).buildId;

let server: DevServer & { dir: string; cli: string };

before(async () => {
  server = await privateTemporal();
});

after(async () => {
  await server?.stop();
  if (server) fs.rmSync(server.dir, { recursive: true, force: true });
});

/** The build id a worker polls as, from its start line. */
function buildOf(worker: { output(): string }): string {
  const m = / as build (\S+) of deployment /.exec(worker.output());
  assert.ok(m, worker.output());
  return m[1];
}

test('a rebuild stays pinned to b1 through a rollout to b2, waits while b1 is gone (CRITICAL naming b1), and finishes on b1', async (t) => {
  const deployment = `catalog-rebuild-upgrade-${process.pid}`;
  const fx = await rebuildFixture(t, {
    address: server.address,
    tag: 'upgrade',
    jobs: 300,
    seed: 21,
    workerEnv: { CATALOG_REBUILD_DEPLOYMENT: deployment },
  });
  const b1Env = {
    CATALOG_REBUILD_TEST_WORKFLOW_BUNDLE: path.join(RELEASE_DIR, 'workflow-bundle.js.gz'),
    CATALOG_REBUILD_BUILD_ID: B1,
  };
  // b1 first: the deployment has no current version, so b1 becomes current.
  const b1 = await fx.spawn(b1Env);
  assert.equal(buildOf(b1), B1);
  const handle = await fx.start({ pageSize: 20, concurrency: 1, pauseBetweenPagesMs: 600_000 });
  await waitFor('page 1 of the rebuild on b1 committed', async () => (await fx.progress(handle)).pagesDone >= 1, {
    timeoutMs: 60_000,
  });
  const pinned = async () => pinnedBuildOf(await handle.describe());
  assert.deepEqual(await pinned(), { deploymentName: deployment, buildId: B1, behavior: 'PINNED', override: false });

  // Roll out b2: its worker starts, then an operator makes it current.
  const b2 = await fx.spawn();
  const B2 = buildOf(b2);
  assert.notEqual(B2, B1);
  await waitFor(
    'b2 registered on the workflow and activity task queues',
    async () => {
      const d = await fx.client.workflowService
        .describeWorkerDeploymentVersion({
          namespace: 'default',
          deploymentVersion: { deploymentName: deployment, buildId: B2 },
        })
        .catch(() => null);
      return (d?.workerDeploymentVersionInfo?.taskQueueInfos ?? []).length >= 2;
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  const set = spawnSync(
    server.cli,
    [
      'worker',
      'deployment',
      'set-current-version',
      '--deployment-name',
      deployment,
      '--build-id',
      B2,
      '--yes',
      '--address',
      server.address,
    ],
    { encoding: 'utf8', timeout: 30_000 },
  );
  assert.equal(set.status, 0, `${set.stdout}\n${set.stderr}`);
  assert.equal((await pinned())?.buildId, B1, 'the running rebuild stays on b1 after the rollout');

  // A new rebuild (another catalog) runs on b2.
  const other = `${fx.catalog}-b2`;
  const { handle: second } = await startRebuild(
    fx.client,
    { catalog: other, source: 'director', pageSize: 100 },
    { taskQueue: fx.taskQueue },
  );
  t.after(() => second.terminate('test cleanup').catch(() => undefined));
  assert.equal((await waitForResult(second)).published, true);
  assert.equal(pinnedBuildOf(await second.describe())?.buildId, B2, 'the new rebuild ran on b2');

  // b1's workers gone: the pinned rebuild waits; b2 does not take it over.
  const versionId = (await fx.progress(handle)).versionId!;
  fx.fleet.kill(b1);
  await b1.exited;
  const checkEnv = { ...fx.env, CATALOG_REBUILD_CHECK_NO_POLLER_SECONDS: '3' };
  const critical = await waitFor(
    'check --rebuild CRITICAL',
    async () => {
      const r = await runCliAsync(['check', '--catalog', fx.catalog, '--rebuild'], checkEnv);
      return r.code === 2 ? r : null;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  const escaped = (s: string) => s.replace(/[.+]/g, '\\$&');
  assert.match(
    critical.stdout.trim(),
    new RegExp(
      `^REBUILD CRITICAL - no worker of build ${escaped(B1)} has polled task queue ${fx.taskQueue} for \\d+ s; ` +
        `rebuild of ${fx.catalog} is copying at page 1/15, 0 rows/s \\(build ${escaped(B1)}\\) \\| `,
    ),
  );
  // A pause sent now waits for b1: the CLI says so, and status shows the memo's state with that caveat.
  const paused = await runCliAsync(['pause', '--catalog', fx.catalog], checkEnv);
  assert.equal(paused.code, 0, paused.stderr);
  assert.match(
    paused.stdout,
    new RegExp(
      `^pause requested: no worker of build ${escaped(B1)} polls task queue ${fx.taskQueue}; it takes effect, and status shows it, when one runs the rebuild$`,
      'm',
    ),
  );
  const status = await runCliAsync(['status', '--catalog', fx.catalog], checkEnv);
  assert.equal(status.code, 0, status.stderr);
  assert.match(
    status.stdout,
    new RegExp(`^build: ${escaped(B1)} \\(pinned, deployment ${deployment}; 0 workers of this build poll\\)$`, 'm'),
  );
  assert.match(
    status.stdout,
    new RegExp(
      `^pause: not paused, as the rebuild last recorded it \\(memo\\); a pause, resume or cancel sent since takes effect, and shows here, when a worker of build ${escaped(B1)} runs the rebuild$`,
      'm',
    ),
  );
  assert.match(status.stdout, /^catalog database: version \d+ building · 1\/15 pages committed \(checkpoint 1\)/m);
  assert.doesNotMatch(status.stdout, /^\{/m, 'text, not JSON');
  assert.equal((await runCliAsync(['resume', '--catalog', fx.catalog], checkEnv)).code, 0);
  assert.equal((await pinned())?.buildId, B1, 'still pinned to b1 with only b2 polling');
  const waiting = await ledger(fx.dbs.catalogPool, versionId);
  assert.deepEqual(
    waiting.map((p) => p.workerIdentity),
    waiting.map(() => b1.identity),
    'every committed page is b1s',
  );

  // b1 returns: the rebuild goes on there and finishes equal to the source.
  const b1Again = await fx.spawn(b1Env);
  await setThrottle(handle, { pauseBetweenPagesMs: 0 });
  // The pause and resume sent while b1 was gone ran when it returned, in order.
  await waitFor('the paused and resumed events', async () => {
    const kinds = (await events(fx.dbs.catalogPool, versionId)).map((e) => e.kind);
    return kinds.filter((k) => k === 'paused' || k === 'resumed').join(',') === 'paused,resumed';
  });
  const result = await fx.result(handle, 120_000);
  assert.equal(result.published, true);
  const pages = await ledger(fx.dbs.catalogPool, versionId);
  assert.equal(pages.length, 15);
  assert.ok(
    pages.every((p) => p.workerIdentity === b1.identity || p.workerIdentity === b1Again.identity),
    `no page committed by b2 (${b2.identity}): ${JSON.stringify(pages.map((p) => p.workerIdentity))}`,
  );
  const cmp = await compareCatalogToSource(
    fx.dbs.catalogPool,
    fx.dbs.sourcePool,
    fx.catalog,
    await serverTimezone(fx.dbs.sourcePool),
  );
  assert.equal(cmp.catalog, cmp.source);
  assert.equal(cmp.rows, 300);
});
