/**
 * The catalog side of file records on real PostgreSQL (a private database with the migrations
 * applied; no Temporal, no source):
 * - LStat decoded by the catalog's SQL functions equals what dev/lstat.ts encoded (sizes above 2^53,
 *   uid 2^32 − 2, negative fields, mtimes before 1970 and 0), and LStats that do not decode give
 *   their reason;
 * - a staged page with good and bad records: good ones decoded into `file_v<id>`, bad ones (a
 *   dangling PathId, a bad LStat) quarantined with their FileId, raw text holding the name and the
 *   fingerprint input of lib/fingerprint.ts; job rejects beside file rejects of the same job; a
 *   replay after `deleteJobFiles`;
 * - per-bucket and per-job counts and digests equal a digest computed in Node;
 * - `find` (exact and prefix, through the find index) and `files` over a published version.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Readable } from 'node:stream';
import type { Pool } from 'pg';
import {
  bucketCountWithRejects,
  copyFilesIntoStage,
  countFileRejects,
  countRejects,
  createFileIndexes,
  createFilePartition,
  createVersionPartition,
  deleteJobFiles,
  detachAndDropFilePartition,
  ensureFileStage,
  fileBucketStats,
  fileCountsByBucket,
  fileJobStats,
  filePartitionName,
  findFiles,
  findFilesByBytes,
  insertStagedFiles,
  listJobFiles,
  rejectSample,
  writeRejects,
} from '../lib/catalog';
import type { Queryable } from '../lib/db';
import { createPool, migrate, migrationsDir } from '../lib/db';
import { bucketDigest } from '../lib/fingerprint';
import { copyValue } from '../lib/text-form';
import { baculaBase64, encodeLStat } from '../dev/lstat';
import { createDatabase, dropDatabase, resolveAdminUrl } from '../dev/env/postgres';
import { projectRoot } from '../lib/paths';

const CATALOG = 'files-test';
const TWO_53_PLUS_1 = 2n ** 53n + 1n;

let adminUrl: string;
let catalogUrl: string;
let dbName: string;
let pool: Pool;
let versionId: string;

before(async () => {
  adminUrl = await resolveAdminUrl();
  dbName = `crt_files_catalog_${randomBytes(3).toString('hex')}`;
  catalogUrl = await createDatabase(adminUrl, dbName);
  pool = createPool(catalogUrl, { applicationName: 'catalog-rebuild:test', max: 3 });
  await migrate(pool);
  const v = await pool.query<{ version_id: string }>(
    `INSERT INTO version (catalog_name, source_name, status, workflow_id, first_run_id, page_size, pages_total, source_rows, files)
     VALUES ($1, 'director', 'building', $2, 'run', 100, 2, 3, true) RETURNING version_id::text`,
    [CATALOG, `catalog-rebuild/${CATALOG}`],
  );
  versionId = v.rows[0].version_id;
});

after(async () => {
  await pool?.end().catch(() => undefined);
  if (dbName) await dropDatabase(adminUrl, dbName).catch(() => undefined);
});

/** One staged file record (the source's COPY columns). */
interface Staged {
  jobKey: string;
  jobId: string;
  bucket: string | null;
  fileId: string;
  pathId: string;
  path: string | null;
  name: string | null;
  /** Hex of the exact path bytes when the text is not them. */
  pathHex?: string;
  fileIndex: number;
  lstat: string;
  md5?: string;
  problem?: string;
}

const lstat = (size: number | bigint, o: { mode?: number; uid?: number; mtime?: number } = {}) =>
  encodeLStat({ mode: o.mode ?? 33188, uid: o.uid ?? 1000, gid: o.uid ?? 1000, size, mtime: o.mtime ?? 1714550400 });
const GOOD_LSTAT = lstat(1234);
const ZERO_LSTAT = Array(16).fill('A').join(' ');
const J1 = { jobKey: '101', jobId: '101', bucket: '2024-05-01' };
const J2 = { jobKey: '102', jobId: '102', bucket: '2024-05-02' };
const J3 = { jobKey: '103', jobId: '103', bucket: null };
const ODD_NAME = 'big\tfile\nwith\\odd "quotes" ü';

