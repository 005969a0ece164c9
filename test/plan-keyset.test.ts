/**
 * planRebuild on a Bareos source whose job ids come in three blocks 10^8 apart: the keyset walk
 * makes pages of existing keys with their row counts (fixed page size), heartbeats its progress,
 * and without a page size the plan sizes pages itself (`auto`) and says so; a plan whose rebuild
 * never heard back is found by the rebuild's ids and abandoned, one that runs after its rebuild
 * ended stores nothing, and a cancel ends an attempt at once, even one waiting on a locked table.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CancelledFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture } from '../dev/harness/activity-env';
import { waitFor, withDeadline } from '../dev/harness/wait';
import { readPlanPage } from '../lib/catalog';
import type { PageWalkProgress } from '../lib/sources';
import { BareosSource } from '../lib/sources';
import type { PlanProgress } from '../activities/plan-rebuild';
import type { PlanRebuildInput } from '../workflows/activity-types';
import type { PlanResult } from '../workflows/definitions';

/** Runs planRebuild in `env`. */
const planIn = (env: MockActivityEnvironment, input: PlanRebuildInput): Promise<PlanResult> =>
  env.run(fx.acts.planRebuild, input) as Promise<PlanResult>;

const JOBS = 3_000;
const BLOCK = 100_000_000;
let fx: ActivityFixture;
let ids: string[];

before(async () => {
  fx = await activityFixture('plankeys', { jobs: JOBS, seed: 13 });
  // Three blocks of 1,000 jobs, ids 10^8 apart.
  await fx.dbs.sourcePool.query(
    `UPDATE job j SET jobid = j.jobid + $1::int * b.blk
     FROM (SELECT jobid, (row_number() OVER (ORDER BY jobid) - 1) / 1000 AS blk FROM job) b WHERE b.jobid = j.jobid`,
    [BLOCK],
  );
  const r = await fx.dbs.sourcePool.query<{ id: string }>(`SELECT jobid::text AS id FROM job ORDER BY jobid`);
  ids = r.rows.map((x) => x.id);
});
after(async () => {
  await fx?.close();
});

/** The stored plan of a version: page number, keys and planned rows. */
async function storedPlan(versionId: string) {
  const r = await fx.dbs.catalogPool.query<{ page_no: number; first_key: string; last_key: string; n: number }>(
    `SELECT page_no, first_key::text, last_key::text, planned_rows AS n FROM plan_page WHERE version_id = $1 ORDER BY page_no`,
    [versionId],
  );
  return r.rows;
}

test('fixed pages from keys that exist on ids in blocks 10^8 apart, with their row counts', async () => {
  assert.ok(BigInt(ids[ids.length - 1]) > 2n * BigInt(BLOCK), 'three blocks');
  const env = new MockActivityEnvironment({ heartbeatTimeoutMs: 2_000 });
  const beats: PlanProgress[] = [];
  env.on('heartbeat', (d: PlanProgress) => beats.push(d));
  const plan = await planIn(env, {
    catalog: 'keys',
    source: 'director',
    pageSize: 400,
    workflowId: 'catalog-rebuild/keys',
    firstRunId: 'run-fixed',
  });
  assert.equal(plan.pageSizing, 'fixed');
  assert.equal(plan.pageSize, 400);
  assert.equal(plan.pagesTotal, Math.ceil(JOBS / 400));
  assert.equal(plan.sourceRows, String(JOBS));
  assert.equal(plan.watermark.jobKey, ids[ids.length - 1]);
  const pages = await storedPlan(plan.versionId);
  assert.equal(pages.length, 8);
  pages.forEach((p, i) => {
    assert.equal(p.page_no, i + 1);
    assert.equal(p.first_key, ids[i * 400], `page ${i + 1} starts at the ${i * 400 + 1}th key`);
    assert.equal(p.n, Math.min(400, JOBS - i * 400));
    const next = pages[i + 1];
    assert.equal(p.last_key, next ? String(BigInt(next.first_key) - 1n) : ids[ids.length - 1]);
    const inRange = ids.filter((k) => BigInt(k) >= BigInt(p.first_key) && BigInt(k) <= BigInt(p.last_key));
    assert.equal(inRange.length, p.n, `page ${i + 1} holds its planned rows`);
  });
  assert.ok(
    beats.some((b) => b.stage === 'walking the keys' && b.pagesPlanned === 8 && b.rowsPlanned === JOBS),
    `the walk heartbeats its progress: ${JSON.stringify(beats)}`,
  );
  const page3 = await readPlanPage(fx.dbs.catalogPool, plan.versionId, 3);
  assert.equal(page3?.plannedRows, 400);
  const v = await fx.dbs.catalogPool.query(`SELECT page_size, page_sizing FROM version WHERE version_id = $1`, [
    plan.versionId,
  ]);
  assert.deepEqual(v.rows[0], { page_size: 400, page_sizing: 'fixed' });
});

