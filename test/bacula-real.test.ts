/**
 * A catalog written by a real Bacula 9.6.7 director (test/fixtures/bacula-9.6.7: twelve jobs,
 * Accurate Full, Incremental and Differential with deleted files, warnings, failed, canceled,
 * restore, verify, copy, admin; the director in Europe/Berlin across the end of summer time, the
 * database in UTC; dumped before and after `purge files jobid=1`) through the real activities on
 * real PostgreSQL, and the CLI as a process:
 * - active_jobs and active_files (with `deleted`) equal the director's tables, field by field;
 * - `files` and `find` answer what `bconsole list files` (and `type=deleted`) and Bacula's query 1
 *   answer, with a query of raw Latin-1 bytes;
 * - without `timezone` the plan fails naming the offsets; the backup check counts job 4 (T with
 *   JobErrors 1) as a warning backup;
 * - the director's purge is published and reported; file records lost with PurgedFiles = 0 are
 *   refused per job.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pool } from 'pg';
import { createActivities } from '../activities';
import type { Activities } from '../activities';
import { checkCatalog } from '../client/check';
import { catalogFileRecords, sourceFileRecords } from '../dev/harness/file-records';
import { runActivity } from '../dev/harness/activity-env';
import { baculaFacts, bconsoleListFiles, bconsoleQuery1, loadBaculaDump } from '../dev/harness/bacula-fixture';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { dropDatabase } from '../dev/env/postgres';
import type { SourceConfig } from '../lib/config';
import { createPool, migrate } from '../lib/db';
import { UnknownSourceError } from '../lib/errors';
import { projectRoot } from '../lib/paths';
import { SourceRegistry } from '../lib/sources';

const CATALOG = 'real';
const ZONE = 'Europe/Berlin';
const BACULA9 = { name: 'n.name', joins: 'LEFT JOIN filename n ON n.filenameid = f.filenameid' };
const facts = baculaFacts();

let dbs: TestDatabases;
let acts: Activities;
let sources: SourceRegistry;
const dbNames: string[] = [];
const pools: Pool[] = [];
const configs: Record<string, SourceConfig> = {};
let sourceA: Pool;
let cliEnv: NodeJS.ProcessEnv;
/** The versions published from the dump before the purge, and after it. */
let vA: string;
let vB: string;

async function loadSource(dump: string, tag: string): Promise<{ url: string; pool: Pool }> {
  const name = `${new URL(dbs.catalogUrl).pathname.slice(1).replace(/_catalog$/, '')}_${tag}`;
  dbNames.push(name);
  const url = await loadBaculaDump(dbs.adminUrl, name, dump);
  const pool = createPool(url, { applicationName: 'catalog-rebuild:test', max: 2 });
  pools.push(pool);
  return { url, pool };
}

before(async () => {
  dbs = await testDatabases('bacula967');
  await migrate(dbs.catalogPool);
  const a = await loadSource('catalog-a.sql', 'a');
  const b = await loadSource('catalog-b.sql', 'b');
  const lost = await loadSource('catalog-b.sql', 'lost');
  sourceA = a.pool;
  configs.bacula = { kind: 'bacula', databaseUrl: a.url, timezone: ZONE };
  configs['bacula-nozone'] = { kind: 'bacula', databaseUrl: a.url };
  configs['bacula-purged'] = { kind: 'bacula', databaseUrl: b.url, timezone: ZONE };
  // A catalog restored from an older state: the Differential's saved records are gone, PurgedFiles stays 0.
  await lost.pool.query(`DELETE FROM file WHERE jobid = $1 AND fileindex > 0`, [facts.roles.differential]);
  configs['bacula-lost'] = { kind: 'bacula', databaseUrl: lost.url, timezone: ZONE };
  sources = new SourceRegistry((name) => {
    const c = configs[name];
    if (!c) throw new UnknownSourceError(name, Object.keys(configs));
    return c;
  }, dbs.catalogPool);
  acts = createActivities({ pool: dbs.catalogPool, sources, identity: 'test@host', buildId: 'test' });
  cliEnv = { ...process.env, CATALOG_DATABASE_URL: dbs.catalogUrl, CATALOG_REBUILD_CONFIG: '' };
});

after(async () => {
  await sources?.close().catch(() => undefined);
  for (const p of pools) await p.end().catch(() => undefined);
  for (const n of dbNames) await dropDatabase(dbs.adminUrl, n).catch(() => undefined);
  await dbs?.drop();
});

/** Plans with files, copies every page, seals, reconciles; returns the version id. */
async function rebuild(source: string, run: string): Promise<string> {
  const plan = await runActivity(acts.planRebuild, {
    catalog: CATALOG,
    source,
    files: true,
    workflowId: `catalog-rebuild/${CATALOG}`,
    firstRunId: run,
  });
  for (let p = 1; p <= plan.pagesTotal; p++)
    await runActivity(acts.copyPage, { catalog: CATALOG, source, versionId: plan.versionId, pageNo: p });
  await runActivity(acts.sealVersion, { versionId: plan.versionId });
  const r = await runActivity(acts.reconcile, { catalog: CATALOG, source, versionId: plan.versionId, round: 1 });
  assert.equal(r.ok, true, JSON.stringify(r));
  return plan.versionId;
}

