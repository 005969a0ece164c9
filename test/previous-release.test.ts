/**
 * Upgrade in the middle of a rebuild: the previous release's worker and CLI (built from this
 * clone's git history, dev/harness/previous-release.ts) start a rebuild of a generated 20,000-job
 * Bareos source in 40 pages; once it has committed some pages and while pages remain, its worker is
 * SIGKILLed and a worker of this tree takes over. The new worker applies this tree's migrations over
 * the schema the old one created, replays the old workflow history and finishes the rebuild; the
 * new CLI waits for it and reads it. Only the public surface is used: the CLIs, the worker
 * processes, and the catalog's `page`, `version`, `active_jobs` (and the migration record).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Pool } from 'pg';
import { rebuildHandle } from '../client';
import { listMigrations } from '../lib/db';
import type { WorkerProcess } from '../dev/harness/harness';
import { compareCatalogToSource, privateTemporal, runCliAsync, spawnWorker } from '../dev/harness/harness';
import type { RebuildFixture } from '../dev/harness/fixture';
import { rebuildFixture, serverTimezone } from '../dev/harness/fixture';
import { buildRelease, PREVIOUS_RELEASE, releaseUnavailableReason } from '../dev/harness/previous-release';
import { waitFor, within } from '../dev/harness/wait';

const JOBS = 20_000;
const PAGE_SIZE = 500;
/** Pages the old worker commits before it is killed (at least). */
const OLD_PAGES = 5;

/** One ledger row: the columns every release has. */
interface PageRow {
  pageNo: number;
  attempt: number;
  workerIdentity: string;
  rows: number;
  committedAt: string | null;
}

/** The ledger of a version, by page number (committed_at as text, to compare exactly). */
async function ledgerRows(pool: Pool, versionId: string): Promise<PageRow[]> {
  const { rows } = await pool.query<PageRow>(
    `SELECT page_no AS "pageNo", attempt, worker_identity AS "workerIdentity", rows,
            committed_at::text AS "committedAt"
     FROM page WHERE version_id = $1 ORDER BY page_no, attempt`,
    [versionId],
  );
  return rows;
}

/** The catalog's newest version of `catalog` once planned (pages_total set). */
async function plannedVersion(pool: Pool, catalog: string): Promise<{ versionId: string; pagesTotal: number } | null> {
  const { rows } = await pool.query<{ versionId: string; pagesTotal: number }>(
    `SELECT version_id::text AS "versionId", pages_total AS "pagesTotal" FROM version
     WHERE catalog_name = $1 ORDER BY version_id DESC LIMIT 1`,
    [catalog],
  );
  return rows[0]?.pagesTotal > 0 ? rows[0] : null;
}

/** Ids of the migrations recorded in the catalog database. */
async function appliedMigrations(pool: Pool): Promise<number[]> {
  const { rows } = await pool.query<{ id: number }>(`SELECT id FROM schema_migration ORDER BY id`);
  return rows.map((r) => r.id);
}

