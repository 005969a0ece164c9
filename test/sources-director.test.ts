/**
 * Real director catalogs: the full Bareos and Bacula PostgreSQL schemas (test/fixtures/*-full-schema.sql)
 * holding the records that break naive readers — job id gaps, client/pool/fileset ids 0 or
 * dangling, a blank level, jobs that never started, 64-bit counters beyond 2^53, unicode job
 * names, a status code the product does not know, a job spread over two volumes (jobmedia), and
 * Bacula's Status table without 'W' — plus a source in Europe/Berlin whose naive start times fall
 * into the spring-forward gap and the autumn overlap.
 *
 * One private Temporal dev server, one catalog database, one worker configuration with three
 * sources; two real worker processes (TZ=Asia/Kolkata and TZ=America/New_York) and the CLI in a
 * zone other than UTC: Node's own zone must never matter.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Pool } from 'pg';
import { createPool } from '../lib/db';
import { createDatabase, dropDatabase } from '../dev/env/postgres';
import { projectRoot } from '../lib/paths';
import { compareCatalogToSource } from '../dev/verify';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import { privateTemporal, runCliAsync, spawnWorker, testDatabases, testEnv, uniqueQueue } from '../dev/harness/harness';
import { withDeadline } from '../dev/harness/wait';
import { checkNaiveTimes, zonesThatFit } from '../lib/sources/bareos-zone';

const fixture = (name: string): string => fs.readFileSync(path.join(projectRoot(), 'test', 'fixtures', name), 'utf8');

/** The unicode job resource name of job 1 and its unique job name. */
const UNICODE_NAME = 'Sauvegarde_été_日本';
const UNICODE_JOB = `${UNICODE_NAME}.2024-05-01_10.00.00_07`;
/** A comment with the characters that break text COPY and naive CSV: tab, backslash, newline, pipe. */
const COMMENT = 'Voll – «été» | 日本\ttab \\ backslash\nsecond line';

