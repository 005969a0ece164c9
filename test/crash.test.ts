/**
 * Crash safety under real faults (issue 3; design.md G3, G4, G5, G7, G8, G9): real worker processes
 * against one private Temporal dev server (free ports, own SQLite file) and fresh databases on the
 * machine's PostgreSQL. Workers are SIGKILLed inside page transactions (found through
 * pg_stat_activity), frozen with SIGSTOP, killed during reconcile and publish, and the dev server is
 * restarted mid-rebuild; every assertion reads the ledger, the attempts, the events and the catalog.
 */
import type { TestContext } from 'node:test';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import type { RebuildProgress } from '../client';
import { cancel, setThrottle } from '../client';
import { generateBareosSource } from '../dev/bareos-generator';
import type { TestDatabases } from '../dev/harness/harness';
import { compareCatalogToSource, privateTemporal } from '../dev/harness/harness';
import type { RebuildFixture as Ctx } from '../dev/harness/fixture';
import { rebuildFixture } from '../dev/harness/fixture';
import { deadAttemptsTimedOut, serverDownSeen } from '../dev/harness/observe';
import { waitFor } from '../dev/harness/wait';
import type { ReaderObservation } from '../dev/harness/faults';
import {
  events,
  ledger,
  killInsidePageTransaction,
  ledgerCheckpoint,
  lostPages,
  pageAttempts,
  pageTransactions,
  partitionFingerprint,
  readActive,
  startReaderLoop,
  TemporalProxy,
} from '../dev/harness/faults';

type PrivateTemporal = Awaited<ReturnType<typeof privateTemporal>>;
let temporal: PrivateTemporal;
const temporalDirs: string[] = [];

before(async () => {
  temporal = await privateTemporal();
  temporalDirs.push(temporal.dir);
});

after(async () => {
  await temporal?.stop();
  for (const d of temporalDirs) fs.rmSync(d, { recursive: true, force: true });
});

/** Fresh databases with a generated Bareos source (seed 11), a worker fleet and a client; released by the test's cleanup. */
const setup = (t: TestContext, tag: string, jobs: number): Promise<Ctx> =>
  rebuildFixture(t, { address: temporal.address, tag, jobs, seed: 11 });

/** Waits until the rebuild has planned its version; returns the version id. */
async function versionOf(ctx: Ctx, handle: WorkflowHandle): Promise<string> {
  return waitFor('the rebuild to plan its version', async () => (await ctx.progress(handle)).versionId, {
    timeoutMs: 30_000,
    intervalMs: 50,
  });
}

/** Every planned page is in the ledger exactly once and committed; returns the ledger. */
async function assertLedgerComplete(ctx: Ctx, versionId: string, pagesTotal: number, sourceRows: number) {
  const rows = await ledger(ctx.dbs.catalogPool, versionId);
  assert.equal(rows.length, pagesTotal, 'one ledger row per planned page');
  assert.deepEqual(
    rows.map((r) => r.pageNo),
    Array.from({ length: pagesTotal }, (_, i) => i + 1),
    'ledger holds pages 1..pagesTotal, each once',
  );
  assert.deepEqual(
    rows.filter((r) => r.committedAt === null).map((r) => r.pageNo),
    [],
    'every ledger row is committed',
  );
  assert.equal(
    rows.reduce((n, r) => n + r.rows, 0),
    sourceRows,
    'ledger rows add up to the source',
  );
  const planned = await ctx.dbs.catalogPool.query<{ n: number }>(
    `SELECT pages_total AS n FROM version WHERE version_id = $1`,
    [versionId],
  );
  assert.equal(planned.rows[0].n, pagesTotal, 'pages_total of the version row');
  return rows;
}

async function assertCatalogEqualsSource(ctx: Ctx, jobs: number): Promise<void> {
  const cmp = await compareCatalogToSource(ctx.dbs.catalogPool, ctx.dbs.sourcePool, ctx.catalog);
  assert.equal(cmp.rows, jobs);
  assert.equal(cmp.catalog, cmp.source, 'active_jobs equals the source, field by field');
}

/** Workflow task timeouts in the rebuild's history, by kind (a dead worker's sticky or started task). */
async function workflowTaskTimeouts(handle: WorkflowHandle): Promise<string> {
  const h = await handle.fetchHistory();
  const names: Record<number, string> = { 1: 'start-to-close', 2: 'schedule-to-start (sticky)' };
  const kinds = (h.events ?? [])
    .filter((e) => e.workflowTaskTimedOutEventAttributes)
    .map(
      (e) =>
        names[Number(e.workflowTaskTimedOutEventAttributes!.timeoutType)] ??
        String(e.workflowTaskTimedOutEventAttributes!.timeoutType),
    );
  return kinds.length ? kinds.join(', ') : 'none';
}