/** Catalog sessions of worker process `pid` (application_name `catalog-rebuild:worker:<pid>[:…]`). */
async function workerSessions(pool: Pool, pid: number): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = current_database()
       AND (application_name = $1 OR application_name LIKE $1 || ':%')`,
    [`catalog-rebuild:worker:${pid}`],
  );
  return rows[0].n;
}

/** The `<pid>@<host>` identity of `pid` as its ledger rows name it (whatever the host part). */
const identityOf = (pid: number) => (r: PageRow) => r.workerIdentity.startsWith(`${pid}@`);

/** SIGKILLs the old worker once it has committed `OLD_PAGES` pages; returns the ledger at the kill. */
async function killOldWorkerMidRebuild(
  ctx: RebuildFixture,
  old: WorkerProcess,
  v: { versionId: string; pagesTotal: number },
): Promise<PageRow[]> {
  const pool = ctx.dbs.catalogPool;
  const committed = async () => (await ledgerRows(pool, v.versionId)).filter((r) => r.committedAt !== null);
  await waitFor(`the old worker to commit ${OLD_PAGES} pages`, async () => (await committed()).length >= OLD_PAGES, {
    timeoutMs: 60_000,
    intervalMs: 20,
  });
  old.kill('SIGKILL'); // its process group, as the harness kills workers
  await within(old.exited, 10_000);
  // PostgreSQL ends the dead worker's sessions and rolls back any page transaction it had open.
  await waitFor('the old worker’s sessions to end', async () => (await workerSessions(pool, old.pid)) === 0, {
    timeoutMs: 30_000,
  });
  return committed();
}

test('a rebuild started by the previous release finishes on the new workers', { timeout: 300_000 }, async (t) => {
  const unavailable = releaseUnavailableReason(PREVIOUS_RELEASE);
  if (unavailable) {
    t.skip(`cannot build the previous release: ${unavailable}`);
    return;
  }
  const t0 = Date.now();
  const building = buildRelease(PREVIOUS_RELEASE);
  building.catch(() => undefined); // awaited below; the setup runs meanwhile

  const temporal = await privateTemporal();
  const workers: WorkerProcess[] = [];
  let ctx: RebuildFixture | undefined;
  // Runs before the fixture's cleanup (hooks run in the order registered), which drops the databases.
  t.after(async () => {
    if (ctx)
      await rebuildHandle(ctx.client, ctx.catalog)
        .terminate('test cleanup')
        .catch(() => undefined);
    for (const w of workers) w.kill('SIGKILL');
    await Promise.all(workers.map((w) => within(w.exited, 10_000)));
    await temporal.stop();
    fs.rmSync(temporal.dir, { recursive: true, force: true });
  });
  ctx = await rebuildFixture(t, {
    address: temporal.address,
    tag: 'prevrel',
    jobs: JOBS,
    seed: 11,
    catalogDatabase: 'empty',
  });
  const outputs = () => workers.map((w) => `--- worker ${w.pid}\n${w.output().slice(-4000)}`).join('\n');
  const release = await building;
  t.diagnostic(
    `previous release ${release.commit.slice(0, 8)}: ${release.cached ? 'cached' : `built (${release.steps.join(', ')})`}, ${release.ms} ms`,
  );
  const tSetup = Date.now();

  // The previous release: its worker creates the schema, its CLI starts the rebuild with its default
  // flags and a page size that makes 40 pages.
  const old = await spawnWorker(ctx.env, { entry: 'product', root: release.dir });
  workers.push(old);
  const pool = ctx.dbs.catalogPool;
  assert.deepEqual(
    await appliedMigrations(pool),
    listMigrations(path.join(release.dir, 'migrations')).map((m) => m.id),
    'the old worker created the schema of its release',
  );
  const start = await runCliAsync(
    ['start', '--catalog', ctx.catalog, '--source', 'director', '--page-size', String(PAGE_SIZE)],
    ctx.env,
    { root: release.dir, timeoutMs: 60_000 },
  );
  assert.equal(start.code, 0, `old CLI start:\n${start.stdout}\n${start.stderr}\n${outputs()}`);
  const v = await waitFor('the rebuild to plan its version', () => plannedVersion(pool, ctx.catalog), {
    timeoutMs: 60_000,
  });
  assert.equal(v.pagesTotal, JOBS / PAGE_SIZE);

  const atKill = await killOldWorkerMidRebuild(ctx, old, v);
  const killedAt = Date.now();
  t.diagnostic(`old worker ${old.pid} killed after ${atKill.length} of ${v.pagesTotal} pages committed`);
  assert.ok(atKill.length >= OLD_PAGES, `${atKill.length} pages committed by the old worker`);
  assert.ok(atKill.length < v.pagesTotal, `pages remained when the old worker was killed (${atKill.length} committed)`);
  assert.ok(atKill.every(identityOf(old.pid)), 'every page committed so far is the old worker’s');

  // This tree's worker: applies its migrations over the old schema and takes the rebuild over.
  const fresh = await spawnWorker(ctx.env, { entry: 'product' });
  workers.push(fresh);
  assert.deepEqual(
    await appliedMigrations(pool),
    listMigrations().map((m) => m.id),
    'the new worker applied this tree’s migrations over the old schema',
  );
  const wait = await runCliAsync(['wait', '--catalog', ctx.catalog], ctx.env, { timeoutMs: 180_000 });
  assert.equal(wait.code, 0, `new CLI wait:\n${wait.stdout}\n${wait.stderr}\n${outputs()}`);
  t.diagnostic(`published ${Date.now() - killedAt} ms after the kill`);

  // The ledger: every planned page once, committed; the old worker's pages as it committed them;
  // the rest committed by the new worker.
  const final = await ledgerRows(pool, v.versionId);
  assert.deepEqual(
    final.map((r) => r.pageNo),
    Array.from({ length: v.pagesTotal }, (_, i) => i + 1),
    'one ledger row per planned page, none twice',
  );
  assert.deepEqual(
    final.filter((r) => r.committedAt === null).map((r) => r.pageNo),
    [],
    'every page is committed',
  );
  assert.equal(
    final.reduce((n, r) => n + r.rows, 0),
    JOBS,
    'the ledger’s rows add up to the source',
  );
  for (const before of atKill) {
    assert.deepEqual(final[before.pageNo - 1], before, `page ${before.pageNo}, committed by the old worker, untouched`);
  }
  const takenOver = final.filter((r) => !atKill.some((b) => b.pageNo === r.pageNo));
  assert.ok(takenOver.length > 0);
  assert.ok(
    takenOver.every(identityOf(fresh.pid)),
    `the pages left were committed by the new worker: ${JSON.stringify(takenOver.filter((r) => !identityOf(fresh.pid)(r)))}`,
  );
  t.diagnostic(
    `new worker ${fresh.pid} committed ${takenOver.length} pages; retried pages: ${JSON.stringify(takenOver.filter((r) => r.attempt > 1).map((r) => r.pageNo))}`,
  );

  const cmp = await compareCatalogToSource(
    pool,
    ctx.dbs.sourcePool,
    ctx.catalog,
    await serverTimezone(ctx.dbs.sourcePool),
  );
  assert.equal(cmp.rows, JOBS);
  assert.equal(cmp.catalog, cmp.source, 'active_jobs equals the source, field by field');

  const status = await runCliAsync(['status', '--catalog', ctx.catalog, '--json'], ctx.env, { timeoutMs: 60_000 });
  assert.equal(status.code, 0, `new CLI status:\n${status.stdout}\n${status.stderr}`);
  const s = JSON.parse(status.stdout) as Record<string, unknown>;
  assert.equal(s.phase, 'done', status.stdout);
  assert.equal(s.published, true);
  assert.equal(s.versionId, v.versionId);
  assert.equal(s.pagesTotal, v.pagesTotal);
  assert.equal(s.rowsUpserted, JOBS, 'rows counted once across the two releases');
  t.diagnostic(
    `build ${release.ms} ms, rebuild across releases ${Date.now() - tSetup} ms, whole test ${Date.now() - t0} ms`,
  );
});