/** Clients, pools, filesets and jobs common to the Bareos and the Bacula catalog (columns both products have). */
const EDGE_DATA = `
INSERT INTO client (clientid, name, uname, autoprune, fileretention, jobretention) VALUES
  (1, 'alpha-fd', '23.0.3 (28Mar24) Debian GNU/Linux 12 (bookworm)', 1, 5184000, 15552000),
  (2, 'bêta_日本-fd', '23.0.3 (28Mar24) Microsoft Windows Server 2022', 1, 5184000, 15552000);
SELECT setval('client_clientid_seq', 2);
INSERT INTO pool (poolid, name, pooltype, labelformat, volretention, maxvolbytes) VALUES
  (1, 'Full', 'Backup', 'Full-', 31536000, 53687091200),
  (2, 'Incremental', 'Backup', 'Incremental-', 2592000, 53687091200),
  (3, 'Full', 'Copy', 'Copy-', 31536000, 53687091200);
SELECT setval('pool_poolid_seq', 3);
-- Two configuration versions of one fileset: the name repeats.
INSERT INTO fileset (filesetid, fileset, md5, createtime) VALUES
  (1, 'LinuxAll', 'yJ+7eHnDBvl5PZfXIWRIbB', '2024-01-10 09:00:00'),
  (2, 'LinuxAll', 'e1/9sBvYhEhR8hbWfBp5NA', '2024-04-20 14:30:00');
SELECT setval('fileset_filesetid_seq', 2);
INSERT INTO job (jobid, job, name, type, level, clientid, jobstatus, schedtime, starttime, endtime, realendtime,
                 jobtdate, volsessionid, volsessiontime, jobfiles, jobbytes, readbytes, joberrors, jobmissingfiles,
                 poolid, filesetid, priorjobid, purgedfiles, hasbase, hascache, reviewed, comment) VALUES
  -- 64-bit counters: jobbytes = 2^53 + 1 (not a JS number), readbytes = max bigint (above jobbytes).
  (1, '${UNICODE_JOB}', '${UNICODE_NAME}', 'B', 'F', 1, 'T',
   '2024-05-01 10:00:00', '2024-05-01 10:00:02', '2024-05-01 11:15:40', '2024-05-01 11:15:40',
   1714558540, 7, 1714500000, 123456, 9007199254740993, 9223372036854775807, 0, 0, 1, 1, 0, 0, 0, 0, 0,
   E'Voll – «été» | 日本\\ttab \\\\ backslash\\nsecond line'),
  -- A restore: level is a single space; client 0, pool 0, fileset 0.
  (2, 'RestoreFiles.2024-05-02_03.00.00_11', 'RestoreFiles', 'R', ' ', 0, 'T',
   '2024-05-02 03:00:00', '2024-05-02 03:00:01', '2024-05-02 03:05:00', '2024-05-02 03:05:00',
   1714619100, 8, 1714500000, 42, 1048576, 1048576, 0, 0, 0, 0, 0, 0, 0, 0, 0, NULL),
  -- Terminated with warnings; its client was pruned (dangling id); written to two volumes (jobmedia).
  (5, 'backup-beta.2024-05-03_21.00.00_15', 'backup-beta', 'B', 'I', 999, 'W',
   '2024-05-03 21:00:00', '2024-05-03 21:00:03', '2024-05-03 21:04:00', '2024-05-03 21:04:00',
   1714770240, 9, 1714500000, 12, 53688139776, 0, 0, 1, 2, 2, 0, 0, 0, 0, 0, 'client pruned from the catalog'),
  -- Canceled before it started: no start, end or real end time; pool and fileset dangling.
  (9, 'backup-alpha.2024-05-04_21.00.00_20', 'backup-alpha', 'B', 'D', 1, 'A',
   '2024-05-04 21:00:00', NULL, NULL, NULL,
   0, 0, 0, 0, 0, 0, 0, 0, 77, 88, 0, 0, 0, 0, 0, NULL),
  -- Running, not started yet as far as the catalog knows: NULL times.
  (12, 'backup-alpha.2024-05-04_23.59.59_21', 'backup-alpha', 'B', 'I', 1, 'R',
   '2024-05-04 23:59:59', NULL, NULL, NULL,
   0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, NULL),
  (13, 'VerifyVolume.2024-05-05_00.00.00_22', 'VerifyVolume', 'V', 'O', 1, 'D',
   '2024-05-05 00:00:00', '2024-05-05 00:00:00', '2024-05-05 00:10:00', '2024-05-05 00:10:00',
   1714867800, 0, 0, 123456, 0, 9007199254740993, 0, 0, 1, 1, 0, 0, 0, 0, 0, NULL),
  -- A copy of job 1 (priorjobid set), in a pool whose name repeats.
  (40, '${UNICODE_NAME}.2024-05-05_02.00.00_31', '${UNICODE_NAME}', 'C', 'F', 1, 'T',
   '2024-05-05 02:00:00', '2024-05-01 10:00:02', '2024-05-01 11:15:40', '2024-05-05 02:40:00',
   1714876800, 11, 1714500000, 123456, 9007199254740993, 9007199254740993, 0, 0, 3, 1, 1, 0, 0, 0, 0, 'copy of job 1'),
  -- A status code from a newer director that the product does not know.
  (1000, 'backup-alpha.2024-05-06_21.00.00_40', 'backup-alpha', 'B', 'f', 1, 'X',
   '2024-05-06 21:00:00', '2024-05-06 21:00:01', '2024-05-06 22:00:00', '2024-05-06 22:00:00',
   1715032800, 12, 1714500000, 99, 1024, 2048, 0, 0, 1, 2, 0, 0, 0, 0, 0, 'status code unknown to the product'),
  (1001, 'backup-beta.2024-05-06_21.00.00_41', 'backup-beta', 'B', 'I', 2, 'f',
   '2024-05-06 21:00:00', '2024-05-06 21:00:02', '2024-05-06 21:00:09', '2024-05-06 21:00:09',
   1715029209, 13, 1714500000, 0, 0, 0, 3, 0, 2, 1, 0, 0, 0, 0, 0, NULL),
  (1002, 'backup-beta.2024-05-07_21.00.00_42', 'backup-beta', 'B', 'I', 2, 'e',
   '2024-05-07 21:00:00', '2024-05-07 21:00:02', '2024-05-07 21:03:00', '2024-05-07 21:03:00',
   1715115780, 14, 1714500000, 17, 700000, 900000, 1, 2, 2, 2, 0, 0, 0, 0, 0, NULL);
SELECT setval('job_jobid_seq', 1002);
`;

