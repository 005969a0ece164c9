/**
 * Reconciliation, repair, unreadable buckets, watermark delta, shrink guard, retention and rollback
 * (issue 4; design.md G6, G7, G10 and the version lifecycle), on a private Temporal dev server (free
 * ports), real worker processes and fresh PostgreSQL databases on the machine's server: one catalog
 * database, one generated Bareos source per test. Every assertion reads the catalog's tables
 * (`reconciliation`, `event`, `version`, `active`, the version partitions), the Temporal service
 * or the CLI's exit code and output, and compares them with numbers computed from the source.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { WorkflowFailedError } from '@temporalio/client';
import type { Pool } from 'pg';
import format from 'pg-format';
import type { RebuildCatalogInput, RebuildCatalogResult } from '../client';
import { getProgress, pause, resume, startRebuild } from '../client';
import { createActivities } from '../activities';
import { createPool } from '../lib/db';
import { createDatabase, databaseUrl, dropDatabase, resolveAdminUrl } from '../dev/env/postgres';
import { NothingToRollBackError, rollbackCatalog } from '../lib/catalog';
import { sourceFromTemplate } from '../dev/harness/templates';
import { SourceRegistry } from '../lib/sources';
import type { WorkerProcess } from '../dev/harness/harness';
import {
  compareCatalogToSource,
  privateTemporal,
  runCliProcess,
  spawnWorker,
  temporalClient,
  testEnv,
  uniqueQueue,
} from '../dev/harness/harness';
import { rebuildResult, serverTimezone, workerOutputs } from '../dev/harness/fixture';
import { waitFor } from '../dev/harness/wait';
import { runActivity } from '../dev/harness/activity-env';

const SOURCES = ['repair', 'unreadable', 'delta', 'shrink', 'rollback'] as const;
type SourceName = (typeof SOURCES)[number];
/** Jobs per source: small enough for a 3-minute file, pages of 500. */
const JOBS: Record<SourceName, number> = {
  repair: 10_000,
  unreadable: 5_000,
  delta: 5_000,
  shrink: 10_000,
  rollback: 5_000,
};
/** Time zone of the `unreadable` source's naive times (west of UTC: see test 2). */
const UNREADABLE_TZ = 'America/New_York';
/** The last page of the `unreadable` source (5,000 jobs in pages of 500) sleeps this long in its transaction. */
const SLOW_PAGE = { pageNo: 10, ms: 4_000 };

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
let tc: Awaited<ReturnType<typeof temporalClient>>;
let client: Client;
let adminUrl: string;
let dbBase: string;
let catalogPool: Pool;
const sourcePools = {} as Record<SourceName, Pool>;
let serverTz: string;
let readerRole: string;
let configFile: string;
let mainQueue: string;
let slowQueue: string;
let cliEnv: NodeJS.ProcessEnv;
const workers: WorkerProcess[] = [];
const handles: WorkflowHandle[] = [];

before(async () => {
  temporal = await privateTemporal();
  adminUrl = await resolveAdminUrl();
  dbBase = `crt_rec_${randomBytes(3).toString('hex')}`;
  const catalogUrl = await createDatabase(adminUrl, `${dbBase}_catalog`);
  catalogPool = createPool(catalogUrl, { applicationName: 'catalog-rebuild:test', max: 6 });
  const urls = {} as Record<SourceName, string>;
  for (const s of SOURCES) {
    urls[s] = await createDatabase(adminUrl, `${dbBase}_${s}`);
    sourcePools[s] = createPool(urls[s], { applicationName: 'catalog-rebuild:test', max: 3 });
  }
  await Promise.all(
    SOURCES.map((s, i) =>
      sourceFromTemplate(adminUrl, `${dbBase}_${s}`, {
        jobs: JOBS[s],
        seed: 40 + i,
        ...(s === 'unreadable' ? { timezone: UNREADABLE_TZ } : {}),
      }),
    ),
  );
  serverTz = await serverTimezone(sourcePools.repair);

  // A login role that may read the `unreadable` source's tables (test 2 revokes it mid-rebuild).
  readerRole = `${dbBase}_reader`;
  const admin = createPool(adminUrl, { applicationName: 'catalog-rebuild:test', max: 1 });
  // A password, so the role logs in on servers with password authentication (the embedded one) too.
  const readerPassword = randomBytes(12).toString('hex');
  await admin.query(format('CREATE ROLE %I LOGIN PASSWORD %L', readerRole, readerPassword));
  await admin.end();
  await sourcePools.unreadable.query(format('GRANT SELECT ON job, client, pool, fileset TO %I', readerRole));
  const roleUrl = new URL(databaseUrl(adminUrl, `${dbBase}_unreadable`));
  roleUrl.username = readerRole;
  roleUrl.password = readerPassword;

  const sources: Record<string, unknown> = {};
  for (const s of SOURCES)
    sources[s] = { kind: 'bareos', databaseUrl: urls[s], ...(s === 'unreadable' ? { timezone: UNREADABLE_TZ } : {}) };
  sources['unreadable-ro'] = { kind: 'bareos', databaseUrl: roleUrl.toString(), timezone: UNREADABLE_TZ };
  configFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-reconcile-')), 'config.json');
  fs.writeFileSync(configFile, JSON.stringify({ catalogDatabaseUrl: catalogUrl, sources }, null, 2));

  mainQueue = uniqueQueue('reconcile');
  slowQueue = uniqueQueue('reconcile-slow');
  cliEnv = testEnv({ address: temporal.address, configFile, taskQueue: mainQueue });
  const slowEnv = testEnv({
    address: temporal.address,
    configFile,
    taskQueue: slowQueue,
    extra: { CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: SLOW_PAGE }) },
  });
  workers.push(...(await Promise.all([spawnWorker(cliEnv), spawnWorker(slowEnv)])));
  tc = await temporalClient(temporal.address);
  client = tc.client;
});