const publish = (versionId: string, allowShrink = false) =>
  runActivity(acts.publishVersion, { catalog: CATALOG, versionId, allowShrink });

/** The CLI as a process, through bash (so an argument can hold raw bytes); stdout parsed as JSON. */
function cliJson(args: string): unknown {
  const bin = `${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(projectRoot(), 'bin/catalog-rebuild.js'))}`;
  const r = spawnSync('bash', ['-c', `${bin} ${args} --json`], { env: cliEnv, encoding: 'utf8' });
  assert.equal(r.status, 0, `${args}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** The director's job rows as the catalog must show them, in SQL written apart from the product's mapping. */
async function directorJobs(pool: Pool): Promise<string[]> {
  const t = (c: string) => `to_char((${c} AT TIME ZONE '${ZONE}') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')`;
  const { rows } = await pool.query<{ r: string }>(
    `SELECT concat_ws('|', j.jobid, j.job, j.name, c.name, j.type, NULLIF(j.level::text, ''), j.jobstatus,
              ${t('j.schedtime')}, ${t('j.starttime')}, ${t('j.endtime')}, ${t('j.realendtime')}, j.jobfiles, j.jobbytes,
              j.readbytes, j.joberrors, p.name, fs.fileset, NULLIF(j.priorjobid, 0), j.jobtdate) AS r
     FROM job j LEFT JOIN client c USING (clientid) LEFT JOIN pool p USING (poolid) LEFT JOIN fileset fs USING (filesetid)
     ORDER BY j.jobid`,
  );
  return rows.map((x) => x.r);
}

async function catalogJobs(): Promise<string[]> {
  const t = (c: string) => `to_char(${c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')`;
  const { rows } = await dbs.catalogPool.query<{ r: string }>(
    `SELECT concat_ws('|', job_id, job, job_name, client, type, level, status, ${t('sched_time')}, ${t('start_time')},
              ${t('end_time')}, ${t('real_end_time')}, files, bytes, read_bytes, job_errors, pool, fileset, prior_job_id,
              job_tdate) AS r
     FROM active_jobs WHERE catalog_name = $1 ORDER BY job_id::bigint`,
    [CATALOG],
  );
  return rows.map((x) => x.r);
}

test('real Bacula 9.6.7 catalog: active_jobs and active_files (with deleted) equal the director tables; end times agree with JobTDate', async () => {
  vA = await rebuild('bacula', 'ra');
  await publish(vA);
  assert.deepEqual(await catalogJobs(), await directorJobs(sourceA));
  assert.equal((await catalogJobs()).length, 12);

  const want = await sourceFileRecords(sourceA, BACULA9);
  const got = await catalogFileRecords(dbs.catalogPool, { catalog: CATALOG });
  assert.equal(got.size, want.size);
  assert.equal(got.size, 708);
  for (const [id, w] of want) assert.equal(got.get(id), w, `file record ${id}`);
  const deleted = await dbs.catalogPool.query<{ job_id: string; deleted: boolean; n: number }>(
    `SELECT job_id, deleted, count(*)::int AS n FROM active_files WHERE catalog_name = $1 AND job_id IN ('2', '3')
     GROUP BY 1, 2 ORDER BY 1, 2`,
    [CATALOG],
  );
  // The director's own figures: the Incremental 9 saved of JobFiles 136, the Differential 13 of 150.
  assert.deepEqual(
    deleted.rows.map((r) => [r.job_id, r.deleted, r.n]),
    [
      ['2', false, 9],
      ['2', true, 127],
      ['3', false, 13],
      ['3', true, 137],
    ],
  );
  // JobTDate is the epoch of a backup's end time: the published end time says the same instant,
  // but for the Incremental, whose naive time falls in the hour Europe/Berlin repeats at the end of
  // summer time (PostgreSQL reads it as standard time, docs/sources.md).
  const ends = await dbs.catalogPool.query<{ job_id: string; diff: number }>(
    `SELECT job_id, (extract(epoch FROM end_time) - job_tdate)::int AS diff FROM active_jobs
     WHERE catalog_name = $1 AND type = 'B' ORDER BY job_id::bigint`,
    [CATALOG],
  );
  assert.deepEqual(
    ends.rows.map((r) => [r.job_id, r.diff]),
    [
      ['1', 0],
      ['2', 3600],
      ['3', 0],
      ['4', 0],
      ['5', 0],
      ['6', 0],
    ],
  );
});

test('real Bacula 9.6.7 catalog: files and find answer what bconsole list files and query 1 answer, raw Latin-1 bytes included', async () => {
  for (const job of [1, 2, 3, 4, 5, 6, 9, 11]) {
    const listed = cliJson(`files --catalog ${CATALOG} --job ${job}`) as { path: string; name: string }[];
    assert.deepEqual(
      listed.map((f) => f.path + f.name).sort(),
      bconsoleListFiles(`list-files-${job}-a.txt`).sort(),
      `job ${job}`,
    );
  }
  for (const job of [2, 3]) {
    const all = cliJson(`files --catalog ${CATALOG} --job ${job} --deleted`) as {
      path: string;
      name: string;
      deleted: boolean;
    }[];
    assert.deepEqual(
      all
        .filter((f) => f.deleted)
        .map((f) => f.path + f.name)
        .sort(),
      bconsoleListFiles(`list-files-deleted-${job}-a.txt`).sort(),
      `job ${job} --deleted`,
    );
  }
  const places = bconsoleQuery1();
  const files = new Map<string, { bytes: Buffer; jobs: string[] }>();
  for (const p of places) {
    const bytes = Buffer.concat([p.path, p.name]);
    const e = files.get(bytes.toString('hex')) ?? { bytes, jobs: [] };
    e.jobs.push(p.jobId);
    files.set(bytes.toString('hex'), e);
  }
  assert.equal(files.size, 2, 'query 1 was asked for a Latin-1 and a UTF-8 name');
  for (const { bytes, jobs } of files.values()) {
    // The operator types the name's bytes: octal escapes through printf, so argv holds them raw.
    const octal = [...bytes].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');
    const hits = cliJson(`find --catalog ${CATALOG} --path "$(printf '${octal}')"`) as { jobId: string }[];
    assert.deepEqual(hits.map((h) => h.jobId).sort(), [...jobs].sort(), bytes.toString('latin1'));
    const byHex = cliJson(`find --catalog ${CATALOG} --path-hex ${bytes.toString('hex')}`) as { jobId: string }[];
    assert.deepEqual(byHex.map((h) => h.jobId).sort(), [...jobs].sort());
  }
});

test('real Bacula 9.6.7 catalog: the backup check counts the backup that ended with warnings (T, JobErrors 1) as WARNING', async () => {
  // Within 10 minutes before 03:10 CET: the warnings backup (job 4), the failed and the canceled one.
  const r = await checkCatalog(dbs.catalogPool, {
    catalog: CATALOG,
    clients: ['fixture-fd'],
    maxAgeSeconds: 600,
    now: '2027-10-31T02:10:00Z',
  });
  assert.equal(r.code, 1, r.line);
  assert.match(r.line, /^CATALOG WARNING - 1 of 1 clients with only warning backups .*: fixture-fd /);
});

test('real Bacula 9.6.7 catalog without "timezone" (database in UTC, director in Europe/Berlin): the plan fails naming both offsets', async () => {
  await assert.rejects(
    runActivity(acts.planRebuild, {
      catalog: 'nozone',
      source: 'bacula-nozone',
      files: true,
      workflowId: 'catalog-rebuild/nozone',
      firstRunId: 'r1',
    }),
    (e: Error) => {
      assert.match(
        e.message,
        /^source bacula-nozone: naive times are UTC\+01:00\/UTC\+02:00 against JobTDate \(e\.g\. job 1\), not UTC, the source database's TimeZone \(6 of 6 sampled backups\); set "timezone" to the director's zone, e\.g\. "Europe\//,
      );
      return true;
    },
  );
  const v = await dbs.catalogPool.query(`SELECT 1 FROM version WHERE catalog_name = 'nozone'`);
  assert.equal(v.rowCount, 0, 'nothing was planned');
});

test("real Bacula 9.6.7 catalog: the director's purge is published and reported; records lost with PurgedFiles = 0 are refused per job", async () => {
  vB = await rebuild('bacula-purged', 'rb');
  await publish(vB);
  const ev = await dbs.catalogPool.query<{ message: string }>(
    `SELECT message FROM event WHERE version_id = $1 AND kind = 'published'`,
    [vB],
  );
  const purged = facts.jobs_before_purge[String(facts.purged_jobid)].file_rows;
  assert.equal(purged, 191);
  assert.equal(
    ev.rows[0].message,
    `version ${vB} published, replacing version ${vA}; files of 1 job pruned by the director since version ${vA}: 191 records`,
  );
  const job1 = await dbs.catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM active_files WHERE catalog_name = $1 AND job_id = '1'`,
    [CATALOG],
  );
  assert.equal(job1.rows[0].n, 0);

  const lost = await rebuild('bacula-lost', 'rl');
  await assert.rejects(
    publish(lost),
    /shrink guard: 1 job lost 13 file records against the active version \d+ although the director did not purge them \(PurgedFiles = 0\): job 3 \(150 → 137\)/,
  );
  await publish(lost, true);
});