const EDGE_IDS = ['1', '2', '5', '9', '12', '13', '40', '1000', '1001', '1002'];

/**
 * Europe/Berlin wall-clock start times: an ordinary summer night just after midnight, the
 * spring-forward gap (02:30 on 2024-03-31 does not exist), the autumn overlap (02:30 on
 * 2024-10-27 happens twice), ordinary days, and a job that never started. No other timestamp of
 * these jobs is in a gap or overlap.
 */
const BERLIN_DATA = `
INSERT INTO client (clientid, name, uname) VALUES (1, 'berlin-fd', '23.0.3 (28Mar24) Debian GNU/Linux 12 (bookworm)');
INSERT INTO pool (poolid, name, pooltype, labelformat) VALUES (1, 'Full', 'Backup', 'Full-');
INSERT INTO fileset (filesetid, fileset, md5, createtime) VALUES (1, 'LinuxAll', 'yJ+7eHnDBvl5PZfXIWRIbB', '2024-01-10 09:00:00');
INSERT INTO job (jobid, job, name, type, level, clientid, jobstatus, schedtime, starttime, endtime, realendtime,
                 jobtdate, jobfiles, jobbytes, readbytes, poolid, filesetid) VALUES
  (1, 'berlin.2024-01-15_12.00.00_01', 'berlin', 'B', 'F', 1, 'T',
   '2024-01-15 11:55:00', '2024-01-15 12:00:00', '2024-01-15 12:40:00', '2024-01-15 12:40:00', 1705318800, 10, 1000, 1000, 1, 1),
  (2, 'berlin.2024-03-31_02.30.00_02', 'berlin', 'B', 'I', 1, 'T',
   '2024-03-31 01:55:00', '2024-03-31 02:30:00', '2024-03-31 03:45:00', '2024-03-31 03:45:00', 1711849500, 11, 1100, 1100, 1, 1),
  (5, 'berlin.2024-10-27_02.30.00_05', 'berlin', 'B', 'I', 1, 'T',
   '2024-10-27 01:55:00', '2024-10-27 02:30:00', '2024-10-27 03:20:00', '2024-10-27 03:20:00', 1729995600, 12, 1200, 1200, 1, 1),
  (7, 'berlin.2024-07-01_00.30.00_07', 'berlin', 'B', 'I', 1, 'T',
   '2024-06-30 23:55:00', '2024-07-01 00:30:00', '2024-07-01 01:10:00', '2024-07-01 01:10:00', 1719789000, 13, 1300, 1300, 1, 1),
  (8, 'berlin.2024-08-15_23.59.59_08', 'berlin', 'B', 'I', 1, 'W',
   '2024-08-15 23:50:00', '2024-08-15 23:59:59', '2024-08-16 00:20:00', '2024-08-16 00:20:00', 1723760400, 14, 1400, 1400, 1, 1),
  (11, 'berlin.2024-12-31_23.30.00_11', 'berlin', 'B', 'D', 1, 'T',
   '2024-12-31 23:25:00', '2024-12-31 23:30:00', '2025-01-01 00:15:00', '2025-01-01 00:15:00', 1735686900, 15, 1500, 1500, 1, 1),
  (12, 'berlin.2025-01-02_21.00.00_12', 'berlin', 'B', 'I', 1, 'C',
   '2025-01-02 21:00:00', NULL, NULL, NULL, 0, 0, 0, 0, 1, 1);
SELECT setval('job_jobid_seq', 12);
`;