const RECORDS: Staged[] = [
  { ...J1, fileId: '1', pathId: '1', path: '/etc/', name: 'passwd', fileIndex: 1, lstat: GOOD_LSTAT, md5: 'q5Z' },
  {
    ...J1,
    fileId: '2',
    pathId: '2',
    path: '/data/',
    name: ODD_NAME,
    fileIndex: 2,
    lstat: encodeLStat({ mode: 33188, uid: 4294967294, gid: 4294967294, size: TWO_53_PLUS_1, mtime: -86400 }),
  },
  {
    ...J1,
    fileId: '3',
    pathId: '2',
    path: '/data/',
    name: '',
    fileIndex: 3,
    lstat: lstat(4096, { mode: 16877, mtime: 0 }),
  },
  { ...J1, fileId: '4', pathId: '2', path: '/data/', name: 'gone', fileIndex: 0, lstat: GOOD_LSTAT },
  { ...J1, fileId: '5', pathId: '3', path: 'café/', pathHex: '636166e92f', name: 'x', fileIndex: 5, lstat: GOOD_LSTAT },
  {
    ...J1,
    fileId: '6',
    pathId: '999',
    path: null,
    name: 'orphan.txt',
    fileIndex: 6,
    lstat: GOOD_LSTAT,
    problem: 'path: PathId 999 has no Path row',
  },
  {
    ...J1,
    fileId: '7',
    pathId: '1',
    path: '/etc/',
    name: 'bad-lstat',
    fileIndex: 7,
    lstat: 'A B C D E F G H I J K L M N O',
  },
  { ...J1, fileId: '8', pathId: '1', path: '/etc/', name: 'negative', fileIndex: 8, lstat: lstat(-5, { uid: -1 }) },
  { ...J2, fileId: '9', pathId: '4', path: '/home/u/', name: 'notes.txt', fileIndex: 1, lstat: GOOD_LSTAT },
  {
    ...J2,
    fileId: '10',
    pathId: '4',
    path: '/home/u/',
    name: 'weird',
    fileIndex: 2,
    lstat: GOOD_LSTAT.replace(/ /, ' *'),
  },
  { ...J2, fileId: '12', pathId: '1', path: '/etc/', name: 'passwd', fileIndex: 3, lstat: GOOD_LSTAT },
  // Bacula 9.6 in Accurate mode: a file deleted since the previous job, negative FileIndex, all-zero LStat.
  { ...J2, fileId: '13', pathId: '2', path: '/data/', name: 'was-here', fileIndex: -4, lstat: ZERO_LSTAT },
  { ...J3, fileId: '11', pathId: '5', path: '/srv/', name: 'a', fileIndex: 1, lstat: GOOD_LSTAT },
];
const BAD = new Set(['6', '7', '10']);

/** A record in the stage's COPY text form (column order of the contract). */
function copyLine(r: Staged): string {
  const bytes = r.pathHex ? `\\x${r.pathHex}` : null;
  return `${[
    r.jobKey,
    r.jobId,
    r.bucket,
    r.fileId,
    r.pathId,
    r.path,
    r.name,
    bytes,
    null,
    String(r.fileIndex),
    '0',
    r.lstat,
    r.md5 ?? null,
    r.problem ?? null,
  ]
    .map(copyValue)
    .join('\t')}\n`;
}

/** Node: the fingerprint input of a file record, written out independently of lib/fingerprint.ts's SQL. */
function fingerprintInput(r: Staged): string {
  const path = r.pathHex ? `\\x${r.pathHex}` : (r.path ?? '\\N');
  return [r.fileId, r.jobId, path, r.name ?? '\\N', r.fileIndex, 0, r.lstat, r.md5 ?? '\\N'].join('|');
}

/** Stages `records` and writes them as page `pageNo`, in one transaction. */
async function writePage(records: Staged[], pageNo: number) {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await ensureFileStage(c);
    const staged = await copyFilesIntoStage(c, Readable.from(records.map(copyLine)));
    assert.equal(staged, records.length);
    const result = await insertStagedFiles(c, versionId, pageNo);
    await c.query('COMMIT');
    return result;
  } catch (err) {
    await c.query('ROLLBACK');
    throw err;
  } finally {
    c.release();
  }
}

