/**
 * Worker operations (issue 8; design.md Workers, Schema migrations, PostgreSQL hygiene), with real
 * worker processes, a private dev server on free ports and fresh databases on the machine's server:
 * - SIGTERM to a worker inside a page transaction (a slow page held open by `pg_sleep`), with a
 *   second worker running: the page finishes within the shutdown grace time or is retried elsewhere,
 *   the rebuild completes, the ledger has exactly one committed row per planned page, the catalog
 *   equals the source, and the SIGTERMed worker exits 0 by itself.
 * - Rolling upgrade: an additive migration (a test-local folder holding this build's migrations plus
 *   one more) is applied to the catalog database while a rebuild by an already running worker is
 *   paused mid-copy; resumed, it completes and equals the source. A worker of this build then refuses
 *   to start against that schema (exit 1, "catalog schema is at migration N, this build knows up to M").
 * - The `catalog_reader` role reads `active_jobs` and nothing else (42501 on every other relation).
 */
import type { TestContext } from 'node:test';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client as PgClient } from 'pg';
import format from 'pg-format';
import { getProgress, pause, resume } from '../client';
import { listMigrations, migrate, migrationsDir } from '../lib/db';
import { databaseUrl } from '../dev/env/postgres';
import type { TestDatabases } from '../dev/harness/harness';
import { compareCatalogToSource, privateTemporal, testDatabases } from '../dev/harness/harness';
import { rebuildFixture, serverTimezone } from '../dev/harness/fixture';
import { runWorkerToExit } from '../dev/harness/entrypoint';
import { heldWindow } from '../dev/harness/observe';
import { waitFor, within } from '../dev/harness/wait';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
const tmpDirs: string[] = [];

before(async () => {
  temporal = await privateTemporal();
  tmpDirs.push(temporal.dir);
});

after(async () => {
  await temporal?.stop();
  for (const d of tmpDirs) fs.rmSync(d, { recursive: true, force: true });
});

/** Fresh databases with `jobs` generated Bareos jobs (seed 31), workers, a queue; all released by the test's cleanup. */
const setup = (
  t: TestContext,
  tag: string,
  jobs: number,
  workerEnv: Record<string, string> = {},
  keepDatabases = false,
) =>
  rebuildFixture(t, {
    address: temporal.address,
    tag,
    jobs,
    seed: 31,
    catalog: `ops-${tag}`,
    workerEnv,
    keepDatabases,
  });

/** Ledger of a version: planned pages, ledger rows, committed rows, distinct page numbers. */
async function ledgerSummary(dbs: TestDatabases, versionId: string) {
  const { rows } = await dbs.catalogPool.query<{
    pages_total: number;
    planned: number;
    ledger: number;
    committed: number;
    distinct_pages: number;
    rows: string;
    partition_rows: string;
  }>(
    `SELECT v.pages_total,
            (SELECT count(*)::int FROM plan_page pp WHERE pp.version_id = v.version_id) AS planned,
            (SELECT count(*)::int FROM page p WHERE p.version_id = v.version_id) AS ledger,
            (SELECT count(committed_at)::int FROM page p WHERE p.version_id = v.version_id) AS committed,
            (SELECT count(DISTINCT page_no)::int FROM page p WHERE p.version_id = v.version_id) AS distinct_pages,
            (SELECT coalesce(sum(rows), 0)::text FROM page p WHERE p.version_id = v.version_id) AS rows,
            (SELECT count(*)::text FROM job j WHERE j.version_id = v.version_id) AS partition_rows
     FROM version v WHERE v.version_id = $1`,
    [versionId],
  );
  return rows[0];
}