/** Expected UTC instant and source-local bucket of each Berlin job's start (PostgreSQL's rule). */
const BERLIN_EXPECTED: Record<string, { start: string | null; bucket: string | null }> = {
  '1': { start: '2024-01-15T11:00:00Z', bucket: '2024-01-15' },
  // Does not exist: read with the offset in force before the change (CET, +01:00).
  '2': { start: '2024-03-31T01:30:00Z', bucket: '2024-03-31' },
  // Happens twice: read as standard time (CET, +01:00), the later of the two instants.
  '5': { start: '2024-10-27T01:30:00Z', bucket: '2024-10-27' },
  '7': { start: '2024-06-30T22:30:00Z', bucket: '2024-07-01' },
  '8': { start: '2024-08-15T21:59:59Z', bucket: '2024-08-15' },
  '11': { start: '2024-12-31T22:30:00Z', bucket: '2024-12-31' },
  '12': { start: null, bucket: null },
};

/** Codes the README documents; none of them may be reported as unknown. */
const KNOWN_STATUS = 'TWEefDAICRBFSmMsjcdtplLqauwi'.split('');

interface SourceDb {
  name: string;
  url: string;
  pool: Pool;
  /** The source database's TimeZone setting (the product's default zone for the source). */
  dbTimezone: string;
}

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
let dbs: TestDatabases;
let configDir: string;
let env: NodeJS.ProcessEnv;
const workers: WorkerProcess[] = [];
const extraDbs: SourceDb[] = [];
let bareos: SourceDb;
let bacula: SourceDb;
let berlin: SourceDb;

/** Sets the database's default TimeZone, then loads the fixture schema and the data. */
async function loadSource(
  adminUrl: string,
  dbName: string,
  url: string,
  o: { schema: string; data: string; timezone: string; directorZone?: string },
): Promise<void> {
  const admin = createPool(adminUrl, { applicationName: 'catalog-rebuild:test', max: 1 });
  try {
    await admin.query(`ALTER DATABASE "${dbName}" SET timezone = '${o.timezone}'`);
  } finally {
    await admin.end();
  }
  const load = createPool(url, { applicationName: 'catalog-rebuild:test', max: 1 });
  try {
    await load.query(fixture(o.schema));
    await load.query(o.data);
    // The director (in the database's zone unless told) wrote JobTDate as the epoch of a backup's
    // local end time: the plan cross-checks the two.
    await load.query(
      `UPDATE job SET jobtdate = extract(epoch FROM endtime AT TIME ZONE $1)::bigint
       WHERE type = 'B' AND jobtdate > 0 AND endtime IS NOT NULL`,
      [o.directorZone ?? o.timezone],
    );
  } finally {
    await load.end();
  }
}

function dbNameOf(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}

/** Runs the CLI without blocking the event loop (worker output pipes keep draining), with a deadline. */
function cli(
  args: string[],
  extra: Record<string, string> = {},
  timeoutMs = 240_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return withDeadline(
    runCliAsync(args, { ...env, ...extra }),
    timeoutMs,
    () => `catalog-rebuild ${args.join(' ')} did not finish within ${timeoutMs} ms`,
  );
}

async function activeVersion(catalog: string): Promise<string> {
  const r = await dbs.catalogPool.query<{ v: string }>(
    `SELECT version_id::text AS v FROM active WHERE catalog_name = $1`,
    [catalog],
  );
  assert.equal(r.rowCount, 1, `catalog ${catalog} has an active version`);
  return r.rows[0].v;
}

/** The latest reconciliation report of the catalog's active version. */
async function latestReport(catalog: string): Promise<Record<string, unknown>> {
  const v = await activeVersion(catalog);
  const r = await dbs.catalogPool.query<{ report: Record<string, unknown> }>(
    `SELECT report FROM reconciliation WHERE version_id = $1 ORDER BY round DESC LIMIT 1`,
    [v],
  );
  assert.equal(r.rowCount, 1, `version ${v} has a reconciliation report`);
  return r.rows[0].report;
}