test('LStat fields decode in the catalog to the values dev/lstat.ts encoded; bad ones give their reason', async () => {
  const values = [
    0n,
    1n,
    63n,
    64n,
    33188n,
    4294967294n,
    TWO_53_PLUS_1,
    2n ** 63n - 1n,
    -1n,
    -86400n,
    -(2n ** 63n - 1n),
  ];
  const { rows } = await pool.query<{ v: string | null }>(
    `SELECT catalog_b64(t)::text AS v FROM unnest($1::text[]) WITH ORDINALITY u(t, i) ORDER BY i`,
    [values.map((v) => baculaBase64(v))],
  );
  assert.deepEqual(
    rows.map((r) => r.v),
    values.map(String),
  );
  const fields = async (l: string) =>
    (
      await pool.query<{ problem: string | null; size: string; mode: string; uid: string; mtime: string }>(
        `SELECT catalog_lstat_problem($1) AS problem, catalog_lstat_field($1, 8)::text AS size,
                catalog_lstat_field($1, 3)::text AS mode, catalog_lstat_field($1, 5)::text AS uid,
                to_char(to_timestamp(catalog_lstat_field($1, 12)) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') AS mtime`,
        [l],
      )
    ).rows[0];
  assert.deepEqual(
    await fields(encodeLStat({ mode: 33188, uid: 4294967294, gid: 0, size: TWO_53_PLUS_1, mtime: -86400 })),
    { problem: null, size: '9007199254740993', mode: '33188', uid: '4294967294', mtime: '1969-12-31T00:00:00' },
  );
  assert.deepEqual(await fields(encodeLStat({ mode: -3, uid: -1, gid: 0, size: -5, mtime: 0 })), {
    problem: null,
    size: '-5',
    mode: '-3',
    uid: '-1',
    mtime: '1970-01-01T00:00:00',
  });
  // Long but valid fields take the field-by-field path and still decode.
  const long = encodeLStat({
    mode: 2 ** 31 - 1,
    uid: 0,
    gid: 0,
    size: 2n ** 62n,
    mtime: 9_000_000_000_000,
    ino: 2n ** 62n,
  });
  assert.equal((await fields(long)).problem, null);
  assert.equal((await fields(long)).size, String(2n ** 62n));

  const good = GOOD_LSTAT.split(' ');
  const withField = (n: number, v: string) => good.map((f, i) => (i === n - 1 ? v : f)).join(' ');
  const bad: [string, string][] = [
    [good.slice(0, 15).join(' '), 'lstat: 15 fields'],
    ['', 'lstat: 0 fields'],
    [withField(8, 'AB*C'), 'lstat: field 8 is not base 64 (AB*C)'],
    [withField(2, '-'), 'lstat: field 2 is not base 64 (-)'],
    [withField(8, 'AAAAAAAAAAAB'), 'lstat: field 8 has more than 11 digits (AAAAAAAAAAAB)'],
    [withField(8, 'I//////////'), 'lstat: field 8 overflows int64 (I//////////)'],
    [withField(3, baculaBase64(2 ** 31)), 'lstat: st_mode 2147483648 does not fit an integer'],
    [withField(12, baculaBase64(10n ** 13n)), 'lstat: st_mtime 10000000000000 is out of range'],
  ];
  const { rows: problems } = await pool.query<{ p: string | null }>(
    `SELECT catalog_lstat_problem(l) AS p FROM unnest($1::text[]) WITH ORDINALITY u(l, i) ORDER BY i`,
    [bad.map(([l]) => l)],
  );
  assert.deepEqual(
    problems.map((r) => r.p),
    bad.map(([, reason]) => reason),
  );
  assert.equal((await pool.query(`SELECT catalog_b64('I//////////') AS v`)).rows[0].v, null);
});