/** Longest time between consecutive page commits (ms). */
function longestGap(rows: { committedAt: number | null }[]): number {
  const t = rows.map((r) => r.committedAt!).sort((a, b) => a - b);
  return t.slice(1).reduce((m, x, i) => Math.max(m, x - t[i]), 0);
}

async function versionStatus(ctx: Ctx, versionId: string): Promise<string> {
  const r = await ctx.dbs.catalogPool.query<{ status: string }>(`SELECT status FROM version WHERE version_id = $1`, [
    versionId,
  ]);
  return r.rows[0]?.status;
}

test('SIGKILL of the worker inside a page transaction, three times in one rebuild: it completes by itself, nothing lost or doubled', async (t) => {
  const JOBS = 50_000;
  const PAGE = 500;
  const WINDOW = 4;
  const ctx = await setup(t, 'kill3', JOBS);
  await Promise.all([ctx.fleet.spawn(), ctx.fleet.spawn()]);
  // The pause between page starts stretches the 4-second copy to 25 s so that three kills, each
  // followed by a replacement worker and by the retry that names the killed worker, land inside
  // it; after the third it is lifted.
  const handle = await ctx.start({
    pageSize: PAGE,
    concurrency: WINDOW,
    heartbeatTimeoutMs: 5_000,
    pauseBetweenPagesMs: 250,
  });
  const versionId = await versionOf(ctx, handle);

  const kills: { identity: string; at: number; checkpointAtKill: number; state: string }[] = [];
  const thresholds = [10, 25, 40];
  for (const committedPages of thresholds) {
    await waitFor(
      `${committedPages} pages committed`,
      async () => (await ledger(ctx.dbs.catalogPool, versionId)).length >= committedPages,
      { intervalMs: 20 },
    );
    const { worker, session, at } = await killInsidePageTransaction(ctx.dbs.catalogPool, ctx.fleet);
    const checkpointAtKill = ledgerCheckpoint(await ledger(ctx.dbs.catalogPool, versionId));
    kills.push({
      identity: worker.identity,
      at,
      checkpointAtKill,
      state: `${session.state}: ${session.query.slice(0, 60)}`,
    });
    await ctx.fleet.spawn(); // the replacement
    // The next kill waits for the retry that names this one: a kill landing on that retry before it
    // recorded its page_retry event would leave only "an unknown worker" (the retry's own attempt left
    // no heartbeat and no claim row) in the events this test reads.
    if (kills.length < thresholds.length)
      await waitFor(
        `a page_retry event naming the killed worker ${worker.identity}`,
        async () =>
          (await events(ctx.dbs.catalogPool, versionId, 'page_retry')).some(
            (e) => e.details.lastWorkerIdentity === worker.identity,
          ),
        { timeoutMs: 60_000, intervalMs: 100 },
      );
  }
  // Three kills done: let the rest of the copy run at full speed.
  await setThrottle(handle, { pauseBetweenPagesMs: 0 });

  const result = await ctx.result(handle);
  t.diagnostic(`kills: ${JSON.stringify(kills)}`);
  t.diagnostic(
    `result: pages ${result.pagesTotal}, rows ${result.rowsUpserted}, retries ${result.retries}, ${result.durationMs} ms`,
  );
  assert.equal(result.published, true);
  assert.equal(result.pagesTotal, JOBS / PAGE);
  assert.equal(result.rowsUpserted, JOBS, 'counts adopted, not doubled by retries');
  assert.ok(result.retries >= kills.length, `result retries ${result.retries} >= ${kills.length} kills`);
  const progress = await ctx.progress(handle);
  assert.equal(progress.phase, 'done');
  assert.equal(progress.retries, result.retries, 'progress shows the retries');
  assert.equal(await versionStatus(ctx, versionId), 'active');

  await assertCatalogEqualsSource(ctx, JOBS);
  const rows = await assertLedgerComplete(ctx, versionId, result.pagesTotal, JOBS);
  const retries = await events(ctx.dbs.catalogPool, versionId, 'page_retry');
  for (const k of kills) {
    const lost = await lostPages(ctx.dbs.catalogPool, versionId, k.identity);
    assert.ok(
      lost.length >= 1,
      `worker ${k.identity} was killed inside a page transaction, so it lost at least that page`,
    );
    for (const p of lost) {
      const row = rows[p - 1];
      assert.notEqual(row.workerIdentity, k.identity);
      assert.ok(row.attempt >= 2, `page ${p} lost by ${k.identity} was committed by a retry (attempt ${row.attempt})`);
      assert.ok(row.committedAt! > k.at, `page ${p} committed after the kill`);
    }
    const named = retries.filter((e) => e.details.lastWorkerIdentity === k.identity);
    assert.ok(
      named.length >= 1,
      `a page_retry event names the killed worker ${k.identity}: ${JSON.stringify(retries.map((e) => e.message))}`,
    );
    // A kill between the page's commit and the activity's completion leaves a page the killed worker
    // committed: its retry adopts that commit (the replay changes nothing) and names the killed worker.
    const committedUnreported = (p: number) => rows[p - 1].workerIdentity === k.identity;
    assert.ok(
      named.every((e) => lost.includes(e.details.pageNo as number) || committedUnreported(e.details.pageNo as number)),
      `the events naming the killed worker are about pages it lost or committed unreported: ${JSON.stringify(
        named.map((e) => ({ page: e.details.pageNo, row: rows[(e.details.pageNo as number) - 1] })),
      )}`,
    );
  }
  const retried = rows.filter((r) => r.attempt > 1);
  assert.ok(
    retried.length >= 1 && retried.length <= kills.length * WINDOW,
    `pages retried ${retried.length} <= kills × window`,
  );
  assert.ok(retries.length >= kills.length, 'at least one page_retry event per kill');
  t.diagnostic(
    `workflow tasks timed out: ${await workflowTaskTimeouts(handle)}; longest gap between page commits ${longestGap(rows)} ms`,
  );
  t.diagnostic(
    `pages retried: ${retried.map((r) => `${r.pageNo}@${r.attempt}`).join(', ')}; events: ${retries.map((e) => e.message).join(' | ')}`,
  );
});