interface ActiveRow {
  job_id: string;
  job: string | null;
  job_name: string | null;
  client: string | null;
  type: string | null;
  level: string | null;
  status: string | null;
  start_utc: string | null;
  end_utc: string | null;
  bucket: string | null;
  bytes: string | null;
  read_bytes: string | null;
  pool: string | null;
  fileset: string | null;
  prior_job_id: string | null;
  comment: string | null;
}

async function activeRows(catalog: string): Promise<Map<string, ActiveRow>> {
  const { rows } = await dbs.catalogPool.query<ActiveRow>(
    `SELECT job_id, job, job_name, client, type, level, status,
            to_char(start_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS start_utc,
            to_char(end_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS end_utc,
            bucket::text AS bucket, bytes::text AS bytes, read_bytes::text AS read_bytes,
            pool, fileset, prior_job_id, comment
     FROM active_jobs WHERE catalog_name = $1 ORDER BY job_id::bigint`,
    [catalog],
  );
  return new Map(rows.map((r) => [r.job_id, r]));
}

/** Per-bucket counts: catalog (active_jobs) and source (`starttime::date`), NULL bucket as 'none'. */
async function bucketCounts(
  catalog: string,
  source: SourceDb,
): Promise<{ catalog: Record<string, string>; source: Record<string, string> }> {
  const cat = await dbs.catalogPool.query<{ b: string | null; n: string }>(
    `SELECT bucket::text AS b, count(*)::text AS n FROM active_jobs WHERE catalog_name = $1 GROUP BY 1`,
    [catalog],
  );
  const src = await source.pool.query<{ b: string | null; n: string }>(
    `SELECT starttime::date::text AS b, count(*)::text AS n FROM job GROUP BY 1`,
  );
  const asObj = (rows: { b: string | null; n: string }[]) =>
    Object.fromEntries(rows.map((x) => [x.b ?? 'none', x.n]).sort());
  return { catalog: asObj(cat.rows), source: asObj(src.rows) };
}

before(async () => {
  temporal = await privateTemporal();
  dbs = await testDatabases('srcdir');
  const base = `crt_srcdir_${randomBytes(3).toString('hex')}`;

  bareos = { name: 'bareos-edge', url: dbs.sourceUrl, pool: dbs.sourcePool, dbTimezone: 'Asia/Tokyo' };
  await loadSource(dbs.adminUrl, dbNameOf(dbs.sourceUrl), dbs.sourceUrl, {
    schema: 'bareos-full-schema.sql',
    data: EDGE_DATA,
    timezone: bareos.dbTimezone,
  });

  const baculaUrl = await createDatabase(dbs.adminUrl, `${base}_bacula`);
  bacula = {
    name: 'bacula-edge',
    url: baculaUrl,
    pool: createPool(baculaUrl, { applicationName: 'catalog-rebuild:test', max: 2 }),
    dbTimezone: 'America/Sao_Paulo',
  };
  extraDbs.push(bacula);
  await loadSource(dbs.adminUrl, `${base}_bacula`, baculaUrl, {
    schema: 'bacula-full-schema.sql',
    // Bacula's own columns: the copy names its prior job; FileTable keeps its default.
    data: `${EDGE_DATA}\nUPDATE job SET priorjob = '${UNICODE_JOB}' WHERE jobid = 40;`,
    timezone: bacula.dbTimezone,
  });

  const berlinUrl = await createDatabase(dbs.adminUrl, `${base}_berlin`);
  // The database's own TimeZone is another zone: the configured `timezone` must win.
  berlin = {
    name: 'berlin',
    url: berlinUrl,
    pool: createPool(berlinUrl, { applicationName: 'catalog-rebuild:test', max: 2 }),
    dbTimezone: 'America/Los_Angeles',
  };
  extraDbs.push(berlin);
  await loadSource(dbs.adminUrl, `${base}_berlin`, berlinUrl, {
    schema: 'bareos-full-schema.sql',
    data: BERLIN_DATA,
    timezone: berlin.dbTimezone,
    directorZone: 'Europe/Berlin',
  });

  configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-config-'));
  const configFile = path.join(configDir, 'config.json');
  fs.writeFileSync(
    configFile,
    JSON.stringify(
      {
        catalogDatabaseUrl: dbs.catalogUrl,
        sources: {
          [bareos.name]: { kind: 'bareos', databaseUrl: bareos.url },
          [bacula.name]: { kind: 'bacula', databaseUrl: bacula.url },
          [berlin.name]: { kind: 'bareos', databaseUrl: berlin.url, timezone: 'Europe/Berlin' },
          // The same director without "timezone": its database's TimeZone (America/Los_Angeles) is not the director's.
          'berlin-unset': { kind: 'bareos', databaseUrl: berlin.url },
        },
      },
      null,
      2,
    ),
  );
  env = testEnv({ address: temporal.address, configFile, taskQueue: uniqueQueue('srcdir') });
  // Two workers on one queue in two zones far from UTC (and from each other and the sources).
  workers.push(await spawnWorker({ ...env, TZ: 'Asia/Kolkata' }));
  workers.push(await spawnWorker({ ...env, TZ: 'America/New_York' }));
});