test('a staged page: good records decoded into file_v<id>, bad ones quarantined alone with their FileId', async () => {
  assert.equal(await createFilePartition(pool, versionId), filePartitionName(versionId));
  assert.equal(await createFilePartition(pool, versionId), `file_v${versionId}`); // idempotent
  const result = await writePage(RECORDS, 1);
  assert.equal(result.rows, RECORDS.length - BAD.size);
  assert.equal(result.rejects, BAD.size);
  assert.deepEqual(result.firstRejects, [
    { jobId: '101', fileId: '6', reason: 'path: PathId 999 has no Path row' },
    { jobId: '101', fileId: '7', reason: 'lstat: 15 fields' },
    { jobId: '102', fileId: '10', reason: `lstat: field 2 is not base 64 (*${GOOD_LSTAT.split(' ')[1]})` },
  ]);
  const { rows } = await pool.query(
    `SELECT file_id::text, job_key::text, path, name, encode(path_bytes, 'hex') AS path_hex, deleted, size::text,
            mode, uid::text, gid::text, to_char(mtime AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') AS mtime, md5, lstat
     FROM ${filePartitionName(versionId)} t ORDER BY t.file_id`,
  );
  assert.deepEqual(
    rows.map((r) => r.file_id),
    ['1', '2', '3', '4', '5', '8', '9', '11', '12', '13'],
  );
  const byId = new Map(rows.map((r) => [r.file_id, r]));
  assert.deepEqual(byId.get('2'), {
    file_id: '2',
    job_key: '101',
    path: '/data/',
    name: ODD_NAME,
    path_hex: null,
    deleted: false,
    size: '9007199254740993',
    mode: 33188,
    uid: '4294967294',
    gid: '4294967294',
    mtime: '1969-12-31T00:00:00',
    md5: null,
    lstat: RECORDS[1].lstat,
  });
  assert.equal(byId.get('3').mtime, '1970-01-01T00:00:00');
  assert.equal(byId.get('3').mode, 16877);
  assert.equal(byId.get('4').deleted, true);
  assert.equal(byId.get('13').deleted, true, 'a negative FileIndex is a record not saved');
  assert.deepEqual([byId.get('13').size, byId.get('13').mode], ['0', 0]);
  assert.equal(byId.get('5').path_hex, '636166e92f');
  assert.deepEqual([byId.get('8').size, byId.get('8').uid], ['-5', '-1']);

  const rejects = await pool.query<{
    record_key: string;
    job_key: string;
    bucket: string | null;
    raw: string;
    fp: string;
  }>(
    `SELECT r.record_key::text, r.job_id AS job_key, r.bucket::text, r.raw, r.fingerprint_row AS fp FROM reject r
     WHERE r.version_id = $1 ORDER BY r.record_key`,
    [versionId],
  );
  assert.deepEqual(
    rejects.rows.map((r) => [r.record_key, r.job_key, r.bucket]),
    [
      ['6', '101', '2024-05-01'],
      ['7', '101', '2024-05-01'],
      ['10', '102', '2024-05-02'],
    ],
  );
  for (const r of rejects.rows) {
    const rec = RECORDS.find((x) => x.fileId === r.record_key)!;
    assert.equal((JSON.parse(r.raw) as { name: string }).name, rec.name);
    assert.ok(r.raw.includes(rec.name!), r.raw);
    assert.equal(r.fp, fingerprintInput(rec));
  }
});