test('one worker killed inside a page and restarted after 5 s: the new worker resumes above the checkpoint and rewrites no earlier page', async (t) => {
  const JOBS = 20_000;
  const PAGE = 500;
  const WINDOW = 4;
  const ctx = await setup(t, 'resume', JOBS);
  const pool = ctx.dbs.catalogPool;
  const first = await ctx.fleet.spawn();
  const handle = await ctx.start({
    pageSize: PAGE,
    concurrency: WINDOW,
    heartbeatTimeoutMs: 5_000,
    pauseBetweenPagesMs: 50,
  });
  const versionId = await versionOf(ctx, handle);
  await waitFor('checkpoint 10 in the ledger', async () => ledgerCheckpoint(await ledger(pool, versionId)) >= 10, {
    intervalMs: 20,
  });
  const { session, at: killedAt } = await killInsidePageTransaction(pool, ctx.fleet, () => [first]);
  // The dead worker's backends roll back and go away; then the ledger is what survived the kill.
  await waitFor('the killed worker to leave PostgreSQL', async () => {
    const r = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 OR application_name LIKE $1 || ':page:%'`,
      [`catalog-rebuild:worker:${first.pid}`],
    );
    return r.rows[0].n === 0;
  });
  const atKill = await ledger(pool, versionId);
  const checkpointAtKill = ledgerCheckpoint(atKill);
  const committedAtKill = new Map(atKill.map((r) => [r.pageNo, r]));
  const committedList = `page_no = ANY('{${[...committedAtKill.keys()].join(',')}}'::int[])`;
  const earlierRows = await partitionFingerprint(pool, versionId, committedList);
  const progressAtKill = { checkpoint: checkpointAtKill, pages: atKill.length };

  await deadAttemptsTimedOut(handle); // the heartbeat timeout (5 s) of the dead worker's attempts passed
  const second = await ctx.fleet.spawn();
  const result = await ctx.result(handle);
  t.diagnostic(
    `killed in "${session.state}: ${session.query.slice(0, 50)}" at ledger checkpoint ${checkpointAtKill} with ${atKill.length} pages committed; result: ${result.retries} retries, ${result.durationMs} ms`,
  );

  assert.equal(result.published, true);
  assert.equal(result.rowsUpserted, JOBS, 'counts adopted across the restart, never zeroed or doubled');
  assert.ok(result.retries >= 1, 'the in-flight page(s) of the dead worker were retried');
  await assertCatalogEqualsSource(ctx, JOBS);
  const final = await assertLedgerComplete(ctx, versionId, result.pagesTotal, JOBS);

  // Pages committed before the kill are untouched: same ledger row, and not one of their job rows
  // was rewritten (xmin included in the fingerprint).
  for (const [pageNo, before] of committedAtKill)
    assert.deepEqual(final[pageNo - 1], before, `ledger row of page ${pageNo} unchanged`);
  assert.deepEqual(
    await partitionFingerprint(pool, versionId, committedList),
    earlierRows,
    'rows of pages committed before the kill never rewritten',
  );

  // The restarted worker committed only pages above the checkpoint at kill time, and only pages
  // that were not committed; the two workers together committed every page.
  const byNew = final.filter((r) => r.workerIdentity === second.identity);
  const byOld = final.filter((r) => r.workerIdentity === first.identity);
  assert.equal(byOld.length, atKill.length, 'the dead worker committed nothing after its kill');
  assert.equal(byNew.length + byOld.length, result.pagesTotal);
  assert.ok(byNew.length > 0);
  assert.deepEqual(
    byNew.filter((r) => r.pageNo <= checkpointAtKill || committedAtKill.has(r.pageNo)).map((r) => r.pageNo),
    [],
    'no page below the checkpoint re-committed',
  );

  // What the new worker even attempted: pages above the checkpoint minus the window; a page it
  // attempted that was already committed was one the dead worker had in flight, and it was skipped.
  const attempts = await pageAttempts(pool, versionId);
  const oldAttempted = new Set(attempts.filter((a) => a.workerIdentity === first.identity).map((a) => a.pageNo));
  const newAttempted = attempts.filter((a) => a.workerIdentity === second.identity);
  assert.equal(
    Math.min(...newAttempted.map((a) => a.pageNo)) > checkpointAtKill - WINDOW,
    true,
    'resumed run starts at the checkpoint (minus in-flight pages)',
  );
  const skipped = newAttempted.filter((a) => committedAtKill.has(a.pageNo));
  assert.ok(skipped.length <= WINDOW);
  for (const a of skipped)
    assert.ok(
      oldAttempted.has(a.pageNo),
      `page ${a.pageNo} re-checked by the new worker was in flight on the dead one`,
    );

  // The attempt column names the attempt that committed, and it matches a registered attempt of
  // that worker; pages the dead worker lost were committed by a retry (attempt >= 2).
  for (const r of final) {
    assert.ok(
      attempts.some((a) => a.pageNo === r.pageNo && a.attempt === r.attempt && a.workerIdentity === r.workerIdentity),
      `page ${r.pageNo}: ledger attempt ${r.attempt} by ${r.workerIdentity} is a registered attempt`,
    );
  }
  const lost = [...oldAttempted].filter((p) => !committedAtKill.has(p));
  assert.ok(lost.length >= 1, 'the dead worker lost the page it was writing');
  for (const p of lost)
    assert.ok(
      final[p - 1].attempt >= 2 && final[p - 1].workerIdentity === second.identity,
      `lost page ${p} committed by a retry on the new worker`,
    );
  const retried = final.filter((r) => r.attempt >= 2);
  assert.ok(
    retried.length <= WINDOW && retried.every((r) => r.pageNo > checkpointAtKill),
    `retried pages ${retried.map((r) => r.pageNo)} are in-flight pages only`,
  );
  t.diagnostic(
    `workflow tasks timed out: ${await workflowTaskTimeouts(handle)}; longest gap between page commits ${longestGap(final)} ms; new worker polling ${second.startedAt - killedAt} ms after the kill`,
  );
  t.diagnostic(
    `at kill ${JSON.stringify(progressAtKill)}; lost ${lost.join(',')}; re-checked and skipped ${skipped.map((a) => a.pageNo).join(',') || 'none'}; new worker committed pages ${byNew[0].pageNo}..${byNew[byNew.length - 1].pageNo}`,
  );
});

test('a page slowed by one statement of 4 × the heartbeat timeout keeps its lease and commits on its first attempt', async (t) => {
  const HB = 3_000;
  const JOBS = 10_000;
  const ctx = await setup(t, 'slow', JOBS);
  const pool = ctx.dbs.catalogPool;
  const w = await ctx.fleet.spawn({ CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 3, ms: 4 * HB } }) });
  const handle = await ctx.start({ pageSize: 500, heartbeatTimeoutMs: HB });
  const versionId = await versionOf(ctx, handle);
  await waitFor(
    'page 3 asleep inside its transaction',
    async () => (await pageTransactionsOf(pool, w.pid)).some((q) => q.includes('pg_sleep')),
    { intervalMs: 50 },
  );
  const result = await ctx.result(handle);
  assert.equal(result.published, true);
  assert.equal(result.retries, 0, 'no attempt was orphaned');
  await assertCatalogEqualsSource(ctx, JOBS);
  const rows = await assertLedgerComplete(ctx, versionId, result.pagesTotal, JOBS);
  const p3 = rows[2];
  assert.equal(p3.attempt, 1, 'page 3 committed by its first attempt');
  assert.equal(p3.workerIdentity, w.identity);
  assert.ok(
    p3.committedAt! - p3.startedAt >= 4 * HB,
    `page 3 transaction lasted ${p3.committedAt! - p3.startedAt} ms >= ${4 * HB} ms`,
  );
  const attempts = (await pageAttempts(pool, versionId)).filter((a) => a.pageNo === 3);
  assert.deepEqual(
    attempts.map((a) => a.attempt),
    [1],
    'page 3 was attempted once',
  );
  assert.deepEqual(
    (await events(pool, versionId, 'page_retry')).map((e) => e.message),
    [],
    'no page_retry event',
  );
  t.diagnostic(`page 3 held its lease for ${p3.committedAt! - p3.startedAt} ms with a ${HB} ms heartbeat timeout`);
});

/** A process's state letter from /proc (R running, S sleeping, T stopped…), or why it is unknown. */
function processState(pid: number): string {
  try {
    return fs
      .readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /s, '')
      .split(' ')[0];
  } catch (err) {
    return (err as Error).message;
  }
}

/** Current statements of a worker's sessions inside a transaction. */
async function pageTransactionsOf(pool: TestDatabases['catalogPool'], pid: number): Promise<string[]> {
  const r = await pool.query<{ query: string }>(
    `SELECT query FROM pg_stat_activity WHERE (application_name = $1 OR application_name LIKE $1 || ':page:%')
       AND xact_start IS NOT NULL AND state <> 'idle'`,
    [`catalog-rebuild:worker:${pid}`],
  );
  return r.rows.map((x) => x.query);
}

/**
 * Holds attempt 1 of page 3 on worker A (after it read its rows, before its transaction), then
 * freezes A with SIGSTOP and cuts its connection to Temporal (A reaches Temporal through a proxy),
 * so its heartbeats stop and the server drops its pending polls (a frozen process keeps its long
 * polls open and would swallow workflow tasks until their 10 s timeout). A's PostgreSQL sessions stay.
 */
async function zombieSetup(
  t: TestContext,
  tag: string,
  jobs: number,
  heartbeatTimeoutMs: number,
  hold: 'holdAfterRead' | 'holdWhileStreaming' = 'holdAfterRead',
) {
  const ctx = await setup(t, tag, jobs);
  const heldFile = path.join(ctx.tmp, 'held');
  const releaseFile = path.join(ctx.tmp, 'release');
  const proxy = await TemporalProxy.start(temporal.address);
  t.after(() => proxy.close());
  // One activity slot: while A holds page 3 it runs nothing else (no page transaction is frozen with it).
  const a = await ctx.fleet.spawn({
    TEMPORAL_ADDRESS: proxy.address,
    CATALOG_REBUILD_FAULTS: JSON.stringify({ [hold]: { pageNo: 3, attempt: 1, heldFile, releaseFile } }),
    CATALOG_REBUILD_MAX_ACTIVITIES: '1',
  });
  const handle = await ctx.start({ pageSize: 500, heartbeatTimeoutMs });
  const versionId = await versionOf(ctx, handle);
  await waitFor('worker A to hold page 3 after reading it', () => fs.existsSync(heldFile), { intervalMs: 20 });
  ctx.fleet.stop(a);
  proxy.cut();
  return { ctx, a, handle, versionId, heldFile, releaseFile, proxy };
}

/**
 * Wakes the frozen attempt (Temporal reachable again, SIGCONT, release file) and waits until it has
 * run to its end: its last statement on the catalog, issued after the release.
 */
async function releaseZombie(
  ctx: Ctx,
  a: { pid: number; output(): string },
  proxy: TemporalProxy,
  releaseFile: string,
  lastStatement: RegExp,
): Promise<string> {
  const pool = ctx.dbs.catalogPool;
  const since = (await pool.query<{ t: string }>(`SELECT clock_timestamp()::text AS t`)).rows[0].t;
  const logFrom = a.output().length;
  fs.writeFileSync(releaseFile, 'go');
  proxy.heal();
  process.kill(-a.pid, 'SIGCONT');
  // The attempt ends either with its last statement on the catalog or, when the server's
  // cancellation reaches it first (its heartbeat is answered before it looks at the release file),
  // by giving the page up before writing: both write nothing.
  return waitFor(
    'the released attempt to finish',
    async () => {
      if (/page given up before writing: activity cancelled/.test(a.output().slice(logFrom)))
        return 'none: page given up before writing (activity cancelled)';
      const r = await pool.query<{ query: string }>(
        `SELECT query FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle' AND state_change > $2::timestamptz`,
        [`catalog-rebuild:worker:${a.pid}`, since],
      );
      return r.rows.map((x) => x.query).find((q) => lastStatement.test(q));
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
}

test('zombie attempt woken after the retry committed and the version was published writes nothing', async (t) => {
  const JOBS = 10_000;
  const { ctx, a, handle, versionId, releaseFile, proxy } = await zombieSetup(t, 'zombiepub', JOBS, 3_000);
  const pool = ctx.dbs.catalogPool;
  const b = await ctx.fleet.spawn();
  const result = await ctx.result(handle);
  assert.equal(result.published, true);
  assert.equal(await versionStatus(ctx, versionId), 'active');
  const before = {
    ledger: await ledger(pool, versionId),
    rows: await partitionFingerprint(pool, versionId),
    reader: await readActive(pool, ctx.catalog),
    events: (await events(pool, versionId)).length,
  };
  const p3 = before.ledger[2];
  assert.equal(p3.workerIdentity, b.identity, 'the retry on B committed page 3');
  assert.ok(p3.attempt >= 2);
  const retryEvents = (await events(pool, versionId, 'page_retry')).filter((e) => e.details.pageNo === 3);
  assert.ok(
    retryEvents.some((e) => e.details.lastWorkerIdentity === a.identity),
    'page_retry names the frozen worker A',
  );

  const last = await releaseZombie(ctx, a, proxy, releaseFile, /committed_at IS NOT NULL/);
  t.diagnostic(`zombie's last statement: ${last.replace(/\s+/g, ' ').slice(0, 80)}`);
  assert.deepEqual(await ledger(pool, versionId), before.ledger, 'ledger unchanged: page 3 still committed by B');
  assert.deepEqual(
    await partitionFingerprint(pool, versionId),
    before.rows,
    'no row of the version written (xmin included)',
  );
  assert.deepEqual(
    { ...(await readActive(pool, ctx.catalog)), at: 0 },
    { ...before.reader, at: 0 },
    'active_jobs unchanged',
  );
  assert.equal((await events(pool, versionId)).length, before.events);
  await assertCatalogEqualsSource(ctx, JOBS);
  assert.equal(a.child.exitCode, null, `worker A survived its zombie attempt:\n${a.output()}`);
});

test('a worker frozen with SIGSTOP in the middle of a streamed page beyond the heartbeat timeout: the retry ends its transaction; after SIGCONT nothing is duplicated', async (t) => {
  const JOBS = 10_000;
  const HB = 3_000;
  const { ctx, a, handle, versionId, releaseFile, proxy } = await zombieSetup(
    t,
    'zombiestream',
    JOBS,
    HB,
    'holdWhileStreaming',
  );
  const pool = ctx.dbs.catalogPool;
  // Frozen mid-page: its page transaction is open (ledger row inserted, catalog COPY started).
  const frozen = await pageTransactions(pool, [a.pid]);
  assert.ok(frozen.length >= 1, 'the frozen worker holds a page transaction');
  const b = await ctx.fleet.spawn();
  const result = await ctx.result(handle);
  assert.equal(result.published, true);
  const p3 = (await ledger(pool, versionId))[2];
  assert.equal(p3.workerIdentity, b.identity, 'the retry on B committed page 3');
  const ended = await events(pool, versionId, 'zombie_ended');
  assert.equal(ended.length, 1, "the retry ended the frozen attempt's transaction");
  assert.deepEqual(
    ended[0].details.pids,
    frozen.map((f) => f.backendPid),
  );
  const before = { ledger: await ledger(pool, versionId), rows: await partitionFingerprint(pool, versionId) };
  const logFrom = a.output().length;
  fs.writeFileSync(releaseFile, 'go');
  proxy.heal();
  process.kill(-a.pid, 'SIGCONT');
  // Its catalog session was terminated: the woken attempt fails on its first write.
  const wokeAt = Date.now();
  await waitFor(
    'the woken attempt to fail',
    () => /terminat|Connection terminated|ECONNRESET|cancelled/i.test(a.output().slice(logFrom)),
    {
      timeoutMs: 90_000,
      intervalMs: 100,
      detail: () =>
        `worker A (process state ${processState(a.pid)}) printed since the wake-up:\n${a.output().slice(logFrom).slice(-4000)}`,
    },
  );
  t.diagnostic(`the woken attempt failed ${Date.now() - wokeAt} ms after SIGCONT`);
  assert.deepEqual(await ledger(pool, versionId), before.ledger, 'ledger unchanged');
  assert.deepEqual(await partitionFingerprint(pool, versionId), before.rows, 'no row written after the wake-up');
  await assertCatalogEqualsSource(ctx, JOBS);
  assert.equal(a.child.exitCode, null, `worker A survived its zombie attempt:\n${a.output()}`);
});

test('zombie attempt woken after the rebuild was cancelled (version abandoned) is fenced and writes nothing', async (t) => {
  // The default heartbeat timeout (15 s) keeps page 3 from being retried before the cancel lands,
  // so the old attempt is the only one that ever tries to write page 3.
  const JOBS = 10_000;
  const { ctx, a, handle, versionId, releaseFile, proxy } = await zombieSetup(t, 'zombieabandon', JOBS, 15_000);
  const pool = ctx.dbs.catalogPool;
  await ctx.fleet.spawn();
  await cancel(handle, 'crash test: abandon while a page attempt is frozen');
  const result = await ctx.result(handle);
  assert.equal(result.cancelled, true);
  assert.equal(result.published, false);
  assert.equal(await versionStatus(ctx, versionId), 'abandoned');
  const abandoned = await events(pool, versionId, 'abandoned');
  assert.equal(abandoned.length, 1);
  const before = { ledger: await ledger(pool, versionId), rows: await partitionFingerprint(pool, versionId) };
  assert.equal(
    before.ledger.find((r) => r.pageNo === 3),
    undefined,
    'page 3 was never committed',
  );
  assert.ok(
    before.ledger.every((r) => r.committedAt! <= abandoned[0].createdAt),
    'no page committed after the abandon',
  );

  const last = await releaseZombie(ctx, a, proxy, releaseFile, /^ROLLBACK$/);
  t.diagnostic(
    `zombie's last statement: ${last}; ledger has ${before.ledger.length} pages, partition ${before.rows.rows} rows`,
  );
  await waitFor(
    'worker A to report the fenced write',
    () => a.output().includes(`version ${versionId} is abandoned, not building: write refused`),
    { timeoutMs: 10_000 },
  );
  assert.deepEqual(
    await ledger(pool, versionId),
    before.ledger,
    'no ledger row added: the fenced transaction rolled back',
  );
  assert.deepEqual(
    await partitionFingerprint(pool, versionId),
    before.rows,
    'nothing written to the abandoned version',
  );
  const p3rows = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${'job_v' + versionId} WHERE page_no = 3`,
  );
  assert.equal(p3rows.rows[0].n, 0);
  assert.equal(await versionStatus(ctx, versionId), 'abandoned');
  assert.equal(a.child.exitCode, null, `worker A survived its zombie attempt:\n${a.output()}`);
});

/** Polls the progress query until `phase`; fails if the rebuild ends first. */
async function waitForPhase(
  ctx: Ctx,
  handle: WorkflowHandle,
  phase: RebuildProgress['phase'],
): Promise<RebuildProgress> {
  const ended = ['done', 'failed', 'cancelled'];
  const p = await waitFor(
    `phase ${phase}`,
    async () => {
      const p = await ctx.progress(handle);
      return p.phase === phase || ended.includes(p.phase) ? p : null;
    },
    { timeoutMs: 60_000, intervalMs: 10 },
  );
  if (p.phase !== phase) throw new Error(`the rebuild reached ${p.phase} before the test saw ${phase}`);
  return p;
}

test('SIGKILL of the only worker during reconcile and during publish: each rebuild completes, readers only ever see a complete version', async (t) => {
  const ctx = await setup(t, 'phases', 20_000);
  const pool = ctx.dbs.catalogPool;
  let worker = await ctx.fleet.spawn();
  // v1 with every default (heartbeat timeout 15 s, page size 2,000): the old complete version.
  const h1 = await ctx.start({});
  const r1 = await ctx.result(h1);
  assert.equal(r1.published, true);
  await assertCatalogEqualsSource(ctx, 20_000);
  const history = await h1.fetchHistory();
  const pageSchedules = (history.events ?? [])
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => a?.activityType?.name === 'copyPage');
  assert.equal(pageSchedules.length, r1.pagesTotal);
  assert.ok(
    pageSchedules.every((a) => Number(a!.heartbeatTimeout?.seconds) === 15),
    'copyPage heartbeat timeout defaults to 15 s',
  );
  const complete: { version: string; rows: number; md5: string }[] = [];
  const v1 = await readActive(pool, ctx.catalog);
  complete.push({ version: r1.versionId, rows: v1.rows, md5: v1.md5 });

  const reader = startReaderLoop(pool, ctx.catalog);
  const kills: string[] = [];
  let seen: ReaderObservation[] = [];
  try {
    for (const [jobs, phase] of [
      [22_000, 'reconciling'],
      [24_000, 'publishing'],
    ] as const) {
      // The source grows (more history, same seed), so each version has other content than the last.
      await generateBareosSource({ databaseUrl: ctx.dbs.sourceUrl, jobs, seed: 11 });
      const h = await ctx.start({ heartbeatTimeoutMs: 5_000 });
      const p = await waitForPhase(ctx, h, phase);
      ctx.fleet.kill(worker);
      kills.push(`${phase} (version ${p.versionId}, last event "${p.lastEvent}")`);
      worker = await ctx.fleet.spawn();
      const r = await ctx.result(h, 150_000);
      assert.equal(r.published, true, `rebuild killed while ${phase} published`);
      assert.equal(r.versionId, p.versionId);
      await assertCatalogEqualsSource(ctx, jobs);
      const v = await readActive(pool, ctx.catalog);
      assert.deepEqual(v.versions, [r.versionId]);
      complete.push({ version: r.versionId, rows: v.rows, md5: v.md5 });
      assert.equal((await events(pool, r.versionId, 'published')).length, 1, 'published exactly once');
    }
  } finally {
    seen = await reader.stop();
  }
  t.diagnostic(`killed during ${kills.join(' and ')}; reader saw ${seen.length} snapshots`);
  assert.deepEqual(reader.errors.map(String), [], 'the reader never failed');
  assert.ok(seen.length > 10);
  let last = 0;
  for (const o of seen) {
    const i = complete.findIndex((c) => c.rows === o.rows && c.md5 === o.md5);
    assert.ok(i >= 0, `reader saw an incomplete catalog: ${o.rows} rows, versions ${o.versions}`);
    assert.deepEqual(o.versions, [complete[i].version], 'one version per snapshot');
    assert.ok(i >= last, 'never back to an older version');
    last = i;
  }
  assert.deepEqual(
    [...new Set(seen.map((o) => o.versions[0]))],
    complete.map((c) => c.version),
    'the reader saw the old version, then each new one',
  );
  const statuses = await pool.query<{ version_id: string; status: string }>(
    `SELECT version_id::text, status FROM version ORDER BY version_id`,
  );
  assert.deepEqual(
    statuses.rows.map((r) => r.status),
    ['dropped', 'retired', 'active'],
    'one active version; the previous one retired after the flip, the one before dropped',
  );
});

test('the private Temporal dev server restarts mid-rebuild: workers reconnect and the rebuild completes correctly', async (t) => {
  const JOBS = 20_000;
  const ctx = await setup(t, 'tmprestart', JOBS);
  const pool = ctx.dbs.catalogPool;
  const workers = await Promise.all([ctx.fleet.spawn(), ctx.fleet.spawn()]);
  const handle = await ctx.start({ pageSize: 500, heartbeatTimeoutMs: 5_000, pauseBetweenPagesMs: 50 });
  const versionId = await versionOf(ctx, handle);
  await waitFor('checkpoint 10 in the ledger', async () => ledgerCheckpoint(await ledger(pool, versionId)) >= 10, {
    intervalMs: 20,
  });
  const { dbFile, port } = temporal;
  const downAt = Date.now();
  await temporal.stop();
  const atStop = await ledger(pool, versionId);
  await serverDownSeen(workers, downAt);
  temporal = await privateTemporal({ dbFile, port });
  temporalDirs.push(temporal.dir);
  const upAt = Date.now();
  t.diagnostic(`dev server down for ${Date.now() - downAt} ms at ledger checkpoint ${ledgerCheckpoint(atStop)}`);
  const result = await ctx.result(handle);
  for (const w of workers)
    assert.equal(w.child.exitCode, null, `worker ${w.identity} is still running after the restart:\n${w.output()}`);
  assert.equal(result.published, true);
  assert.equal(result.rowsUpserted, JOBS);
  await assertCatalogEqualsSource(ctx, JOBS);
  const final = await assertLedgerComplete(ctx, versionId, result.pagesTotal, JOBS);
  for (const r of atStop)
    assert.deepEqual(final[r.pageNo - 1], r, `page ${r.pageNo} committed before the restart untouched`);
  assert.ok(
    final.filter((r) => r.committedAt! > upAt).length >= 10,
    'pages were scheduled and committed after the restart',
  );
  const tail = workers.map((w) => w.output()).join('\n');
  assert.doesNotMatch(tail, /fatal|Worker failed|Shutdown/i, 'no worker failed or shut down');
  t.diagnostic(
    `result: ${result.retries} retries, ${result.durationMs} ms; workflow tasks timed out: ${await workflowTaskTimeouts(handle)}; ${final.filter((r) => r.committedAt! > upAt).length} pages committed after it answered again`,
  );
});