after(async () => {
  for (const h of handles) await h.terminate('test cleanup').catch(() => undefined);
  for (const w of workers) w.kill();
  await Promise.all(workers.map((w) => w.exited));
  await tc?.close().catch(() => undefined);
  await temporal?.stop();
  fs.rmSync(temporal.dir, { recursive: true, force: true });
  await catalogPool?.end().catch(() => undefined);
  for (const s of SOURCES) await sourcePools[s]?.end().catch(() => undefined);
  for (const s of ['catalog', ...SOURCES]) await dropDatabase(adminUrl, `${dbBase}_${s}`).catch(() => undefined);
  if (readerRole) {
    const admin = createPool(adminUrl, { applicationName: 'catalog-rebuild:test', max: 1 });
    await admin.query(format('DROP ROLE IF EXISTS %I', readerRole)).catch(() => undefined);
    await admin.end();
  }
});

// ---------------------------------------------------------------------------------------------
// Helpers

/** Starts a rebuild through the client library on the main (or given) task queue. */
async function start(
  catalog: string,
  source: string,
  input: Partial<RebuildCatalogInput> = {},
  taskQueue = mainQueue,
): Promise<WorkflowHandle> {
  const { handle } = await startRebuild(client, { catalog, source, pageSize: 500, ...input }, { taskQueue });
  handles.push(handle);
  return handle;
}

/** The rebuild's result within a deadline; the workers' output on failure to end. */
const result = (handle: WorkflowHandle, timeoutMs = 90_000): Promise<RebuildCatalogResult> =>
  rebuildResult(handle, timeoutMs, () => workerOutputs(workers));