test('SIGTERM to a worker inside a page: the page finishes or is retried elsewhere, nothing lost or duplicated, the worker exits 0', async (t) => {
  const jobs = 6_000;
  const ctx = await setup(t, 'sigterm', jobs, {
    CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 4, ms: 3000 } }),
  });
  const [a, b] = await Promise.all([ctx.spawn(), ctx.spawn()]);
  const handle = await ctx.start({ pageSize: 500, concurrency: 2 });

  // The worker whose session sleeps inside page 4's transaction (after its ledger row was inserted).
  const inPage = await waitFor(
    'a worker session in pg_sleep inside page 4',
    async () => {
      const { rows } = await ctx.dbs.catalogPool.query<{ app: string; xid: string | null }>(
        `SELECT application_name AS app, backend_xid::text AS xid FROM pg_stat_activity
         WHERE datname = current_database() AND application_name LIKE 'catalog-rebuild:worker:%' AND state = 'active' AND query LIKE '%pg_sleep%'`,
      );
      return rows[0];
    },
    { timeoutMs: 60_000, intervalMs: 20 },
  );
  assert.ok(inPage.xid, 'the sleeping session is inside a write transaction (ledger row inserted)');
  const pid = Number(inPage.app.split(':')[2]);
  const victim = [a, b].find((w) => w.pid === pid);
  assert.ok(victim, `pid ${pid} is one of the test's workers (${a.pid}, ${b.pid})`);
  const other = victim === a ? b : a;
  const termAt = Date.now();
  process.kill(victim.pid, 'SIGTERM');

  const code = await within(victim.exited, 45_000);
  const exitMs = Date.now() - termAt;
  assert.equal(code, 0, `the SIGTERMed worker exits 0 by itself (got ${code} after ${exitMs} ms)\n${victim.output()}`);
  assert.ok(exitMs < 30_000, `exited within the shutdown grace time plus closing (${exitMs} ms)`);

  const result = await ctx.result(handle);
  assert.equal(result.published, true);
  const led = await ledgerSummary(ctx.dbs, result.versionId);
  assert.equal(led.planned, result.pagesTotal);
  assert.equal(led.pages_total, result.pagesTotal);
  assert.equal(led.ledger, result.pagesTotal, 'exactly one ledger row per planned page');
  assert.equal(led.committed, result.pagesTotal);
  assert.equal(led.distinct_pages, result.pagesTotal);
  assert.equal(Number(led.rows), jobs, 'ledger rows add up to the source');
  assert.equal(Number(led.partition_rows), jobs, 'no job lost or duplicated in the version');
  const cmp = await compareCatalogToSource(
    ctx.dbs.catalogPool,
    ctx.dbs.sourcePool,
    ctx.catalog,
    await serverTimezone(ctx.dbs.sourcePool),
  );
  assert.equal(cmp.rows, jobs);
  assert.equal(cmp.catalog, cmp.source, 'the catalog equals the source');

  // Who committed page 4: the SIGTERMed worker within its grace time, or the other one on a retry.
  const p4 = await ctx.dbs.catalogPool.query<{ attempt: number; worker_identity: string }>(
    `SELECT attempt, worker_identity FROM page WHERE version_id = $1 AND page_no = 4`,
    [result.versionId],
  );
  const committedBy = p4.rows[0].worker_identity.split('@')[0];
  assert.ok(
    [String(victim.pid), String(other.pid)].includes(committedBy),
    `page 4 committed by ${p4.rows[0].worker_identity}`,
  );
  t.diagnostic(
    `page 4 committed by the ${committedBy === String(victim.pid) ? 'SIGTERMed worker within its shutdown grace time' : 'other worker on a retry'} ` +
      `(attempt ${p4.rows[0].attempt}); SIGTERMed worker exited 0 after ${exitMs} ms`,
  );
  assert.ok(other.child.exitCode === null, 'the other worker is still running');
});

test('SIGTERM with a page longer than the shutdown grace time: nothing lost or duplicated, the worker exits 0', async (t) => {
  const jobs = 4_000;
  const graceMs = 1_000;
  const ctx = await setup(t, 'sigterm-grace', jobs, {
    CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 3, ms: 8000 } }),
    CATALOG_REBUILD_SHUTDOWN_GRACE_MS: String(graceMs),
  });
  const [a, b] = await Promise.all([ctx.spawn(), ctx.spawn()]);
  const handle = await ctx.start({ pageSize: 500, concurrency: 2 });
  const inPage = await waitFor(
    'a worker session in pg_sleep inside page 3',
    async () => {
      const { rows } = await ctx.dbs.catalogPool.query<{ app: string }>(
        `SELECT application_name AS app FROM pg_stat_activity
         WHERE datname = current_database() AND application_name LIKE 'catalog-rebuild:worker:%' AND state = 'active' AND query LIKE '%pg_sleep%'`,
      );
      return rows[0];
    },
    { timeoutMs: 60_000, intervalMs: 20 },
  );
  const pid = Number(inPage.app.split(':')[2]);
  const victim = [a, b].find((w) => w.pid === pid)!;
  assert.ok(victim);
  const other = victim === a ? b : a;
  const termAt = Date.now();
  process.kill(victim.pid, 'SIGTERM');
  const code = await within(victim.exited, 45_000);
  const exitMs = Date.now() - termAt;
  assert.equal(code, 0, `the SIGTERMed worker exits 0 by itself (got ${code} after ${exitMs} ms)\n${victim.output()}`);

  const result = await ctx.result(handle);
  assert.equal(result.published, true);
  const led = await ledgerSummary(ctx.dbs, result.versionId);
  assert.equal(led.ledger, result.pagesTotal, 'exactly one ledger row per planned page');
  assert.equal(led.committed, result.pagesTotal);
  assert.equal(Number(led.partition_rows), jobs);
  const cmp = await compareCatalogToSource(
    ctx.dbs.catalogPool,
    ctx.dbs.sourcePool,
    ctx.catalog,
    await serverTimezone(ctx.dbs.sourcePool),
  );
  assert.equal(cmp.catalog, cmp.source);
  const p3 = await ctx.dbs.catalogPool.query<{ attempt: number; worker_identity: string }>(
    `SELECT attempt, worker_identity FROM page WHERE version_id = $1 AND page_no = 3`,
    [result.versionId],
  );
  const committedBy = p3.rows[0].worker_identity.split('@')[0];
  t.diagnostic(
    `grace ${graceMs} ms, page 3 sleeps 8000 ms: committed by the ${committedBy === String(victim.pid) ? 'SIGTERMed' : 'other'} worker, attempt ${p3.rows[0].attempt}; ` +
      `the SIGTERMed worker exited ${code} after ${exitMs} ms; retries ${result.retries}`,
  );
  // design.md / issue 8: "in-flight pages finish within the shutdown grace time or are retried elsewhere".
  await t.test(
    'the page still running at the grace time is given up and retried on the other worker; the worker exits soon after the grace time',
    () => {
      assert.ok(exitMs < graceMs + 4_000, `worker exited ${exitMs} ms after SIGTERM (grace ${graceMs} ms)`);
      assert.equal(committedBy, String(other.pid), 'page 3 committed by the other worker');
    },
  );
});