test('a job reject sits beside the file rejects of its job; a replay after deleteJobFiles writes the same', async () => {
  const jobReject = { jobKey: '101', jobId: '101', bucket: '2024-05-01', fingerprintRow: '101|T|\\N|1|1' };
  await writeRejects(pool, versionId, 1, [{ ...jobReject, reason: 'first', raw: '{}' }]);
  await writeRejects(pool, versionId, 1, [{ ...jobReject, reason: 'again', raw: '{}' }]);
  assert.equal(await countRejects(pool, versionId), 1);
  assert.equal(await countFileRejects(pool, versionId), BAD.size);
  assert.deepEqual(await rejectSample(pool, versionId), [{ job_key: '101', job_id: '101', reason: 'again' }]);
  await createVersionPartition(pool, versionId);
  await pool.query(
    `INSERT INTO job (version_id, job_key, job_id, start_time, bucket, page_no) VALUES
       ($1, 101, '101', '2024-05-01T10:00:00Z', '2024-05-01', 1), ($1, 102, '102', '2024-05-02T10:00:00Z', '2024-05-02', 1),
       ($1, 103, '103', NULL, NULL, 2)`,
    [versionId],
  );
  assert.equal(await bucketCountWithRejects(pool, versionId, '2024-05-01'), 2);

  // A replay of job 102: its files and file rejects go, the page writes them again.
  assert.equal(await deleteJobFiles(pool, versionId, ['102']), 4);
  assert.equal(await deleteJobFiles(pool, versionId, []), 0);
  const again = await writePage(
    RECORDS.filter((r) => r.jobId === '102'),
    1,
  );
  assert.deepEqual([again.rows, again.rejects], [3, 1]);
  // A reject written twice is replaced, not doubled.
  assert.equal((await writePage([RECORDS[6]], 1)).rejects, 1);
  const n = await pool.query(`SELECT count(*)::int AS n FROM reject WHERE version_id = $1`, [versionId]);
  assert.equal(n.rows[0].n, BAD.size + 1);
});

test('per-bucket and per-job counts and digests equal a digest computed in Node', async () => {
  const expected = new Map<string | null, Staged[]>();
  for (const r of RECORDS) expected.set(r.bucket, [...(expected.get(r.bucket) ?? []), r]);
  const buckets = await fileBucketStats(pool, versionId, 'md5');
  assert.deepEqual(
    buckets,
    [null, '2024-05-01', '2024-05-02'].map((b) => ({
      bucket: b,
      files: expected.get(b)!.length,
      fingerprint: bucketDigest(expected.get(b)!.map(fingerprintInput)),
    })),
  );
  const hashed = await fileBucketStats(pool, versionId, 'hashtext64');
  assert.deepEqual(
    hashed.map((b) => b.files),
    buckets.map((b) => b.files),
  );
  const jobs = await fileJobStats(pool, versionId, ['102', '101', '999', '101'], 'md5');
  const ofJob = (id: string) => RECORDS.filter((r) => r.jobId === id);
  assert.deepEqual(jobs, [
    { jobId: '101', files: ofJob('101').length, fingerprint: bucketDigest(ofJob('101').map(fingerprintInput)) },
    { jobId: '102', files: ofJob('102').length, fingerprint: bucketDigest(ofJob('102').map(fingerprintInput)) },
    { jobId: '999', files: 0, fingerprint: '0' },
  ]);
  assert.deepEqual(
    await fileCountsByBucket(pool, versionId),
    new Map<string | null, number>([
      ['2024-05-01', 6],
      ['2024-05-02', 3],
      [null, 1],
    ]),
  );
});