after(async () => {
  for (const w of workers) w.kill();
  await temporal?.stop();
  if (temporal?.dir) fs.rmSync(temporal.dir, { recursive: true, force: true });
  for (const s of extraDbs) await s.pool.end().catch(() => undefined);
  await dbs?.drop();
  for (const s of extraDbs) await dropDatabase(dbs.adminUrl, dbNameOf(s.url)).catch(() => undefined);
  if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
});

test('Bareos full schema: gaps, ids 0 and dangling, blank level, NULL times, 64-bit counters, unicode, unknown status are copied field by field', async () => {
  const r = await cli(['start', '--catalog', 'bareos-edge', '--source', bareos.name, '--page-size', '3', '--wait'], {
    TZ: 'Asia/Kolkata',
  });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /published/);

  const cmp = await compareCatalogToSource(dbs.catalogPool, bareos.pool, 'bareos-edge', bareos.dbTimezone);
  assert.equal(cmp.sourceRows, EDGE_IDS.length);
  assert.equal(
    cmp.catalogRows,
    cmp.sourceRows,
    'one catalog row per source job (no jobmedia fan-out, nothing dropped)',
  );
  assert.equal(cmp.catalog, cmp.source, 'every field of every job equals the source, as text');
  assert.ok(cmp.equal);

  const rows = await activeRows('bareos-edge');
  assert.deepEqual([...rows.keys()], EDGE_IDS, 'every job id, gaps kept');
  const j = (id: string): ActiveRow => rows.get(id)!;

  // 64-bit counters, exactly.
  assert.equal(j('1').bytes, '9007199254740993');
  assert.equal(j('1').read_bytes, '9223372036854775807');
  assert.equal(j('13').read_bytes, '9007199254740993');
  // Unicode and underscores in both names; a comment with tab, backslash, newline and pipe.
  assert.equal(j('1').job, UNICODE_JOB);
  assert.equal(j('1').job_name, UNICODE_NAME);
  assert.equal(j('1').comment, COMMENT);
  assert.equal(j('1').client, 'alpha-fd');
  assert.equal(j('1').pool, 'Full');
  assert.equal(j('1').fileset, 'LinuxAll');
  // Start times in the source database's zone (Asia/Tokyo, +09:00), whatever the worker's TZ.
  assert.equal(j('1').start_utc, '2024-05-01T01:00:02Z');
  assert.equal(j('1').bucket, '2024-05-01');

  // clientid 0 and a dangling clientid: the job stays, client NULL.
  assert.equal(j('2').client, null);
  assert.equal(j('5').client, null);
  assert.equal(j('5').status, 'W');
  // pool/fileset 0 and dangling: NULL.
  assert.equal(j('2').pool, null);
  assert.equal(j('2').fileset, null);
  assert.equal(j('9').pool, null);
  assert.equal(j('9').fileset, null);
  // The restore's blank level is NULL; its type is kept.
  assert.equal(j('2').level, null);
  assert.equal(j('2').type, 'R');
  // Canceled before starting, and running without times: present, NULL times, NULL bucket.
  assert.equal(j('9').status, 'A');
  assert.equal(j('9').start_utc, null);
  assert.equal(j('9').bucket, null);
  assert.equal(j('12').status, 'R');
  assert.equal(j('12').start_utc, null);
  assert.equal(j('12').end_utc, null);
  assert.equal(j('12').bucket, null);
  // The copy names its prior job; a job with priorjobid 0 has none.
  assert.equal(j('40').prior_job_id, '1');
  assert.equal(j('40').type, 'C');
  assert.equal(j('1').prior_job_id, null);
  // The unknown status code is kept as the source wrote it.
  assert.equal(j('1000').status, 'X');
  assert.equal(j('1000').level, 'f');

  const buckets = await bucketCounts('bareos-edge', bareos);
  assert.deepEqual(buckets.catalog, buckets.source);
});

