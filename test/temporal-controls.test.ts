/**
 * Temporal's own controls with the real Temporal CLI, real workers and PostgreSQL: each leaves the
 * catalog equal to the source with nothing duplicated.
 * - `temporal activity pause` on a page activity (`page-<n>`): the window starts no new page while it
 *   is paused, `progress` names the page; `unpause`: it completes and publishes.
 * - `temporal activity reset` on a page activity: attempt numbers restart at 1, claim rows do not collide.
 * - `temporal workflow reset --type LastContinuedAsNew`, and to the first workflow task after the
 *   plan (`--event-id`): the same version, completed and published.
 * - A batch `temporal workflow signal --query …` pause and resume of one catalog's rebuild.
 * - Re-running publish for the active version (the activity and the `PublishCatalog` child) changes nothing.
 * - A worker SIGKILLed before its page attempt wrote anything is named by the retry's `page_retry` event.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import type { TestContext } from 'node:test';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { WorkflowHandle } from '@temporalio/client';
import type { PoolClient } from 'pg';
import { getProgress, rebuildWorkflowId, setThrottle, startRebuild } from '../client';
import { createActivities } from '../activities';
import { SourceRegistry } from '../lib/sources';
import type { RebuildFixture } from '../dev/harness/fixture';
import { rebuildFixture } from '../dev/harness/fixture';
import { runActivity } from '../dev/harness/activity-env';
import { compareCatalogToSource, privateTemporal } from '../dev/harness/harness';
import { events, ledger } from '../dev/harness/faults';
import { heldWindow } from '../dev/harness/observe';
import { waitFor } from '../dev/harness/wait';
import { publishWorkflowId } from '../workflows/names';

/** `PendingActivityInfo.state` of an activity an operator paused whose attempt ended. */
const PENDING_ACTIVITY_STATE_PAUSED = 4;

let temporal: Awaited<ReturnType<typeof privateTemporal>>;

before(async () => {
  temporal = await privateTemporal();
});

after(async () => {
  await temporal?.stop();
  if (temporal) fs.rmSync(temporal.dir, { recursive: true, force: true });
});