test('find (exact, prefix) through the find index and a job listing over the published version', async () => {
  // Enough rows that the planner prefers the index on its own.
  await pool.query(
    `INSERT INTO ${filePartitionName(versionId)} (version_id, page_no, job_key, job_id, bucket, file_id, path, name, file_index, delta_seq)
     SELECT $1, 2, 103, '103', NULL, 1000 + g, '/filler/' || g || '/', 'f', g, 0 FROM generate_series(1, 20000) g`,
    [versionId],
  );
  await createFileIndexes(pool, versionId);
  await createFileIndexes(pool, versionId); // idempotent
  await pool.query(`INSERT INTO active (catalog_name, version_id) VALUES ($1, $2)`, [CATALOG, versionId]);
  await pool.query(`UPDATE version SET status = 'active' WHERE version_id = $1`, [versionId]);

  const exact = await findFiles(pool, CATALOG, '/etc/passwd', 10);
  assert.deepEqual(exact, [
    {
      jobId: '102',
      startTime: '2024-05-02T10:00:00.000000Z',
      path: '/etc/',
      name: 'passwd',
      deleted: false,
      size: '1234',
      mtime: '2024-05-01T08:00:00.000000Z',
    },
    {
      jobId: '101',
      startTime: '2024-05-01T10:00:00.000000Z',
      path: '/etc/',
      name: 'passwd',
      deleted: false,
      size: '1234',
      mtime: '2024-05-01T08:00:00.000000Z',
    },
  ]);
  // Saved records only, as Bacula's `FileIndex > 0`; with includeDeleted, the others too, marked.
  const prefix = await findFiles(pool, CATALOG, '/data/*', 10);
  assert.deepEqual(
    prefix.map((h) => h.path! + h.name!),
    ['/data/', `/data/${ODD_NAME}`],
  );
  const withDeleted = await findFiles(pool, CATALOG, '/data/*', 10, true);
  assert.deepEqual(
    withDeleted.map((h) => [h.jobId, h.path! + h.name!, h.deleted]),
    [
      ['102', '/data/was-here', true],
      ['101', '/data/', false],
      ['101', `/data/${ODD_NAME}`, false],
      ['101', '/data/gone', true],
    ],
  );
  assert.deepEqual(await findFiles(pool, CATALOG, '/data/was-here', 10), []);
  assert.equal((await findFiles(pool, CATALOG, '/data/was-here', 10, true)).length, 1);
  assert.equal(prefix[1].size, '9007199254740993');
  assert.equal(prefix[1].mtime, '1969-12-31T00:00:00.000000Z');
  assert.deepEqual(await findFiles(pool, CATALOG, '/dat_/*', 10), []); // '_' is not a wildcard
  assert.deepEqual(await findFiles(pool, CATALOG, '/data/', 10).then((h) => h.length), 1);
  assert.equal((await findFiles(pool, CATALOG, '/filler/*', 5)).length, 5);
  // A prefix of more than FIND_DENSE_MATCHES records walks the jobs newest first: the same hits, in the same order.
  for (const [pattern, like, includeDeleted] of [
    ['/filler/*', '/filler/%', false],
    ['/*', '/%', false],
    ['/*', '/%', true],
  ] as const) {
    const want = await pool.query<{ job_id: string; p: string; deleted: boolean }>(
      `SELECT f.job_id, f.path || f.name AS p, f.deleted FROM active_files f
       LEFT JOIN job j ON j.version_id = f.version_id AND j.job_id = f.job_id
       WHERE f.catalog_name = $1 AND f.path || f.name LIKE $2 AND ($3 OR NOT f.deleted)
       ORDER BY j.start_time DESC NULLS LAST, f.job_id, f.path || f.name, f.file_id LIMIT 40`,
      [CATALOG, like, includeDeleted],
    );
    const got = await findFiles(pool, CATALOG, pattern, 40, includeDeleted);
    assert.deepEqual(
      got.map((h) => [h.jobId, h.path! + h.name!, h.deleted]),
      want.rows.map((r) => [r.job_id, r.p, r.deleted]),
      pattern,
    );
    assert.equal(
      want.rows.some((r) => r.deleted),
      includeDeleted,
      `${pattern}: the sample holds deleted records`,
    );
  }
  assert.deepEqual(await findFiles(pool, 'no-such-catalog', '/etc/passwd', 10), []);
  await assert.rejects(findFiles(pool, CATALOG, '*', 10), /at least one character/);

  // The plans of both forms use the version's find index; a rebuild's table (no index yet) is never scanned.
  const building = await pool.query<{ version_id: string }>(
    `INSERT INTO version (catalog_name, source_name, workflow_id, first_run_id, page_size, files)
     VALUES ($1, 'director', $2, 'run2', 100, true) RETURNING version_id::text`,
    [CATALOG, `catalog-rebuild/${CATALOG}`],
  );
  const next = filePartitionName(building.rows[0].version_id);
  await createFilePartition(pool, building.rows[0].version_id);
  await pool.query(
    `INSERT INTO ${next} (version_id, page_no, job_key, job_id, file_id, path, name)
     SELECT $1, 1, 101, '101', g, '/etc/', 'passwd' FROM generate_series(1, 1000) g`,
    [building.rows[0].version_id],
  );
  const explaining: Queryable = {
    // The lookup of the published version's segments runs as it is; the reads of `file` are explained.
    query: (sql: string, params: unknown[]) =>
      pool.query(/segment_ids/.test(sql) ? sql : `EXPLAIN (ANALYZE, COSTS OFF) ${sql}`, params),
  } as unknown as Queryable;
  for (const pattern of ['/etc/passwd', '/etc/*']) {
    const plan = (await findFiles(explaining, CATALOG, pattern, 10)) as unknown as { 'QUERY PLAN': string }[];
    const text = plan.map((r) => r['QUERY PLAN']).join('\n');
    assert.match(text, new RegExp(`file_v${versionId}_find`), text);
    // The building version's table is pruned: left out of the plan, or never executed.
    assert.doesNotMatch(text, new RegExp(`on ${next} [^\\n]*\\(actual time`), text);
  }
  assert.equal((await findFiles(pool, CATALOG, '/etc/passwd', 10)).length, 2);
  assert.equal(await detachAndDropFilePartition(pool, building.rows[0].version_id), true);
  assert.equal(await detachAndDropFilePartition(pool, building.rows[0].version_id), false);

  const files = await listJobFiles(pool, CATALOG, '101', undefined, true);
  assert.deepEqual(
    files.map((f) => f.fileId),
    ['1', '2', '3', '4', '5', '8'],
  );
  assert.deepEqual(
    (await listJobFiles(pool, CATALOG, '101')).map((f) => f.fileId),
    ['1', '2', '3', '5', '8'],
    'saved records only: the one of FileIndex 0 is left out',
  );
  assert.deepEqual(
    (await listJobFiles(pool, CATALOG, '102')).map((f) => f.fileId),
    ['9', '12'],
  );
  // A version written before migration 12 stored deleted = (FileIndex = 0): the view reads it right.
  await pool.query(`UPDATE ${filePartitionName(versionId)} SET deleted = false WHERE file_id = 13`);
  const old = await pool.query(`SELECT deleted FROM active_files WHERE catalog_name = $1 AND file_id = 13`, [CATALOG]);
  assert.equal(old.rows[0].deleted, true);
  assert.deepEqual(
    (await listJobFiles(pool, CATALOG, '102', undefined, true)).map((f) => [f.fileId, f.deleted]),
    [
      ['9', false],
      ['12', false],
      ['13', true],
    ],
  );
  assert.deepEqual(files[1], {
    jobId: '101',
    startTime: '2024-05-01T10:00:00.000000Z',
    fileId: '2',
    path: '/data/',
    name: ODD_NAME,
    pathBytes: null,
    nameBytes: null,
    fileIndex: 2,
    deltaSeq: 0,
    deleted: false,
    size: '9007199254740993',
    mode: 33188,
    uid: '4294967294',
    gid: '4294967294',
    mtime: '1969-12-31T00:00:00.000000Z',
    md5: null,
    lstat: RECORDS[1].lstat,
  });
  assert.equal(files[4].pathBytes, '\\x636166e92f');
  assert.equal((await listJobFiles(pool, CATALOG, '101', 2)).length, 2);
  const reader = await pool.query(`SELECT has_table_privilege('catalog_reader', 'active_files', 'SELECT') AS ok`);
  assert.equal(reader.rows[0].ok, true);
  // The migration runs again without error (additive, idempotent).
  await pool.query(fs.readFileSync(path.join(migrationsDir(), '008_files.sql'), 'utf8'));
  await pool.query(fs.readFileSync(path.join(migrationsDir(), '012_file_saved.sql'), 'utf8'));
});