/** The failure a rebuild ended with (asserts that it failed); root cause message. */
async function failure(handle: WorkflowHandle): Promise<string> {
  const err = await result(handle).then(
    (r) => assert.fail(`rebuild was expected to fail, got ${JSON.stringify(r)}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof WorkflowFailedError, `WorkflowFailedError expected, got ${String(err)}`);
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return (e as Error).message;
}

async function activeVersion(catalog: string): Promise<string | null> {
  const { rows } = await catalogPool.query<{ v: string }>(
    `SELECT version_id::text AS v FROM active WHERE catalog_name = $1`,
    [catalog],
  );
  return rows[0]?.v ?? null;
}

async function statuses(catalog: string): Promise<Record<string, string>> {
  const { rows } = await catalogPool.query<{ v: string; status: string }>(
    `SELECT version_id::text AS v, status FROM version WHERE catalog_name = $1 ORDER BY version_id`,
    [catalog],
  );
  return Object.fromEntries(rows.map((r) => [r.v, r.status]));
}

async function tableExists(versionId: string): Promise<boolean> {
  const { rows } = await catalogPool.query<{ t: string | null }>(`SELECT to_regclass($1)::text AS t`, [
    `job_v${versionId}`,
  ]);
  return rows[0].t !== null;
}

async function eventsOf(
  versionId: string,
  kind: string,
): Promise<{ message: string; details: Record<string, unknown> }[]> {
  const { rows } = await catalogPool.query(
    `SELECT message, details FROM event WHERE version_id = $1 AND kind = $2 ORDER BY event_id`,
    [versionId, kind],
  );
  return rows;
}

async function report(versionId: string, round: number): Promise<Record<string, unknown> & { ok: boolean }> {
  const { rows } = await catalogPool.query(
    `SELECT ok, report FROM reconciliation WHERE version_id = $1 AND round = $2`,
    [versionId, round],
  );
  assert.equal(rows.length, 1, `reconciliation round ${round} of version ${versionId} is stored`);
  return { ...rows[0].report, ok: rows[0].ok };
}

/** One reader snapshot of `active_jobs` (one statement: one snapshot): rows, content md5, versions. */
interface Snapshot {
  rows: number;
  md5: string;
  versions: string[];
}
const SNAPSHOT_COLUMNS = `count(*)::int AS rows,
  coalesce(md5(string_agg(concat_ws('|', job_id, job, job_name, client, type, level, status, start_time, end_time, files, bytes, pool, fileset, bucket),
                 E'\\n' ORDER BY job_id::bigint)), '') AS md5`;

async function readActive(catalog: string): Promise<Snapshot> {
  const { rows } = await catalogPool.query<Snapshot>(
    `SELECT ${SNAPSHOT_COLUMNS}, coalesce(array_agg(DISTINCT version_id::text) FILTER (WHERE version_id IS NOT NULL), '{}') AS versions
     FROM active_jobs WHERE catalog_name = $1`,
    [catalog],
  );
  return rows[0];
}

/** The same snapshot computed from one version's own partition (what a reader must see for it). */
async function versionSnapshot(versionId: string): Promise<Snapshot> {
  const { rows } = await catalogPool.query<Snapshot>(format(`SELECT ${SNAPSHOT_COLUMNS} FROM %I`, `job_v${versionId}`));
  return { ...rows[0], versions: [versionId] };
}

/** Reads `active_jobs` in a loop until stopped, like the backup check; `seen()`: the snapshots so far. */
function readerLoop(catalog: string): { seen(): readonly Snapshot[]; stop(): Promise<Snapshot[]> } {
  const seen: Snapshot[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      seen.push(await readActive(catalog)); // back to back: each read waits for the last
    }
  })();
  return {
    seen: () => seen,
    async stop() {
      running = false;
      await loop;
      return seen;
    },
  };
}

/** Per-bucket job counts of the source at or below `maxKey` (all jobs when null). */
async function sourceBuckets(pool: Pool, maxKey: string | null = null): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ b: string | null; n: number }>(
    `SELECT starttime::date::text AS b, count(*)::int AS n FROM job WHERE $1::bigint IS NULL OR jobid <= $1::bigint GROUP BY 1`,
    [maxKey],
  );
  return new Map(rows.map((r) => [r.b ?? 'none', r.n]));
}

async function catalogBuckets(versionId: string): Promise<Map<string, number>> {
  const { rows } = await catalogPool.query<{ b: string | null; n: number }>(
    format(`SELECT bucket::text AS b, count(*)::int AS n FROM %I GROUP BY 1`, `job_v${versionId}`),
  );
  return new Map(rows.map((r) => [r.b ?? 'none', r.n]));
}

async function assertCatalogEqualsSource(catalog: string, source: SourceName, tz = serverTz): Promise<number> {
  const cmp = await compareCatalogToSource(catalogPool, sourcePools[source], catalog, tz);
  assert.equal(cmp.catalog, cmp.source, `catalog ${catalog} equals source ${source} field by field`);
  return cmp.rows;
}

/** Whether a page transaction of the catalog database is inside the slow-page fault's pg_sleep. */
async function slowPageSleeping(): Promise<boolean> {
  const { rowCount } = await catalogPool.query(
    `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE 'SELECT pg_sleep%'`,
  );
  return !!rowCount;
}

// ---------------------------------------------------------------------------------------------

test('mid-rebuild damage: reconcile names exactly the two emptied buckets and the changed one; RepairBucket children fix them; the published catalog equals the source', async (t) => {
  const catalog = 'rec-repair';
  const handle = await start(catalog, 'repair', { concurrency: 2, pauseBetweenPagesMs: 150 });
  const p0 = await waitFor('8 committed pages', async () => {
    const p = await getProgress(handle);
    return p.checkpoint >= 8 && p;
  });
  await pause(handle);
  const paused = await waitFor('the page window to drain', async () => {
    const p = await getProgress(handle);
    return p.paused && p.inFlight === 0 && !p.draining && p;
  });
  assert.ok(paused.pagesDone < paused.pagesTotal, `paused at ${paused.pagesDone} of ${paused.pagesTotal} pages`);
  const versionId = p0.versionId!;
  const watermark = paused.watermark!.jobKey!;

  // Buckets already copied completely (catalog count = source count at the watermark).
  const src = await sourceBuckets(sourcePools.repair, watermark);
  const cat = await catalogBuckets(versionId);
  const copied = [...cat.keys()].filter((b) => b !== 'none' && cat.get(b) === src.get(b) && cat.get(b)! >= 3).sort();
  assert.ok(copied.length >= 6, `${copied.length} buckets fully copied at checkpoint ${paused.checkpoint}`);
  const [emptied1, emptied2, changed] = [copied[1], copied[3], copied[5]];
  const del = await catalogPool.query(
    format('DELETE FROM %I WHERE bucket IN ($1::date, $2::date)', `job_v${versionId}`),
    [emptied1, emptied2],
  );
  assert.equal(del.rowCount, src.get(emptied1)! + src.get(emptied2)!);
  const upd = await sourcePools.repair.query<{ jobid: string }>(
    `UPDATE job SET jobfiles = jobfiles + 1
     WHERE jobid = (SELECT min(jobid) FROM job WHERE starttime::date = $1::date) RETURNING jobid::text`,
    [changed],
  );
  assert.equal(upd.rowCount, 1);
  t.diagnostic(
    `paused at page ${paused.pagesDone}/${paused.pagesTotal}; emptied ${emptied1}, ${emptied2}; changed job ${upd.rows[0].jobid} in ${changed}`,
  );

  await resume(handle);
  const r = await result(handle);
  assert.equal(r.published, true);
  assert.equal(r.versionId, versionId);
  assert.equal(r.reconciliation?.ok, true);
  assert.equal(r.reconciliation?.round, 2, 'published after one repair round');

  const r1 = await report(versionId, 1);
  assert.equal(r1.ok, false);
  assert.deepEqual(
    r1.mismatched,
    [emptied1, emptied2, changed].sort(),
    'round 1 names exactly the three damaged buckets',
  );
  const detail = new Map(
    (r1.mismatchedBuckets as { bucket: string; source: number; catalog: number; reason: string }[]).map((m) => [
      m.bucket,
      m,
    ]),
  );
  assert.deepEqual(detail.get(emptied1), { bucket: emptied1, source: src.get(emptied1), catalog: 0, reason: 'count' });
  assert.deepEqual(detail.get(emptied2), { bucket: emptied2, source: src.get(emptied2), catalog: 0, reason: 'count' });
  assert.deepEqual(
    detail.get(changed),
    { bucket: changed, source: src.get(changed), catalog: src.get(changed), reason: 'fingerprint' },
    'counts agree, the fingerprint differs',
  );
  assert.equal(r1.delta, 0);
  const r2 = await report(versionId, 2);
  assert.equal(r2.ok, true);
  assert.deepEqual(r2.mismatched, []);

  const repaired = await eventsOf(versionId, 'repaired');
  assert.deepEqual(
    repaired.map((e) => e.details.bucket).sort(),
    [emptied1, emptied2, changed].sort(),
    'one repair per damaged bucket',
  );
  for (const e of repaired) {
    const b = e.details.bucket as string;
    assert.equal(e.details.ok, true, `bucket ${b} verified`);
    assert.equal(e.details.deleted, 0);
    assert.equal(e.details.upserted, b === changed ? 1 : src.get(b), `bucket ${b}: rows written`);
  }
  // The children, by their workflow ids, on the Temporal service.
  for (const b of [emptied1, emptied2, changed]) {
    const d = await client.workflow.getHandle(`catalog-rebuild/${catalog}/bucket-${b}/r1`).describe();
    assert.equal(d.type, 'RepairBucket');
    assert.equal(d.status.name, 'COMPLETED');
    assert.equal(d.parentExecution?.workflowId, `catalog-rebuild/${catalog}`);
  }
  const listed = await waitFor('the repair children in visibility', async () => {
    const ids: string[] = [];
    for await (const w of client.workflow.list({ query: `WorkflowType = 'RepairBucket'` }))
      if (w.workflowId.startsWith(`catalog-rebuild/${catalog}/`)) ids.push(w.workflowId);
    return ids.length >= 3 && ids.sort();
  });
  assert.deepEqual(
    listed,
    [emptied1, emptied2, changed].sort().map((b) => `catalog-rebuild/${catalog}/bucket-${b}/r1`),
  );

  assert.equal(await assertCatalogEqualsSource(catalog, 'repair'), JOBS.repair);
  assert.equal(await activeVersion(catalog), versionId);
  // The jobs per bucket the seal stored (taken from the damaged table) were counted again by the
  // publish after the repairs: the next publish's shrink guard compares with what is there.
  const stored = await catalogPool.query<{ b: string; n: number }>(
    `SELECT bucket::text AS b, jobs::int AS n FROM version_bucket WHERE version_id = $1 ORDER BY bucket`,
    [versionId],
  );
  const actual = [...(await catalogBuckets(versionId))]
    .filter(([b]) => b !== 'none')
    .sort(([a], [b]) => a.localeCompare(b));
  assert.deepEqual(
    stored.rows.map((r) => [r.b, r.n]),
    actual,
    'stored bucket counts equal the repaired version',
  );
});

test('an unreadable bucket fails the rebuild naming it (never counted as empty); the previous version stays active and readers never see the partial one', async (t) => {
  const catalog = 'rec-unreadable';
  const base = await result(await start(catalog, 'unreadable'));
  assert.equal(base.published, true);
  const v1 = base.versionId;
  const v1Snapshot = await versionSnapshot(v1);
  assert.deepEqual(await readActive(catalog), v1Snapshot);
  assert.equal(await assertCatalogEqualsSource(catalog, 'unreadable', UNREADABLE_TZ), JOBS.unreadable);

  // (a) One day of the source becomes unreadable after it was copied. The worker on the slow queue
  // sleeps inside the last page's transaction (its source read is done); meanwhile one job of a
  // copied bucket loses its catalog row (so reconcile sends the bucket to RepairBucket) and gets a
  // real end time that cannot be converted to an instant in the source's zone (294276-12-31 23:00
  // in New York is past PostgreSQL's last timestamptz): every read of that day now fails with
  // 22008 "timestamp out of range", while reconcile's per-bucket counts and fingerprints (which do
  // not read that column) and the other buckets still read fine. Only the repair's read fails.
  const reader = readerLoop(catalog);
  let seen: Snapshot[] = [];
  let victim: { jobid: string; bucket: string; realendtime: string } | undefined;
  try {
    const h = await start(catalog, 'unreadable', { concurrency: 1 }, slowQueue);
    await waitFor('the last page to sleep in its transaction', slowPageSleeping, { intervalMs: 25 });
    const p = await getProgress(h);
    assert.equal(p.pagesDone, SLOW_PAGE.pageNo - 1, 'every other page committed');
    const v2 = p.versionId!;
    const firstKeyOfLast = (
      await catalogPool.query<{ k: string }>(
        `SELECT first_key::text AS k FROM plan_page WHERE version_id = $1 AND page_no = $2`,
        [v2, SLOW_PAGE.pageNo],
      )
    ).rows[0].k;
    const src = await sourceBuckets(sourcePools.unreadable, p.watermark!.jobKey);
    const cat = await catalogBuckets(v2);
    const copied = [...cat.keys()].filter((b) => b !== 'none' && cat.get(b) === src.get(b)).sort();
    const bucket = copied[Math.floor(copied.length / 2)];
    victim = (
      await sourcePools.unreadable.query(
        `SELECT jobid::text, starttime::date::text AS bucket, realendtime::text FROM job
         WHERE starttime::date = $1::date AND realendtime IS NOT NULL AND jobid < $2::bigint ORDER BY jobid LIMIT 1`,
        [bucket, firstKeyOfLast],
      )
    ).rows[0];
    assert.ok(victim, `a finished job in bucket ${bucket}`);
    await catalogPool.query(format('DELETE FROM %I WHERE job_id = $1', `job_v${v2}`), [victim.jobid]);
    await sourcePools.unreadable.query(`UPDATE job SET realendtime = '294276-12-31 23:00:00' WHERE jobid = $1`, [
      victim.jobid,
    ]);
    const message = await failure(h);
    t.diagnostic(`(a) failed: ${message}`);
    assert.match(
      message,
      new RegExp(`bucket ${bucket} of source unreadable is unreadable: timestamp out of range \\(SQLSTATE 22008\\)`),
    );
    assert.match(message, /never counted as empty/);
    const r1 = await report(v2, 1);
    assert.deepEqual(r1.mismatched, [bucket], 'reconcile read the counts fine and sent only that bucket to repair');
    const unreadable = await eventsOf(v2, 'unreadable');
    assert.equal(unreadable.length, 1);
    assert.equal(unreadable[0].details.bucket, bucket);
    assert.deepEqual(await eventsOf(v2, 'repaired'), [], 'nothing was repaired as if the bucket were empty');
    assert.equal((await statuses(catalog))[v2], 'failed');
    const reason = (
      await catalogPool.query<{ r: string }>(`SELECT failure_reason AS r FROM version WHERE version_id = $1`, [v2])
    ).rows[0].r;
    assert.match(reason, new RegExp(`bucket ${bucket}`));
    assert.equal(await activeVersion(catalog), v1, 'the previous version is still active');
    // The CLI's `wait` reports the failure with exit 1, naming the bucket.
    const w = runCliProcess(['wait', '--catalog', catalog], cliEnv, 60_000);
    assert.equal(w.code, 1, `${w.stdout}\n${w.stderr}`);
    assert.match(w.stderr, new RegExp(`not published: .*bucket ${bucket} of source unreadable is unreadable`));
  } finally {
    if (victim)
      await sourcePools.unreadable.query(`UPDATE job SET realendtime = $2::timestamp WHERE jobid = $1`, [
        victim.jobid,
        victim.realendtime,
      ]);
  }

  // (b) The source stops being readable at all between the copy and reconcile: the worker reads it
  // as a role whose SELECT on `job` is revoked while the last page sleeps in its transaction. No
  // bucket can be read, so every bucket is unreadable, none is counted as empty, nothing is repaired.
  try {
    const h = await start(catalog, 'unreadable-ro', { concurrency: 1 }, slowQueue);
    await waitFor('the last page to sleep in its transaction', slowPageSleeping, { intervalMs: 25 });
    const v3 = (await getProgress(h)).versionId!;
    await sourcePools.unreadable.query(format('REVOKE SELECT ON job FROM %I', readerRole));
    const message = await failure(h);
    t.diagnostic(`(b) failed: ${message}`);
    const buckets = (await catalogBuckets(v3)).size;
    assert.match(
      message,
      new RegExp(
        `source unreadable-ro could not be read for reconciliation, so every bucket is unreadable \\(${buckets} buckets in the catalog, .*\\) and none is counted as empty: permission denied for table job \\(SQLSTATE 42501\\)`,
      ),
    );
    const r1 = await report(v3, 1);
    assert.equal(r1.ok, false);
    assert.equal(r1.unreadableCount, buckets);
    assert.equal((r1.unreadable as string[]).length, buckets);
    assert.equal(r1.mismatched, undefined, 'no bucket was compared against a zero count');
    assert.deepEqual(await eventsOf(v3, 'repaired'), []);
    assert.equal((await statuses(catalog))[v3], 'failed');
    assert.equal(await activeVersion(catalog), v1, 'the previous version is still active');
  } finally {
    await sourcePools.unreadable.query(format('GRANT SELECT ON job TO %I', readerRole));
    seen = await reader.stop();
  }
  assert.ok(seen.length > 50, `reader loop ran ${seen.length} times`);
  for (const s of seen) assert.deepEqual(s, v1Snapshot, 'readers only ever saw the previous complete version');
});

test('jobs inserted during the rebuild are the delta (counted, not mismatches); the next rebuild includes them', async () => {
  const catalog = 'rec-delta';
  const handle = await start(catalog, 'delta', { concurrency: 1, pauseBetweenPagesMs: 100 });
  const planned = await waitFor('the plan', async () => {
    const p = await getProgress(handle);
    return p.versionId !== null && !!p.watermark?.jobKey && p;
  });
  await pause(handle);
  const wm = planned.watermark!.jobKey!;
  const day = (await sourcePools.delta.query<{ d: string }>(`SELECT max(starttime)::date::text AS d FROM job`)).rows[0]
    .d;
  // 32 finished jobs in an existing bucket (the newest day) and 5 queued ones without a start time.
  const inserted = await sourcePools.delta.query(
    `INSERT INTO job (jobid, job, name, type, level, clientid, jobstatus, schedtime, starttime, endtime, realendtime, jobfiles, jobbytes)
     SELECT $1::bigint + g, 'Delta.' || g, 'Delta', 'B', 'I', 1, CASE WHEN g <= 32 THEN 'T' ELSE 'C' END,
            $2::date + time '23:50', CASE WHEN g <= 32 THEN $2::date + time '23:50' END,
            CASE WHEN g <= 32 THEN $2::date + time '23:55' END, CASE WHEN g <= 32 THEN $2::date + time '23:55' END, g, 1000 * g
     FROM generate_series(1, 37) g`,
    [wm, day],
  );
  assert.equal(inserted.rowCount, 37);
  await resume(handle);
  const r = await result(handle);
  assert.equal(r.published, true);
  assert.equal(r.reconciliation?.ok, true);
  assert.equal(r.reconciliation?.delta, 37, 'the delta counts every job above the watermark');
  assert.deepEqual(r.reconciliation?.mismatched, [], 'new jobs in an existing bucket are not mismatches');
  assert.equal(r.reconciliation?.round, 1, 'no repair round was needed');
  const rep = await report(r.versionId, 1);
  assert.equal(rep.delta, 37);
  assert.equal(rep.watermarkKey, wm);
  assert.deepEqual(await eventsOf(r.versionId, 'repaired'), []);
  const c = (
    await catalogPool.query<{ n: number; max: string }>(
      `SELECT count(*)::int AS n, max(job_id::bigint)::text AS max FROM active_jobs WHERE catalog_name = $1`,
      [catalog],
    )
  ).rows[0];
  assert.deepEqual(c, { n: JOBS.delta, max: wm }, 'the version holds exactly the jobs at or below the watermark');
  const w = runCliProcess(['wait', '--catalog', catalog], cliEnv, 60_000);
  assert.equal(w.code, 0, w.stderr);
  assert.match(w.stdout, /reconciliation: ok: .*delta after watermark 37;/);

  const r2 = await result(await start(catalog, 'delta'));
  assert.equal(r2.published, true);
  assert.equal(r2.previousVersionId, r.versionId);
  assert.equal(r2.reconciliation?.delta, 0);
  assert.equal(
    await assertCatalogEqualsSource(catalog, 'delta'),
    JOBS.delta + 37,
    'the next rebuild includes the delta',
  );
});

test('shrink guard: 30% of a month deleted is refused naming its buckets (exit 1, active unchanged); --allow-shrink publishes; pruning the oldest month publishes; renumbered jobs are reported', async (t) => {
  const catalog = 'rec-shrink';
  const pool = sourcePools.shrink;
  const startArgs = ['start', '--catalog', catalog, '--source', 'shrink', '--page-size', '500', '--wait'];
  const first = runCliProcess(startArgs, cliEnv, 120_000);
  assert.equal(first.code, 0, `${first.stdout}\n${first.stderr}`);
  const v1 = (await activeVersion(catalog))!;

  const months = (
    await pool.query<{ m: string }>(
      `SELECT DISTINCT to_char(starttime, 'YYYY-MM') AS m FROM job WHERE starttime IS NOT NULL ORDER BY 1`,
    )
  ).rows.map((r) => r.m);
  assert.ok(months.length >= 4, `source spans ${months.join(', ')}`);
  const month = months[months.length - 2];
  const before = await sourceBuckets(pool);
  const monthJobs = (
    await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM job WHERE to_char(starttime, 'YYYY-MM') = $1`, [
      month,
    ])
  ).rows[0].n;
  const del = await pool.query(`DELETE FROM job WHERE to_char(starttime, 'YYYY-MM') = $1 AND jobid % 10 < 3`, [month]);
  const after1 = await sourceBuckets(pool);
  const expected = [...before.keys()]
    .filter((b) => {
      const lost = before.get(b)! - (after1.get(b) ?? 0);
      return b !== 'none' && lost >= 5 && lost > 0.1 * before.get(b)!;
    })
    .sort();
  t.diagnostic(
    `deleted ${del.rowCount} of ${monthJobs} jobs of ${month}; ${expected.length} buckets lost more than 10% and at least 5 jobs`,
  );
  assert.ok(del.rowCount! > 0.25 * monthJobs && del.rowCount! < 0.35 * monthJobs);
  assert.ok(expected.length >= 15 && expected.every((b) => b.startsWith(month)), `expected buckets all in ${month}`);

  const refused = runCliProcess(startArgs, cliEnv, 120_000);
  assert.equal(refused.code, 1, `${refused.stdout}\n${refused.stderr}`);
  assert.match(
    refused.stderr,
    new RegExp(
      `not published: shrink guard: ${expected.length} buckets lost more than 10% and at least 5 jobs compared with active version ${v1}`,
    ),
  );
  const named = [...refused.stderr.matchAll(/(\d{4}-\d{2}-\d{2}) \((\d+) → (\d+)\)/g)];
  assert.deepEqual(
    named.map((m) => m[1]),
    expected,
    `the refusal names exactly the shrunk buckets of ${month}`,
  );
  for (const m of named)
    assert.deepEqual([Number(m[2]), Number(m[3])], [before.get(m[1]), after1.get(m[1]) ?? 0], `counts of ${m[1]}`);
  assert.equal(await activeVersion(catalog), v1, 'active version unchanged');
  const st = await statuses(catalog);
  const refusedVersion = Object.keys(st).pop()!;
  assert.equal(st[refusedVersion], 'failed');
  assert.equal(st[v1], 'active');

  const allowed = runCliProcess([...startArgs, '--allow-shrink'], cliEnv, 120_000);
  assert.equal(allowed.code, 0, `${allowed.stdout}\n${allowed.stderr}`);
  const v3 = (await activeVersion(catalog))!;
  assert.notEqual(v3, v1);
  assert.equal(await assertCatalogEqualsSource(catalog, 'shrink'), JOBS.shrink - del.rowCount!);
  const pub3 = await eventsOf(v3, 'published');
  assert.equal(pub3.length, 1);
  assert.equal(pub3[0].details.allowShrink, true);
  assert.equal(pub3[0].details.previousVersionId, v1);
  assert.deepEqual(pub3[0].details.renumberedJobs, []);

  // Pruning: the oldest month disappears entirely; and three jobs of the newest month get new job
  // ids (as a catalog re-created from volumes would), keeping their unique job names.
  const pruned = await pool.query(`DELETE FROM job WHERE starttime < ($1 || '-01')::date + interval '1 month'`, [
    months[0],
  ]);
  const renumber = (
    await pool.query<{ job: string; old: string; new: string }>(
      `UPDATE job SET jobid = jobid + 5000000
       WHERE jobid IN (SELECT jobid FROM job WHERE to_char(starttime, 'YYYY-MM') = $1 ORDER BY jobid LIMIT 3)
       RETURNING job, (jobid - 5000000)::text AS old, jobid::text AS new`,
      [months[months.length - 1]],
    )
  ).rows;
  assert.equal(renumber.length, 3);
  const prune = runCliProcess(startArgs, cliEnv, 120_000);
  assert.equal(
    prune.code,
    0,
    `pruning the oldest month publishes without --allow-shrink\n${prune.stdout}\n${prune.stderr}`,
  );
  const v4 = (await activeVersion(catalog))!;
  assert.notEqual(v4, v3);
  assert.equal(await assertCatalogEqualsSource(catalog, 'shrink'), JOBS.shrink - del.rowCount! - pruned.rowCount!);
  const pub4 = await eventsOf(v4, 'published');
  assert.equal(pub4[0].details.allowShrink, false);
  assert.deepEqual(
    pub4[0].details.renumberedJobs,
    renumber
      .map((r) => ({ job: r.job, previousJobId: r.old, jobId: r.new }))
      .sort((a, b) => a.job.localeCompare(b.job)),
    'the publish event names the job names whose job id changed',
  );
  assert.match(pub4[0].message, /3 job names have a new job id/);
  t.diagnostic(`pruned ${pruned.rowCount} jobs of ${months[0]}; ${pub4[0].message}`);

  // An emptied source prunes nothing: with no oldest job, every bucket of the active version counts.
  const v4Buckets = [...(await catalogBuckets(v4)).entries()].filter(([b, n]) => b !== 'none' && n >= 5).length;
  await pool.query('DELETE FROM job');
  const emptied = runCliProcess(startArgs, cliEnv, 120_000);
  assert.equal(emptied.code, 1, `${emptied.stdout}\n${emptied.stderr}`);
  assert.match(
    emptied.stderr,
    new RegExp(
      `shrink guard: ${v4Buckets} buckets lost more than 10% and at least 5 jobs compared with active version ${v4}`,
    ),
  );
  assert.equal(await activeVersion(catalog), v4, 'an empty source never replaces the catalog without --allow-shrink');
});