test('Bareos: the reconciliation report names the unknown status code X (1 job) and no documented code', async () => {
  const report = await latestReport('bareos-edge');
  const codes = report.unknownCodes as { field: string; code: string; jobs: number }[] | undefined;
  assert.ok(Array.isArray(codes), `report.unknownCodes is a list; report keys: ${Object.keys(report).join(', ')}`);
  assert.ok(
    codes.some((c) => c.field === 'status' && c.code === 'X' && c.jobs === 1),
    `unknownCodes contains {field: 'status', code: 'X', jobs: 1}: ${JSON.stringify(codes)}`,
  );
  const wrong = codes.filter((c) => c.field === 'status' && KNOWN_STATUS.includes(c.code));
  assert.deepEqual(wrong, [], 'documented status codes are not reported as unknown');
});

test('Bacula full schema (Status table without W): no job dropped, every field equals the source', async () => {
  // The trap is real: an inner join to Status loses the W job (and the unknown X).
  const trap = await bacula.pool.query<{ all: number; joined: number }>(
    `SELECT (SELECT count(*)::int FROM job) AS all, (SELECT count(*)::int FROM job JOIN status USING (jobstatus)) AS joined`,
  );
  assert.deepEqual(trap.rows[0], { all: EDGE_IDS.length, joined: EDGE_IDS.length - 2 });

  const r = await cli(['start', '--catalog', 'bacula-edge', '--source', bacula.name, '--page-size', '3', '--wait'], {
    TZ: 'America/New_York',
  });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /published/);

  const cmp = await compareCatalogToSource(dbs.catalogPool, bacula.pool, 'bacula-edge', bacula.dbTimezone);
  assert.equal(cmp.sourceRows, EDGE_IDS.length);
  assert.equal(cmp.catalogRows, cmp.sourceRows, 'no job dropped');
  assert.equal(cmp.catalog, cmp.source, 'every field of every job equals the source, as text');

  const rows = await activeRows('bacula-edge');
  assert.deepEqual([...rows.keys()], EDGE_IDS);
  assert.equal(rows.get('5')?.status, 'W', "the 'W' job is present");
  assert.equal(rows.get('1000')?.status, 'X');
  assert.equal(rows.get('1')?.bytes, '9007199254740993');
  assert.equal(rows.get('1')?.read_bytes, '9223372036854775807');
  // Source database zone America/Sao_Paulo (-03:00).
  assert.equal(rows.get('1')?.start_utc, '2024-05-01T13:00:02Z');
});