test('find by the exact bytes of a name that is not UTF-8: --path-hex, raw Latin-1 bytes in argv, UTF-8 text', async () => {
  const latin1 = Buffer.from('café/x', 'latin1'); // record 5: path bytes 636166e92f
  const exact = await findFilesByBytes(pool, CATALOG, latin1, false, 10);
  assert.deepEqual(
    exact.map((h) => [h.jobId, h.path, h.name]),
    [['101', 'café/', 'x']],
  );
  assert.deepEqual(
    (await findFilesByBytes(pool, CATALOG, latin1.subarray(0, 4), true, 10)).map((h) => h.path! + h.name!),
    ['café/x'],
  );
  assert.deepEqual(await findFilesByBytes(pool, CATALOG, Buffer.from('caf\xe8/x', 'latin1'), false, 10), []);
  // The UTF-8 text of the decoded name finds it too, and so do its UTF-8 bytes.
  assert.equal((await findFiles(pool, CATALOG, 'café/x', 10)).length, 1);
  assert.equal((await findFilesByBytes(pool, CATALOG, Buffer.from('café/x'), false, 10)).length, 1);

  // The CLI as an operator on a Latin-1 terminal runs it: the argument holds the raw byte 0xE9.
  const env = { ...process.env, CATALOG_DATABASE_URL: catalogUrl, CATALOG_REBUILD_CONFIG: '' };
  const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(projectRoot(), 'bin/catalog-rebuild.js'))}`;
  const raw = spawnSync('bash', ['-c', `${cli} find --catalog ${CATALOG} --path "$(printf 'caf\\351/x')"`], {
    env,
    encoding: 'utf8',
  });
  assert.equal(raw.status, 0, raw.stderr);
  assert.match(raw.stdout, /^101 {2}2024-05-01T10:00:00\.000000Z {2}café\/x {2}1234 /);
  const hex = spawnSync('bash', ['-c', `${cli} find --catalog ${CATALOG} --path-hex 636166e9* --json`], {
    env,
    encoding: 'utf8',
  });
  assert.equal(hex.status, 0, hex.stderr);
  assert.deepEqual(
    (JSON.parse(hex.stdout) as { path: string; name: string }[]).map((h) => [h.path, h.name]),
    [['café/', 'x']],
  );
});

test('output piped to a slow reader is complete and byte-identical to output into a file; a closed pipe ends quietly', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crt-pipe-'));
  const env = { ...process.env, CATALOG_DATABASE_URL: catalogUrl, CATALOG_REBUILD_CONFIG: '' };
  const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(projectRoot(), 'bin/catalog-rebuild.js'))}`;
  await pool.query(
    `INSERT INTO event (catalog_name, version_id, kind, message)
     SELECT $1, $2, 'page', 'page ' || g || ' committed: ' || repeat('x', 60) FROM generate_series(1, 20000) g`,
    [CATALOG, versionId],
  );
  try {
    for (const [name, args] of [
      ['files-json', `files --catalog ${CATALOG} --job 103 --json`],
      ['files-text', `files --catalog ${CATALOG} --job 103`],
      ['find-text', `find --catalog ${CATALOG} --path '/filler/*' --limit 30000`],
      ['events', `events --catalog ${CATALOG} --limit 100000`],
    ] as const) {
      const file = path.join(dir, `${name}.file`);
      const piped = path.join(dir, `${name}.pipe`);
      // The reader takes nothing for a second: the writer's pipe fills at 64 KiB long before its last line.
      const r = spawnSync(
        'bash',
        ['-c', `set -o pipefail; ${cli} ${args} > ${file} && ${cli} ${args} | (sleep 1; cat > ${piped})`],
        { env, encoding: 'utf8' },
      );
      assert.equal(r.status, 0, `${name}: ${r.stderr}`);
      const a = fs.readFileSync(file);
      const b = fs.readFileSync(piped);
      // Far beyond a pipe's 64 KiB buffer (files --json: about 3 MB).
      assert.ok(a.length > 512 * 1024, `${name}: ${a.length} bytes, more than 512 KiB expected`);
      assert.equal(b.length, a.length, `${name}: piped ${b.length} bytes, into a file ${a.length}`);
      assert.ok(a.equals(b), `${name}: same bytes`);
    }
    const head = spawnSync(
      'bash',
      ['-c', `${cli} files --catalog ${CATALOG} --job 103 | head -1; echo "rc=\${PIPESTATUS[0]}" >&2`],
      {
        env,
        encoding: 'utf8',
      },
    );
    assert.equal(head.stdout.split('\n').filter(Boolean).length, 1);
    assert.equal(head.stderr.trim(), 'rc=0', 'a closed pipe ends with exit code 0 and nothing on stderr');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