/** Folder with copies of this build's migrations plus one additive migration numbered after them. */
function upgradedMigrations(): { dir: string; newId: number; knownId: number } {
  const current = listMigrations(migrationsDir());
  const knownId = current[current.length - 1].id;
  const newId = knownId + 1;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-migrations-'));
  tmpDirs.push(dir);
  for (const m of current) fs.writeFileSync(path.join(dir, m.name), m.sql);
  fs.writeFileSync(
    path.join(dir, `${String(newId).padStart(3, '0')}_test_rolling_upgrade.sql`),
    `-- Test-only expand step of a future release: additive changes only.
ALTER TABLE job ADD COLUMN IF NOT EXISTS upgrade_note text;          -- reaches every partition, including the one being built
ALTER TABLE page ADD COLUMN IF NOT EXISTS verified_by text;
CREATE INDEX IF NOT EXISTS event_kind_created_idx ON event (kind, created_at);
CREATE TABLE IF NOT EXISTS upgrade_marker (id integer PRIMARY KEY, note text);
`,
  );
  return { dir, newId, knownId };
}

let upgraded: { dbs: TestDatabases; catalog: string } | undefined;

test('rolling upgrade: an additive migration applied mid-rebuild; the rebuild completes; a worker refuses a schema newer than it knows', async (t) => {
  const jobs = 8_000;
  const ctx = await setup(t, 'upgrade', jobs, {}, true);
  t.after(async () => {
    if (!upgraded) await ctx.dbs.drop();
  });
  await ctx.spawn();
  const handle = await ctx.start({ pageSize: 250, concurrency: 2, pauseBetweenPagesMs: 100 });
  await waitFor('a few committed pages', async () => (await getProgress(handle, 10_000)).pagesDone >= 4, {
    timeoutMs: 60_000,
    intervalMs: 100,
  });
  await pause(handle);
  const paused = await waitFor(
    'the rebuild to be paused with no page in flight',
    async () => {
      const p = await getProgress(handle, 10_000);
      return p.paused && p.inFlight === 0 && !p.draining ? p : null;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  assert.equal(paused.phase, 'copying');
  assert.ok(paused.pagesDone < paused.pagesTotal, `mid-rebuild: ${paused.pagesDone}/${paused.pagesTotal}`);

  // The upgrade: apply the next release's additive migration to the catalog database.
  const { dir, newId, knownId } = upgradedMigrations();
  const applied = await migrate(ctx.dbs.catalogPool, dir);
  assert.deepEqual(applied, [newId]);
  const cols = await ctx.dbs.catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = $1 AND column_name = 'upgrade_note'`,
    [`job_v${paused.versionId}`],
  );
  assert.equal(cols.rows[0].n, 1, 'the partition being built has the new column');
  await heldWindow(handle, { catalogPool: ctx.dbs.catalogPool }); // the window ran again, over the new schema
  assert.equal((await getProgress(handle, 10_000)).pagesDone, paused.pagesDone, 'still paused during the upgrade');

  await resume(handle);
  const result = await ctx.result(handle);
  assert.equal(result.published, true, JSON.stringify(result));
  const led = await ledgerSummary(ctx.dbs, result.versionId);
  assert.equal(led.ledger, result.pagesTotal);
  assert.equal(led.committed, result.pagesTotal);
  assert.equal(Number(led.partition_rows), jobs);
  const cmp = await compareCatalogToSource(
    ctx.dbs.catalogPool,
    ctx.dbs.sourcePool,
    ctx.catalog,
    await serverTimezone(ctx.dbs.sourcePool),
  );
  assert.equal(cmp.catalog, cmp.source, 'the catalog equals the source after the upgrade');
  const notes = await ctx.dbs.catalogPool.query<{ n: number }>(
    `SELECT count(upgrade_note)::int AS n FROM job WHERE version_id = $1`,
    [result.versionId],
  );
  assert.equal(notes.rows[0].n, 0, 'the old worker left the new column NULL');
  upgraded = { dbs: ctx.dbs, catalog: ctx.catalog };

  // A worker of this build against the newer schema refuses to start.
  const refused = await runWorkerToExit(ctx.env);
  assert.equal(refused.code, 1, refused.out);
  assert.match(refused.out, new RegExp(`catalog schema is at migration ${newId}, this build knows up to ${knownId}`));
  assert.doesNotMatch(refused.out, /polling task queue/);
  const rows = await ctx.dbs.catalogPool.query<{ id: number }>('SELECT id FROM schema_migration ORDER BY id');
  assert.equal(rows.rows[rows.rows.length - 1].id, newId, 'the refused worker changed nothing');
});

test('catalog_reader can SELECT from active_jobs and active_files and nothing else', async (t) => {
  let dbs = upgraded?.dbs;
  let catalog = upgraded?.catalog;
  if (!dbs) {
    // Stand-alone: a migrated, empty catalog database.
    dbs = await testDatabases('reader');
    await migrate(dbs.catalogPool);
    catalog = 'none';
  }
  const owned = dbs;
  const role = `crt_reader_${randomBytes(4).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  const admin = new PgClient({
    connectionString: databaseUrl(dbs.adminUrl, new URL(dbs.catalogUrl).pathname.slice(1)),
  });
  await admin.connect();
  t.after(async () => {
    await admin.query(format('DROP ROLE IF EXISTS %I', role)).catch(() => undefined);
    await admin.end().catch(() => undefined);
    await owned.drop();
  });
  await admin.query(format('CREATE ROLE %I LOGIN PASSWORD %L IN ROLE catalog_reader', role, password));

  const u = new URL(dbs.catalogUrl);
  u.username = role;
  u.password = password;
  const reader = new PgClient({ connectionString: u.toString() });
  await reader.connect();
  try {
    const r = await reader.query<{ n: number }>(`SELECT count(*)::int AS n FROM active_jobs WHERE catalog_name = $1`, [
      catalog,
    ]);
    if (upgraded) assert.equal(r.rows[0].n, 8_000, 'the reader sees the published catalog');
    const cols = await reader.query(
      `SELECT job_id, job, job_name, client, type, level, status, start_time, end_time, files, bytes, pool, fileset FROM active_jobs LIMIT 1`,
    );
    assert.ok(cols.fields.length === 13);
    const fileCols = await reader.query(
      `SELECT job_id, file_id, path, name, path_bytes, name_bytes, file_index, delta_seq, deleted, size, mode, uid, gid,
              mtime, md5, lstat FROM active_files LIMIT 1`,
    );
    assert.equal(fileCols.fields.length, 16);

    // Every other relation in the schema: tables, partitions, views, sequences.
    const rels = await admin.query<{ name: string; kind: string }>(
      `SELECT c.relname AS name, c.relkind::text AS kind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
         AND c.relname NOT IN ('active_jobs', 'active_files') ORDER BY 1`,
    );
    const names = rels.rows.map((x) => x.name);
    for (const must of ['job', 'file', 'version', 'page', 'active', 'event', 'schema_migration'])
      assert.ok(names.includes(must), `${must} exists`);
    const refusedCodes: Record<string, string> = {};
    for (const rel of rels.rows) {
      const sql =
        rel.kind === 'S' ? format('SELECT nextval(%L)', rel.name) : format('SELECT 1 FROM %I LIMIT 1', rel.name);
      try {
        await reader.query(sql);
        refusedCodes[rel.name] = 'allowed';
      } catch (err) {
        refusedCodes[rel.name] = (err as { code?: string }).code ?? String(err);
      }
    }
    for (const [name, code] of Object.entries(refusedCodes))
      assert.equal(code, '42501', `SELECT from ${name} is refused with 42501 (got ${code})`);
    t.diagnostic(`refused with 42501: ${Object.keys(refusedCodes).join(', ')}`);

    // Reading is all: no write privilege on the view either (a DELETE is refused before any check of
    // privileges, since the join view is not updatable).
    const priv = await reader.query<{ write: boolean; read: boolean }>(
      `SELECT has_table_privilege('active_jobs', 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER') AS write,
              has_table_privilege('active_jobs', 'SELECT') AS read`,
    );
    assert.deepEqual(priv.rows[0], { write: false, read: true });
    await assert.rejects(reader.query(`DELETE FROM active_jobs`));
  } finally {
    await reader.end();
  }
});