/** Runs the Temporal CLI against the test's dev server; returns its stdout. */
function temporalCli(args: string[]): string {
  const r = spawnSync(temporal.cli, [...args, '--address', temporal.address, '--namespace', 'default'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.status !== 0) throw new Error(`temporal ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** Fresh databases with a generated source (seed 15), a worker fleet and a client, released by the test's cleanup. */
const setup = (t: TestContext, tag: string, jobs: number) =>
  rebuildFixture(t, { address: temporal.address, tag, jobs, seed: 15 });

/** `temporal activity <command>` on a page activity of a rebuild. */
const pageActivity = (command: string, pageNo: number, workflowId: string) =>
  temporalCli(['activity', command, '--activity-id', `page-${pageNo}`, '--workflow-id', workflowId]);

/** `temporal workflow reset` of a rebuild to the point `to` names; resolves with the run id it replaced. */
async function resetRebuild(ctx: RebuildFixture, workflowId: string, to: string[]): Promise<string> {
  const handle = ctx.client.workflow.getHandle(workflowId);
  const before = (await handle.describe()).runId;
  temporalCli(['workflow', 'reset', '--workflow-id', workflowId, ...to, '--reason', 'test']);
  await waitFor('a new run after the reset', async () => (await handle.describe()).runId !== before);
  return before;
}

/** The latest run of the rebuild (after a reset or continue-as-new). */
const latest = (ctx: RebuildFixture, handle: WorkflowHandle) => ctx.client.workflow.getHandle(handle.workflowId);

/** Drops the pause between pages of the rebuild's latest run (again when that run just continued as new). */
const speedUp = (ctx: RebuildFixture, handle: WorkflowHandle) =>
  waitFor('the throttle set', () => setThrottle(latest(ctx, handle), { pauseBetweenPagesMs: 0 }).then(() => true));

/** Activity ids of the `copyPage` activities the latest run scheduled, in order. */
async function scheduledPages(ctx: RebuildFixture, handle: WorkflowHandle): Promise<string[]> {
  const h = await latest(ctx, handle).fetchHistory();
  return (h.events ?? [])
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => a?.activityType?.name === 'copyPage')
    .map((a) => a!.activityId!);
}

/** Whether a worker's page transaction sleeps in the slow-page fault's pg_sleep. */
async function slowPageSleeping(ctx: RebuildFixture, pid: number): Promise<boolean> {
  const sql = `SELECT 1 FROM pg_stat_activity WHERE (application_name = $1 OR application_name LIKE $1 || ':page:%') AND state = 'active' AND query LIKE 'SELECT pg_sleep%'`;
  return !!(await ctx.dbs.catalogPool.query(sql, [`catalog-rebuild:worker:${pid}`])).rowCount;
}

/**
 * The published catalog equals the source field by field; the version's ledger holds every planned
 * page once, committed, adding up to the source; the version's rows are the source's (none twice).
 */
async function assertComplete(ctx: RebuildFixture, versionId: string, jobs: number): Promise<void> {
  const cmp = await compareCatalogToSource(ctx.dbs.catalogPool, ctx.dbs.sourcePool, ctx.catalog);
  assert.equal(cmp.rows, jobs);
  assert.equal(cmp.catalog, cmp.source, 'active_jobs equals the source');
  const rows = await ledger(ctx.dbs.catalogPool, versionId);
  const v = await ctx.dbs.catalogPool.query<{ pages_total: number; status: string }>(
    `SELECT pages_total, status FROM version WHERE version_id = $1`,
    [versionId],
  );
  assert.equal(v.rows[0].status, 'active');
  assert.deepEqual(
    rows.map((r) => [r.pageNo, r.committedAt !== null]),
    Array.from({ length: v.rows[0].pages_total }, (_, i) => [i + 1, true]),
    'one committed ledger row per planned page',
  );
  assert.equal(
    rows.reduce((n, r) => n + r.rows, 0),
    jobs,
    'ledger rows add up to the source',
  );
  const dup = await ctx.dbs.catalogPool.query<{ n: number; keys: number }>(
    `SELECT count(*)::int AS n, count(DISTINCT job_key)::int AS keys FROM job WHERE version_id = $1`,
    [versionId],
  );
  assert.deepEqual(dup.rows[0], { n: jobs, keys: jobs }, 'no job row twice');
}

test('temporal activity pause on a page activity stops the window until unpause; progress names the page; catalog = source', async (t) => {
  const JOBS = 3_000;
  const ctx = await setup(t, 'apause', JOBS);
  const w = await ctx.spawn({ CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 3, ms: 25_000 } }) });
  const handle = await ctx.start({
    pageSize: 100,
    concurrency: 2,
    heartbeatTimeoutMs: 2_000,
    pauseBetweenPagesMs: 200,
  });
  await waitFor('page 3 to sleep in its transaction', () => slowPageSleeping(ctx, w.pid), { intervalMs: 25 });
  pageActivity('pause', 3, handle.workflowId);

  const paused = await waitFor(
    'progress to name page 3 as paused by an operator, with no other page in flight',
    async () => {
      const p = await ctx.progress(handle);
      return p.operatorPausedPages?.includes(3) && p.inFlight === 1 && p;
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  t.diagnostic(`paused at ${paused.pagesDone} of ${paused.pagesTotal} pages: ${paused.lastEvent}`);
  assert.deepEqual(paused.operatorPausedPages, [3]);
  assert.ok(paused.pagesTotal - paused.pagesDone > 2, 'pages were left to start when the window stopped');
  const scheduled = await scheduledPages(ctx, handle);
  const committed = (await ledger(ctx.dbs.catalogPool, paused.versionId!)).length;
  // Instead of watching for a while: page 3's attempt ended (PAUSED), no page transaction is open,
  // and the window ran again (a setThrottle update) while held.
  await heldWindow(handle, { catalogPool: ctx.dbs.catalogPool });
  assert.deepEqual(await scheduledPages(ctx, handle), scheduled, 'no page activity scheduled while paused');
  assert.equal((await ledger(ctx.dbs.catalogPool, paused.versionId!)).length, committed, 'no page committed');
  assert.deepEqual((await ctx.progress(handle)).operatorPausedPages, [3]);

  pageActivity('unpause', 3, handle.workflowId);
  await waitFor('the window to run again', async () => (await ctx.progress(handle)).operatorPausedPages.length === 0, {
    timeoutMs: 20_000,
    intervalMs: 100,
  });
  await setThrottle(handle, { pauseBetweenPagesMs: 0 });
  const r = await ctx.result(handle);
  assert.equal(r.published, true);
  await assertComplete(ctx, r.versionId, JOBS);
  const ids = await scheduledPages(ctx, handle);
  assert.deepEqual(
    [...ids].sort(),
    Array.from({ length: r.pagesTotal }, (_, i) => `page-${i + 1}`).sort(),
    'each page activity scheduled once, with a readable id',
  );
  const retry = (await events(ctx.dbs.catalogPool, r.versionId, 'page_retry')).find((e) => e.details.pageNo === 3);
  assert.equal(retry?.details.lastWorkerIdentity, w.identity, 'page_retry of page 3 names the paused worker');
});

test('temporal activity reset on a page activity: its attempt numbers restart, claim rows do not collide; catalog = source', async (t) => {
  const JOBS = 2_000;
  const ctx = await setup(t, 'areset', JOBS);
  // Attempt 1 of page 3 sleeps in its transaction; the operator pauses it (the attempt gives the page
  // up), then resets it: Temporal runs attempt 1 again, on the same worker.
  const w = await ctx.spawn({ CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 3, ms: 5_000 } }) });
  const handle = await ctx.start({
    pageSize: 200,
    concurrency: 2,
    heartbeatTimeoutMs: 2_000,
    pauseBetweenPagesMs: 100,
  });
  await waitFor('page 3 to sleep in its transaction', () => slowPageSleeping(ctx, w.pid), { intervalMs: 25 });
  const { versionId } = await ctx.progress(handle);
  pageActivity('pause', 3, handle.workflowId);
  await waitFor(
    'page 3 paused with its attempt ended',
    async () =>
      (await handle.describe()).raw.pendingActivities?.find((a) => a.activityId === 'page-3')?.state ===
      PENDING_ACTIVITY_STATE_PAUSED,
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  pageActivity('reset', 3, handle.workflowId);
  const r = await ctx.result(handle);
  assert.equal(r.published, true);
  await assertComplete(ctx, r.versionId, JOBS);
  const claims = await ctx.dbs.catalogPool.query<{ attempt: number; worker_identity: string }>(
    `SELECT attempt, worker_identity FROM page_attempt WHERE version_id = $1 AND page_no = 3 ORDER BY started_at`,
    [versionId],
  );
  t.diagnostic(`claims of page 3: ${JSON.stringify(claims.rows)}`);
  assert.deepEqual(
    claims.rows.map((c) => [c.attempt, c.worker_identity]),
    [
      [1, w.identity],
      [1, w.identity],
    ],
    'attempt 1 of page 3 ran twice on the same worker: one claim row each',
  );
  const ids = await ctx.dbs.catalogPool.query<{ n: number }>(
    `SELECT count(DISTINCT claim_id)::int AS n FROM page_attempt WHERE version_id = $1 AND page_no = 3`,
    [versionId],
  );
  assert.equal(ids.rows[0].n, 2, 'each claim row has its own claim id');
  const page3 = (await ledger(ctx.dbs.catalogPool, r.versionId))[2];
  assert.equal(page3.attempt, 1, 'the reset attempt 1 committed page 3');
  const retry = (await events(ctx.dbs.catalogPool, r.versionId, 'page_retry')).filter((e) => e.details.pageNo === 3);
  assert.ok(
    retry.some((e) => e.details.attempt === 1 && e.details.lastWorkerIdentity === w.identity),
    `the reset attempt names the execution before it: ${JSON.stringify(retry.map((e) => e.message))}`,
  );
});

test('temporal workflow reset to the last continue-as-new and to the first workflow task after the plan: same version, catalog = source', async (t) => {
  const JOBS = 2_000;
  const ctx = await setup(t, 'wreset', JOBS);
  await ctx.spawn();
  const handle = await ctx.start({ pageSize: 200, concurrency: 2, maxPagesPerRun: 2, pauseBetweenPagesMs: 100 });
  const p = await waitFor('the third run', async () => {
    const q = await ctx.progress(handle);
    return q.run >= 3 && q;
  });
  await resetRebuild(ctx, handle.workflowId, ['--type', 'LastContinuedAsNew']);
  await speedUp(ctx, handle);
  const r1 = (await latest(ctx, handle).result()) as { versionId: string; published: boolean; runs: number };
  assert.equal(r1.published, true);
  assert.equal(r1.versionId, p.versionId, 'the reset run completed the same version');
  await assertComplete(ctx, r1.versionId, JOBS);

  // Second rebuild: reset to the workflow task completed right after planRebuild returned.
  const h2 = await ctx.start({ pageSize: 200, concurrency: 2, maxPagesPerRun: 1_000, pauseBetweenPagesMs: 100 });
  const p2 = await waitFor('3 pages done', async () => {
    const q = await ctx.progress(h2);
    return q.pagesDone >= 3 && q;
  });
  // The first activity to complete is planRebuild: reset to the workflow task that took its result.
  const evs = (await latest(ctx, h2).fetchHistory()).events ?? [];
  const planDone = evs.findIndex((e) => e.activityTaskCompletedEventAttributes);
  const resetTo = evs.slice(planDone).find((e) => e.workflowTaskCompletedEventAttributes)!;
  const run2 = await resetRebuild(ctx, h2.workflowId, ['--event-id', String(resetTo.eventId)]);
  await speedUp(ctx, h2);
  const info = (await latest(ctx, h2).describe()).raw.workflowExecutionInfo;
  assert.equal(info?.firstRunId, run2, 'a reset keeps the first run id (the plan key)');
  const r2 = (await latest(ctx, h2).result()) as { versionId: string; published: boolean };
  assert.equal(r2.published, true);
  assert.equal(r2.versionId, p2.versionId, 'the reset run kept the planned version');
  await assertComplete(ctx, r2.versionId, JOBS);
  const versions = await ctx.dbs.catalogPool.query(`SELECT 1 FROM version WHERE catalog_name = $1`, [ctx.catalog]);
  assert.equal(versions.rowCount, 2, 'no version planned by a reset');
});

test('a batch temporal workflow signal by query pauses and resumes one catalog’s rebuild; catalog = source', async (t) => {
  const JOBS = 2_000;
  const ctx = await setup(t, 'batch', JOBS);
  await ctx.spawn();
  const handle = await ctx.start({ pageSize: 100, concurrency: 2, pauseBetweenPagesMs: 100 });
  // A rebuild of another catalog on the same queue: the query must leave it alone. It runs slowly
  // (2 s between pages, 40 s at least) so that it still runs when it is looked at; it is terminated.
  const otherCatalog = `${ctx.catalog}-other`;
  const { handle: other } = await startRebuild(
    ctx.client,
    { catalog: otherCatalog, source: 'director', pageSize: 100, concurrency: 1, pauseBetweenPagesMs: 2_000 },
    { taskQueue: ctx.taskQueue },
  );
  t.after(() => other.terminate('test cleanup').catch(() => undefined));
  await waitFor('both rebuilds copying', async () => {
    const [a, b] = [await ctx.progress(handle), await getProgress(other)];
    return a.pagesDone >= 2 && b.pagesDone >= 1;
  });
  const query = `WorkflowType='RebuildCatalog' AND ExecutionStatus='Running' AND CatalogName='${ctx.catalog}'`;
  const batch = (name: string) =>
    temporalCli(['workflow', 'signal', '--query', query, '--name', name, '--reason', `test: ${name}`, '--yes']);
  batch('pause');
  const paused = await waitFor('the rebuild paused by the batch', async () => {
    const q = await ctx.progress(handle);
    return q.paused && q.inFlight === 0 && q;
  });
  assert.ok(paused.pagesDone < paused.pagesTotal, 'paused before the end');
  assert.equal((await getProgress(other)).paused, false, 'the other catalog’s rebuild is not paused');
  await heldWindow(handle, { catalogPool: ctx.dbs.catalogPool });
  assert.equal((await ctx.progress(handle)).pagesDone, paused.pagesDone, 'no page committed while paused');
  batch('resume');
  await waitFor('the rebuild resumed by the batch', async () => !(await ctx.progress(handle)).paused);
  await setThrottle(handle, { pauseBetweenPagesMs: 0 });
  const r = await ctx.result(handle);
  assert.equal(r.published, true);
  await assertComplete(ctx, r.versionId, JOBS);
  await other.terminate('done');
});

test('re-running publish for the active version changes nothing (the activity and the PublishCatalog child)', async (t) => {
  const JOBS = 1_000;
  const ctx = await setup(t, 'repub', JOBS);
  await ctx.spawn();
  const first = await ctx.result(await ctx.start({ pageSize: 250 }));
  const second = await ctx.result(await ctx.start({ pageSize: 250 }));
  assert.equal(second.previousVersionId, first.versionId);
  const pool = ctx.dbs.catalogPool;
  const snapshot = async () => ({
    active: (
      await pool.query(`SELECT version_id::text, published_at FROM active WHERE catalog_name = $1`, [ctx.catalog])
    ).rows,
    versions: (
      await pool.query(
        `SELECT version_id::text, status, published_at, finished_at FROM version WHERE catalog_name = $1 ORDER BY version_id`,
        [ctx.catalog],
      )
    ).rows,
    events: (await pool.query(`SELECT count(*)::int AS n FROM event WHERE catalog_name = $1`, [ctx.catalog])).rows[0],
  });
  const before = await snapshot();
  assert.deepEqual(
    before.versions.map((v: { status: string }) => v.status),
    ['retired', 'active'],
  );

  const sources = new SourceRegistry(() => ({ kind: 'bareos', databaseUrl: ctx.dbs.sourceUrl }));
  t.after(() => sources.close());
  const acts = createActivities({ pool, sources, identity: 'test@host', buildId: 'test' });
  const again = await runActivity(acts.publishVersion, {
    catalog: ctx.catalog,
    versionId: second.versionId,
    allowShrink: false,
  });
  assert.equal(again.previousVersionId, first.versionId, 'the publish reports the version it replaced');
  assert.deepEqual(await snapshot(), before, 'publishVersion again: nothing changed');

  const child: { retired: string[] } = await ctx.client.workflow.execute('PublishCatalog', {
    workflowId: publishWorkflowId(rebuildWorkflowId(ctx.catalog)),
    taskQueue: ctx.taskQueue,
    args: [{ catalog: ctx.catalog, versionId: second.versionId, allowShrink: false, retention: 1 }],
  });
  assert.deepEqual(child.retired, [], 'nothing retired again');
  assert.deepEqual(await snapshot(), before, 'PublishCatalog again: nothing changed');
  const cmp = await compareCatalogToSource(pool, ctx.dbs.sourcePool, ctx.catalog);
  assert.equal(cmp.catalog, cmp.source);
});

test('page_retry names a worker SIGKILLed before its page attempt wrote anything', async (t) => {
  const JOBS = 1_000;
  const ctx = await setup(t, 'killnamed', JOBS);
  const pool = ctx.dbs.catalogPool;
  const victim = await ctx.spawn();
  // Hold every attempt's claim row back (a lock on page_attempt), so the victim's attempt of page 1
  // is in flight, has heartbeated, and has written nothing when it dies.
  const app = `catalog-rebuild:worker:${victim.pid}`;
  let lock: PoolClient | null = await pool.connect();
  const unlock = async () => {
    const c = lock;
    lock = null;
    await c?.query('ROLLBACK').catch(() => undefined);
    c?.release();
  };
  t.after(unlock);
  await lock.query('BEGIN; LOCK TABLE page_attempt IN SHARE MODE');
  const handle = await ctx.start({ pageSize: 250, concurrency: 1, heartbeatTimeoutMs: 2_000 });
  const waiting = `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO page_attempt%'`;
  await waitFor('the victim’s attempt of page 1 to wait for its claim', async () => {
    return !!(await pool.query(waiting, [app])).rowCount;
  });
  ctx.fleet.kill(victim);
  await victim.exited;
  await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [app]);
  await unlock();
  await ctx.spawn();
  const r = await ctx.result(handle);
  assert.equal(r.published, true);
  const versionId = r.versionId;
  const claims = await pool.query(`SELECT 1 FROM page_attempt WHERE version_id = $1 AND worker_identity = $2`, [
    versionId,
    victim.identity,
  ]);
  assert.equal(claims.rowCount, 0, 'the killed attempt wrote no claim row');
  const retries = await events(pool, versionId, 'page_retry');
  t.diagnostic(retries.map((e) => e.message).join(' | '));
  const retry = retries.find((e) => e.details.pageNo === 1);
  assert.ok(retry, 'page 1 was retried');
  assert.equal(
    retry.details.lastWorkerIdentity,
    victim.identity,
    `page_retry names the killed worker: ${retry.message}`,
  );
  assert.doesNotMatch(retry.message, /unknown worker/);
  await assertComplete(ctx, r.versionId, JOBS);
});