test('without a page size the plan sizes pages (auto) and a retry returns the same plan', async () => {
  const input = {
    catalog: 'keys-auto',
    source: 'director',
    concurrency: 2,
    workflowId: 'catalog-rebuild/keys-auto',
    firstRunId: 'run-auto',
  };
  const plan = await planIn(new MockActivityEnvironment({ heartbeatTimeoutMs: 2_000 }), input);
  assert.equal(plan.pageSizing, 'auto');
  assert.equal(plan.pageSize, 1_000, 'a 3,000-job source gets the minimum page size');
  assert.equal(plan.pagesTotal, 3);
  const pages = await storedPlan(plan.versionId);
  assert.deepEqual(
    pages.map((p) => [p.first_key, p.n]),
    [0, 1, 2].map((b) => [ids[b * 1000], 1000]),
    'one page per block of ids',
  );
  const again = await planIn(new MockActivityEnvironment({ heartbeatTimeoutMs: 2_000 }), input);
  assert.deepEqual(again, plan);
  const ev = await fx.dbs.catalogPool.query<{ message: string; details: Record<string, unknown> }>(
    `SELECT message, details FROM event WHERE version_id = $1 AND kind = 'planned'`,
    [plan.versionId],
  );
  assert.match(ev.rows[0].message, /3 pages of 1000 jobs \(auto: the minimum of 1,000 rows per page/);
  assert.equal(ev.rows[0].details.pageSizing, 'auto');
  assert.ok((ev.rows[0].details.avgRowBytes as number) > 50, 'the row width was measured');
});

test('the walk goes on statement by statement (bounded keys each) to the watermark', async () => {
  const source = new BareosSource('walk', { kind: 'bareos', databaseUrl: fx.dbs.sourceUrl });
  try {
    const seen: PageWalkProgress[] = [];
    const maxKey = ids[ids.length - 1];
    const pages = await source.planPages(maxKey, 400, (p) => seen.push(p), 800);
    assert.deepEqual(
      seen.map((p) => p.pages),
      [2, 4, 6, 8],
      'two pages per statement of 800 keys',
    );
    assert.deepEqual(
      pages.map((p) => [p.firstKey, p.lastKey, p.rows]),
      Array.from({ length: 8 }, (_, i) => [
        ids[i * 400],
        ids[Math.min(JOBS, (i + 1) * 400) - 1],
        Math.min(400, JOBS - i * 400),
      ]),
    );
    const below = await source.planPages(ids[1999], 1000, undefined, 1000);
    assert.deepEqual(
      below.map((p) => p.rows),
      [1000, 1000],
      'nothing above the watermark',
    );
  } finally {
    await source.close();
  }
});

test("a plan the rebuild never heard back from (cancelled or failed in flight): endVersion finds it by the rebuild's ids and abandons it", async () => {
  const rebuild = { workflowId: 'catalog-rebuild/keys-cancelled', firstRunId: 'run-cancelled' };
  const plan = await planIn(new MockActivityEnvironment({ heartbeatTimeoutMs: 2_000 }), {
    catalog: 'keys-cancelled',
    source: 'director',
    pageSize: 1_000,
    ...rebuild,
  });
  const status = async () =>
    (
      await fx.dbs.catalogPool.query<{ status: string }>(`SELECT status FROM version WHERE version_id = $1`, [
        plan.versionId,
      ])
    ).rows[0].status;
  const end = (plannedBy: typeof rebuild) =>
    new MockActivityEnvironment().run(fx.acts.endVersion, {
      catalog: 'keys-cancelled',
      plannedBy,
      status: 'abandoned' as const,
      reason: 'cancelled by signal',
    });
  // Another run's ids: nothing of this one changes.
  assert.equal(await end({ ...rebuild, firstRunId: 'another-run' }), null);
  assert.equal(await status(), 'building');
  assert.equal(await end(rebuild), plan.versionId);
  assert.equal(await status(), 'abandoned');
  const ev = await fx.dbs.catalogPool.query<{ message: string }>(
    `SELECT message FROM event WHERE version_id = $1 AND kind = 'abandoned'`,
    [plan.versionId],
  );
  assert.deepEqual(
    ev.rows.map((r) => r.message),
    [`version ${plan.versionId} abandoned: cancelled by signal`],
  );
  await end(rebuild); // idempotent: an ended version is left as it is
  assert.equal(
    (
      await fx.dbs.catalogPool.query(`SELECT 1 FROM event WHERE version_id = $1 AND kind = 'abandoned'`, [
        plan.versionId,
      ])
    ).rowCount,
    1,
  );
});

test('a rebuild that ended before its plan committed: a plan attempt of it that runs late (a frozen worker) stores nothing', async () => {
  const late = { workflowId: 'catalog-rebuild/keys-late', firstRunId: 'run-late' };
  const end = () =>
    new MockActivityEnvironment().run(fx.acts.endVersion, {
      catalog: 'keys-late',
      plannedBy: late,
      status: 'abandoned' as const,
      reason: 'cancelled by signal',
    });
  assert.equal(await end(), null, 'no version to end');
  assert.equal(await end(), null, 'idempotent');
  const events = await fx.dbs.catalogPool.query<{ kind: string; version_id: string | null; message: string }>(
    `SELECT kind, version_id, message FROM event WHERE catalog_name = 'keys-late'`,
  );
  assert.deepEqual(events.rows, [
    {
      kind: 'cancelled',
      version_id: null,
      message: 'rebuild catalog-rebuild/keys-late was cancelled before a version was planned: cancelled by signal',
    },
  ]);
  await assert.rejects(
    planIn(new MockActivityEnvironment({ heartbeatTimeoutMs: 2_000 }), {
      catalog: 'keys-late',
      source: 'director',
      pageSize: 1_000,
      ...late,
    }),
    (err: Error & { type?: string; nonRetryable?: boolean }) =>
      err.type === 'VERSION_FENCED' &&
      err.nonRetryable === true &&
      /^rebuild catalog-rebuild\/keys-late \(first run run-late\) ended before its plan committed a version: plan refused, nothing stored$/.test(
        err.message,
      ),
  );
  const versions = await fx.dbs.catalogPool.query(`SELECT 1 FROM version WHERE catalog_name = 'keys-late'`);
  assert.equal(versions.rowCount, 0);
});

test('a cancel ends a plan attempt that waits on a locked job table at once; what the attempt commits later is abandoned by the rebuild end', async () => {
  const ids = { workflowId: 'catalog-rebuild/keys-locked', firstRunId: 'run-locked' };
  const lock = await fx.dbs.sourcePool.connect();
  await lock.query('BEGIN');
  await lock.query('LOCK TABLE job IN ACCESS EXCLUSIVE MODE');
  const env = new MockActivityEnvironment({ heartbeatTimeoutMs: 2_000 });
  const attempt = planIn(env, { catalog: 'keys-locked', source: 'director', pageSize: 1_000, ...ids });
  try {
    await waitFor('the plan to wait on the lock', async () => {
      const r = await fx.dbs.sourcePool.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      return r.rowCount! > 0;
    });
    env.cancel();
    // While the lock is still held: the attempt did not wait for its statement (which would hang
    // here until the deadline, the lock being released only after).
    await assert.rejects(
      withDeadline(attempt, 20_000, () => 'the cancelled attempt still waits on the lock'),
      (err: unknown) => err instanceof CancelledFailure,
    );
  } finally {
    await lock.query('COMMIT');
    lock.release();
  }
  // The attempt left behind reads on and commits its version; the rebuild's end finds it by its ids.
  const committed = await waitFor('the version of the attempt left behind', async () => {
    const r = await fx.dbs.catalogPool.query<{ id: string }>(
      `SELECT version_id::text AS id FROM version WHERE workflow_id = $1 AND first_run_id = $2`,
      [ids.workflowId, ids.firstRunId],
    );
    return r.rows[0]?.id;
  });
  const ended = await new MockActivityEnvironment().run(fx.acts.endVersion, {
    catalog: 'keys-locked',
    plannedBy: ids,
    status: 'abandoned' as const,
    reason: 'cancelled by signal',
  });
  assert.equal(ended, committed);
  const status = await fx.dbs.catalogPool.query<{ status: string }>(
    `SELECT status FROM version WHERE version_id = $1`,
    [committed],
  );
  assert.equal(status.rows[0].status, 'abandoned');
});