test('Europe/Berlin source: nonexistent and ambiguous wall-clock times follow PostgreSQL’s rule; buckets are source-local days', async () => {
  const r = await cli(['start', '--catalog', 'berlin-dst', '--source', berlin.name, '--page-size', '3', '--wait'], {
    TZ: 'America/New_York',
  });
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /published/);

  const v = await activeVersion('berlin-dst');
  const tz = await dbs.catalogPool.query<{ tz: string }>(
    `SELECT source_timezone AS tz FROM version WHERE version_id = $1`,
    [v],
  );
  assert.equal(tz.rows[0].tz, 'Europe/Berlin', 'the configured zone, not the source database’s TimeZone');

  const rows = await activeRows('berlin-dst');
  const got = Object.fromEntries([...rows.values()].map((x) => [x.job_id, { start: x.start_utc, bucket: x.bucket }]));
  assert.deepEqual(got, BERLIN_EXPECTED);

  const buckets = await bucketCounts('berlin-dst', berlin);
  assert.deepEqual(buckets.catalog, buckets.source, 'per-bucket counts equal the source’s starttime::date counts');

  const cmp = await compareCatalogToSource(dbs.catalogPool, berlin.pool, 'berlin-dst', 'Europe/Berlin');
  assert.equal(cmp.catalogRows, cmp.sourceRows);
  assert.equal(cmp.catalog, cmp.source, 'every field of every job equals the source, as text');
});

test('Europe/Berlin source: the reconciliation report counts one nonexistent and one ambiguous time and states the rule', async () => {
  const report = await latestReport('berlin-dst');
  const dst = report.dst as { zone?: unknown; nonexistent?: unknown; ambiguous?: unknown; rule?: unknown } | undefined;
  assert.ok(dst && typeof dst === 'object', `report.dst is an object; report keys: ${Object.keys(report).join(', ')}`);
  assert.equal(typeof dst.rule, 'string', 'dst.rule states the rule applied');
  const { rule: _rule, ...rest } = dst;
  assert.deepEqual(rest, { zone: 'Europe/Berlin', nonexistent: 1, ambiguous: 1 });
});

test('a director whose naive times contradict JobTDate in the zone in use fails at plan, naming the offsets and zones that fit; with "timezone" it is exact', async () => {
  // Unit: the cross-check on the Berlin director's rows (winter and summer: two offsets).
  const berlinCheck = await checkNaiveTimes(berlin.pool, 'berlin', 'Europe/Berlin', '12', true);
  assert.deepEqual([berlinCheck.sampled, berlinCheck.fit], [6, 6]);
  await assert.rejects(checkNaiveTimes(berlin.pool, 'berlin-unset', 'UTC', '12', false), (e: Error) => {
    assert.match(
      e.message,
      /^source berlin-unset: naive times are UTC\+01:00\/UTC\+02:00 against JobTDate \(e\.g\. job 1\), not UTC, the source database's TimeZone \(6 of 6 sampled backups\); set "timezone" to the director's zone, e\.g\. "Europe\/[A-Z]/,
    );
    return true;
  });

  // A director that writes UTC, read in another zone: UTC is the zone named first.
  const utcSample = ['2024-01-15 10:00:00', '2024-07-15 22:30:00'].map((t, i) => {
    const epoch = Date.parse(`${t.replace(' ', 'T')}Z`) / 1000;
    return {
      jobId: String(i + 1),
      jobTDate: epoch,
      end: epoch,
      start: epoch,
      endAsUtc: epoch,
      startAsUtc: epoch,
      endText: t,
      startText: t,
    };
  });
  assert.equal((await zonesThatFit(berlin.pool, utcSample)).zones[0], 'UTC');

  // Through the product: the plan fails before any page, and says so.
  const catalog = 'berlin-unset';
  const r = await cli(['start', '--catalog', catalog, '--source', 'berlin-unset', '--wait']);
  assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
  assert.match(`${r.stdout}\n${r.stderr}`, /naive times are UTC\+01:00\/UTC\+02:00 against JobTDate/);
  assert.match(`${r.stdout}\n${r.stderr}`, /not America\/Los_Angeles, the source database's TimeZone/);
  const pages = await dbs.catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM page p JOIN version v USING (version_id) WHERE v.catalog_name = $1`,
    [catalog],
  );
  assert.equal(pages.rows[0].n, 0, 'no page was written');
  const active = await dbs.catalogPool.query(`SELECT 1 FROM active WHERE catalog_name = $1`, [catalog]);
  assert.equal(active.rowCount, 0, 'nothing published');
});
