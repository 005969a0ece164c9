/**
 * `start --refresh` and its dry run on a catalog written by a real Bacula 9.6.7 director
 * (test/fixtures/bacula-9.6.7), through the real activities on real PostgreSQL: the versions are
 * built from the director's catalog before `purge files jobid=1` (`catalog-a.sql`), then the same
 * source database holds the director's catalog after it (`catalog-b.sql`). With and without
 * `--files`, the dry run counts the change exactly, the refresh writes only the purged job, reports
 * the prune, and publishes what a full rebuild of the purged catalog publishes, `deleted` included;
 * a refresh after it is up to date.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import format from 'pg-format';
import { createActivities } from '../activities';
import type { Activities } from '../activities';
import { runActivity } from '../dev/harness/activity-env';
import { baculaFacts, loadBaculaDump } from '../dev/harness/bacula-fixture';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { viewDifference } from '../dev/harness/views';
import { dropDatabase } from '../dev/env/postgres';
import type { SourceConfig } from '../lib/config';
import { migrate } from '../lib/db';
import { UnknownSourceError } from '../lib/errors';
import { SourceRegistry } from '../lib/sources';

const ZONE = 'Europe/Berlin';
const facts = baculaFacts();

let dbs: TestDatabases;
let sourceName: string;
let sources: SourceRegistry | undefined;
let acts: Activities;

/** Loads `dump` into the one source database (replacing what it held) and opens new activities on it. */
async function director(dump: string): Promise<void> {
  await sources?.close();
  const url = await loadBaculaDump(dbs.adminUrl, sourceName, dump);
  const config: SourceConfig = { kind: 'bacula', databaseUrl: url, timezone: ZONE };
  const registry = new SourceRegistry((name) => {
    if (name !== 'bacula') throw new UnknownSourceError(name, ['bacula']);
    return config;
  }, dbs.catalogPool);
  sources = registry;
  acts = createActivities({ pool: dbs.catalogPool, sources: registry, identity: 'test@host', buildId: 'test' });
}

before(async () => {
  dbs = await testDatabases('baclrefresh');
  await migrate(dbs.catalogPool);
  sourceName = `${new URL(dbs.catalogUrl).pathname.slice(1).replace(/_catalog$/, '')}_director`;
  await director('catalog-a.sql');
});

after(async () => {
  await sources?.close().catch(() => undefined);
  await dropDatabase(dbs.adminUrl, sourceName).catch(() => undefined);
  await dbs?.drop();
});

/** Plans `catalog` (a refresh with `refresh`), copies, seals, indexes, reconciles (must pass) and publishes it, as the workflow does. */
async function rebuild(catalog: string, o: { refresh?: boolean; files: boolean; run: string }) {
  const plan = await runActivity(acts.planRebuild, {
    catalog,
    source: 'bacula',
    ...(o.refresh ? { refresh: true } : {}),
    ...(o.files ? { files: true } : {}),
    workflowId: `catalog-rebuild/${catalog}`,
    firstRunId: o.run,
  });
  if (plan.upToDate) return plan;
  const versionId = plan.versionId;
  for (let p = 1; p <= plan.pagesTotal; p++)
    await runActivity(acts.copyPage, { catalog, source: 'bacula', versionId, pageNo: p });
  await runActivity(acts.sealVersion, { versionId });
  await runActivity(acts.indexVersion, { versionId });
  const r = await runActivity(acts.reconcile, { catalog, source: 'bacula', versionId, round: 1 });
  assert.equal(r.ok, true, JSON.stringify(r));
  await runActivity(acts.publishVersion, { catalog, versionId, allowShrink: false });
  return plan;
}

/** Rows of a version's own tables: what it wrote itself. */
async function ownRows(versionId: string) {
  const count = async (table: string) => {
    const exists = await dbs.catalogPool.query(`SELECT 1 FROM pg_class WHERE relname = $1`, [table]);
    if (!exists.rowCount) return 0;
    return (await dbs.catalogPool.query<{ n: number }>(format('SELECT count(*)::int AS n FROM %I', table))).rows[0].n;
  };
  return { jobs: await count(`job_v${versionId}`), files: await count(`file_v${versionId}`) };
}

test("real Bacula 9.6.7 catalog: after the director's purge of job 1, the dry run counts it, the refresh writes only that job and equals a full rebuild, with and without --files", async () => {
  const purged = String(facts.purged_jobid);
  await rebuild('withfiles', { files: true, run: 'a1' });
  await rebuild('jobsonly', { files: false, run: 'a2' });
  const unchanged = await runActivity(acts.dryRunPlan, {
    catalog: 'withfiles',
    source: 'bacula',
    refresh: true,
    files: true,
  });
  assert.equal(unchanged.refresh, true, JSON.stringify(unchanged));
  assert.deepEqual(unchanged.jobs, { new: 0, changed: 0, gone: 0 }, 'the same catalog: nothing changed');

  // The director's catalog after `purge files jobid=1`, in the same database.
  await director('catalog-b.sql');
  const filesBefore = await dbs.catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM active_files WHERE catalog_name = 'withfiles' AND job_id = $1`,
    [purged],
  );
  assert.ok(filesBefore.rows[0].n > 0, `job ${purged} had file records before the purge`);
  for (const [catalog, files] of [
    ['withfiles', true],
    ['jobsonly', false],
  ] as const) {
    const versions = async () =>
      (await dbs.catalogPool.query(`SELECT 1 FROM version WHERE catalog_name = $1`, [catalog])).rowCount;
    const before = await versions();
    const dry = await runActivity(acts.dryRunPlan, { catalog, source: 'bacula', refresh: true, files });
    assert.equal(dry.refresh, true, JSON.stringify(dry));
    // PurgedFiles 0 → 1: the job's row changed; its file records are gone from the director.
    assert.deepEqual(dry.jobs, { new: 0, changed: 1, gone: 0 }, catalog);
    if (files) assert.deepEqual(dry.fileRecords, { copy: 0, drop: filesBefore.rows[0].n }, 'the purged records');
    assert.equal(await versions(), before, 'the dry run made no version');

    const plan = await rebuild(catalog, { refresh: true, files, run: 'b1' });
    assert.equal(plan.fullRebuildBecause, undefined);
    assert.deepEqual([plan.refresh?.newJobs, plan.refresh?.changedJobs, plan.refresh?.deletedJobs], [0, 1, 0]);
    assert.deepEqual(await ownRows(plan.versionId), { jobs: 1, files: 0 }, 'the refresh wrote the purged job alone');
    if (files) {
      const published = await dbs.catalogPool.query<{ message: string }>(
        `SELECT message FROM event WHERE version_id = $1 AND kind = 'published'`,
        [plan.versionId],
      );
      assert.match(
        published.rows[0].message,
        new RegExp(`files of 1 job pruned by the director since version \\d+: ${filesBefore.rows[0].n} records`),
      );
    }

    const full = `${catalog}-full`;
    await rebuild(full, { files, run: 'b2' });
    for (const view of files ? (['active_jobs', 'active_files'] as const) : (['active_jobs'] as const)) {
      const d = await viewDifference(dbs.catalogPool, view, catalog, full);
      assert.deepEqual({ onlyA: d.onlyA, onlyB: d.onlyB }, { onlyA: 0, onlyB: 0 }, `${view} of ${catalog}`);
    }
    assert.equal((await rebuild(catalog, { refresh: true, files, run: 'b3' })).upToDate, true, 'then up to date');
  }
});