test('retention 1 keeps exactly two versions with rows; rollback re-activates the previous one atomically; retirement never drops a re-activated version', async (t) => {
  const catalog = 'rec-rollback';
  const pool = sourcePools.rollback;
  const addJobs = async (tag: string) =>
    pool.query(
      `INSERT INTO job (jobid, job, name, type, level, clientid, jobstatus, schedtime, starttime, endtime, realendtime, jobfiles, jobbytes)
       SELECT (SELECT max(jobid) FROM job) + g, $1 || '.' || g, $1, 'B', 'I', 1, 'T', '2026-11-01 22:00', '2026-11-01 22:00', '2026-11-01 22:05', '2026-11-01 22:05', g, 10 * g
       FROM generate_series(1, 10) g`,
      [tag],
    );
  const versions: string[] = [];
  for (let i = 1; i <= 3; i++) {
    if (i > 1) await addJobs(`Rollback${i}`);
    const r = await result(await start(catalog, 'rollback', { retention: 1 }));
    assert.equal(r.published, true);
    versions.push(r.versionId);
    if (i === 1) {
      await assert.rejects(
        rollbackCatalog(catalogPool, catalog),
        (e: unknown) => e instanceof NothingToRollBackError && e.code === 'NOTHING_TO_ROLL_BACK',
      );
      assert.equal(await activeVersion(catalog), r.versionId, 'a refused rollback changes nothing');
    }
  }
  const [v1, v2, v3] = versions;
  assert.deepEqual(await statuses(catalog), { [v1]: 'dropped', [v2]: 'retired', [v3]: 'active' });
  assert.deepEqual(await Promise.all(versions.map(tableExists)), [false, true, true], 'exactly two versions hold rows');
  assert.equal((await eventsOf(v1, 'dropped')).length, 1);
  // Its stored figures went with its rows; the kept versions' stayed.
  const figures = await catalogPool.query<{ v: string; n: number }>(
    `SELECT v::text, (SELECT count(*) FROM version_cell c WHERE c.version_id = v)::int
                   + (SELECT count(*) FROM page_cell c WHERE c.version_id = v)::int
                   + (SELECT count(*) FROM page_bucket b WHERE b.version_id = v)::int AS n
     FROM unnest($1::bigint[]) v ORDER BY v`,
    [versions],
  );
  assert.deepEqual(
    figures.rows.map((r) => r.n > 0),
    [false, true, true],
    JSON.stringify(figures.rows),
  );
  const s2 = await versionSnapshot(v2);
  const s3 = await versionSnapshot(v3);
  assert.deepEqual([s2.rows, s3.rows], [JOBS.rollback + 10, JOBS.rollback + 20]);
  assert.deepEqual(await readActive(catalog), s3);

  const reader = readerLoop(catalog);
  await waitFor('the reader to see the active version', () => reader.seen().length >= 3);
  const rb = await rollbackCatalog(catalogPool, catalog);
  await waitFor(
    'the reader to see the rolled-back-to version',
    () => reader.seen().filter((s) => s.versions[0] === v2).length >= 3,
  );
  const seen = await reader.stop();
  assert.deepEqual(rb, { catalog, versionId: v2, replacedVersionId: v3 });
  let switched = false;
  for (const s of seen) {
    if (!switched && s.versions[0] === v2) switched = true;
    assert.deepEqual(s, switched ? s2 : s3, 'each snapshot is one complete version, never a mix, never back');
  }
  assert.ok(switched && seen[0].versions[0] === v3, `readers saw version ${v3}, then ${v2} (${seen.length} snapshots)`);
  assert.deepEqual(await statuses(catalog), { [v1]: 'dropped', [v2]: 'active', [v3]: 'retired' });
  assert.equal(await activeVersion(catalog), v2);
  const ev = await eventsOf(v2, 'rolled_back');
  assert.equal(ev.length, 1);
  assert.deepEqual(ev[0].details, { versionId: v2, replacedVersionId: v3 });

  // The next rebuild replaces the re-activated version; retention keeps it (the most recently
  // published retired version) and drops the version rolled away from.
  await addJobs('Rollback4');
  const r4 = await result(await start(catalog, 'rollback', { retention: 1 }));
  assert.equal(r4.previousVersionId, v2);
  const v4 = r4.versionId;
  assert.deepEqual(await statuses(catalog), { [v1]: 'dropped', [v2]: 'retired', [v3]: 'dropped', [v4]: 'active' });
  assert.deepEqual(await Promise.all([v2, v3, v4].map(tableExists)), [true, false, true]);

  // Retirement racing a rollback: retireVersions (retention 0) drops v2 while a reader transaction
  // holds `job`, so its DETACH ... CONCURRENTLY waits; a rollback meanwhile must not re-activate v2.
  const actPool = createPool(databaseUrl(adminUrl, `${dbBase}_catalog`), {
    applicationName: 'catalog-rebuild:test-activities',
    max: 4,
  });
  const blocker = await catalogPool.connect();
  let retiring: Promise<unknown> = Promise.resolve();
  try {
    const acts = createActivities({
      pool: actPool,
      sources: new SourceRegistry(() => assert.fail('no source')),
      identity: 'test',
      buildId: 'test',
    });
    await blocker.query('BEGIN');
    await blocker.query(`SELECT count(*) FROM job WHERE version_id = $1`, [v4]);
    // An activity (it heartbeats): run in a mock activity environment.
    retiring = runActivity(acts.retireVersions, { catalog, retention: 0 }).catch((e: unknown) => e);
    await waitFor(
      'the detach to wait for the reader',
      async () => {
        const { rowCount } = await catalogPool.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'ALTER TABLE job DETACH PARTITION%' AND wait_event_type = 'Lock'`,
        );
        return !!rowCount;
      },
      { timeoutMs: 4_000, intervalMs: 10 },
    );
    const rowsKept = await tableExists(v2);
    const statusWhileDetaching = (await statuses(catalog))[v2];
    const rolledBack = await rollbackCatalog(catalogPool, catalog).catch((e: unknown) => e);
    await blocker.query('COMMIT');
    assert.deepEqual(await retiring, [v2], 'retirement dropped v2');
    assert.equal(rowsKept, true, 'v2 still had its rows while its detach waited');
    assert.ok(
      rolledBack instanceof NothingToRollBackError,
      `the rollback during the detach was refused, got ${JSON.stringify(rolledBack)}`,
    );
    assert.equal(statusWhileDetaching, 'dropped', 'claimed under the publish lock before the detach');
  } finally {
    await blocker.query('ROLLBACK').catch(() => undefined);
    blocker.release();
    await retiring;
    await actPool.end();
  }
  assert.equal(await activeVersion(catalog), v4);
  assert.equal(await tableExists(v2), false);
  assert.equal((await readActive(catalog)).rows, JOBS.rollback + 30, 'the active version kept every row');
  assert.equal(await assertCatalogEqualsSource(catalog, 'rollback'), JOBS.rollback + 30);
  t.diagnostic(`versions ${versions.join(', ')}, ${v4}; rollback ${v3} → ${v2}; ${seen.length} reader snapshots`);
});
