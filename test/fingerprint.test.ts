/**
 * The four fingerprint definitions (Node, catalog SQL, Bareos source SQL, staged-listing SQL)
 * evaluated on the same rows give the same text: a reconciliation of identical jobs can only match
 * if they do. Needs PostgreSQL (DATABASE_URL from `npm test`); no Temporal.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Pool } from 'pg';
import {
  BAREOS_FINGERPRINT_ROW,
  bucketDigest,
  bucketDigestSql,
  CATALOG_FINGERPRINT_ROW,
  fingerprintRow,
  rowHash,
  STAGED_FINGERPRINT_ROW,
} from '../lib/fingerprint';
import { resolveAdminUrl } from '../dev/env/postgres';
import type { RowHashKind } from '../lib/fingerprint';

/** One job in source form: naive Bareos end time in the source zone, and the UTC text the catalog holds. */
interface Case {
  jobid: string;
  status: string | null;
  naiveEnd: string | null;
  utcEnd: string | null;
  files: string | null;
  bytes: string | null;
}

const ZONE = 'Europe/Berlin';
const CASES: Case[] = [
  {
    jobid: '1',
    status: 'T',
    naiveEnd: '2024-05-01 23:10:05.5',
    utcEnd: '2024-05-01T21:10:05.500000Z',
    files: '12',
    bytes: '4096',
  },
  { jobid: '2', status: null, naiveEnd: null, utcEnd: null, files: null, bytes: null },
  {
    jobid: '3',
    status: 'f',
    naiveEnd: '2024-01-15 00:30:00',
    utcEnd: '2024-01-14T23:30:00.000000Z',
    files: '0',
    bytes: '9007199254740993',
  },
  {
    jobid: '9223372036854775807',
    status: 'E',
    naiveEnd: '2024-10-27 02:30:00',
    utcEnd: '2024-10-27T01:30:00.000000Z',
    files: '2147483647',
    bytes: '9223372036854775807',
  },
];

let pool: Pool;
before(async () => {
  pool = new Pool({ connectionString: await resolveAdminUrl(), max: 1 });
});
after(async () => {
  await pool.end();
});

test('Node, catalog, Bareos and staged fingerprints agree on the same rows', async () => {
  const node = CASES.map((c) =>
    fingerprintRow({ job_id: c.jobid, status: c.status, end_time: c.utcEnd, files: c.files, bytes: c.bytes }),
  );
  const arr = (f: (c: Case) => string | null) => CASES.map(f);
  const catalog = await pool.query<{ fp: string }>(
    `SELECT ${CATALOG_FINGERPRINT_ROW} AS fp
     FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[], $5::numeric(20,0)[]) WITH ORDINALITY AS t(job_id, status, end_time, files, bytes, n)
     ORDER BY n`,
    [arr((c) => c.jobid), arr((c) => c.status), arr((c) => c.utcEnd), arr((c) => c.files), arr((c) => c.bytes)],
  );
  // Bareos: jobstatus is char(1) (blank when unknown), endtime a naive timestamp in the source zone.
  const bareos = await pool.query<{ fp: string }>(
    `SELECT ${BAREOS_FINGERPRINT_ROW} AS fp
     FROM unnest($2::bigint[], $3::char(1)[], $4::timestamp[], $5::bigint[], $6::bigint[]) WITH ORDINALITY AS j(jobid, jobstatus, endtime, jobfiles, jobbytes, n)
     ORDER BY n`,
    [
      ZONE,
      arr((c) => c.jobid),
      arr((c) => c.status ?? ''),
      arr((c) => c.naiveEnd),
      arr((c) => c.files),
      arr((c) => c.bytes),
    ],
  );
  const staged = await pool.query<{ fp: string }>(
    `SELECT ${STAGED_FINGERPRINT_ROW} AS fp
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS x(job_id, status, end_time, files, bytes, n)
     ORDER BY n`,
    [arr((c) => c.jobid), arr((c) => c.status), arr((c) => c.utcEnd), arr((c) => c.files), arr((c) => c.bytes)],
  );
  assert.equal(node[0], '1|T|2024-05-01T21:10:05.500000Z|12|4096');
  assert.equal(node[1], '2|\\N|\\N|\\N|\\N');
  assert.deepEqual(
    catalog.rows.map((r) => r.fp),
    node,
    'catalog SQL = Node',
  );
  assert.deepEqual(
    bareos.rows.map((r) => r.fp),
    node,
    'Bareos SQL = Node',
  );
  assert.deepEqual(
    staged.rows.map((r) => r.fp),
    node,
    'staged-listing SQL = Node',
  );
});

/** The digest of `cases` computed by the catalog, Bareos and staged SQL aggregates (in that order). */
async function sqlDigests(cases: Case[], hash: RowHashKind = 'md5'): Promise<string[]> {
  const arr = (f: (c: Case) => string | null) => cases.map(f);
  const utc = [
    arr((c) => c.jobid),
    arr((c) => c.status),
    arr((c) => c.utcEnd),
    arr((c) => c.files),
    arr((c) => c.bytes),
  ];
  const catalog = await pool.query<{ d: string }>(
    `SELECT ${bucketDigestSql(CATALOG_FINGERPRINT_ROW, hash)} AS d
     FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[], $5::numeric(20,0)[]) AS t(job_id, status, end_time, files, bytes)`,
    utc,
  );
  const bareos = await pool.query<{ d: string }>(
    `SELECT ${bucketDigestSql(BAREOS_FINGERPRINT_ROW, hash)} AS d
     FROM unnest($2::bigint[], $3::char(1)[], $4::timestamp[], $5::bigint[], $6::bigint[]) AS j(jobid, jobstatus, endtime, jobfiles, jobbytes)`,
    [
      ZONE,
      arr((c) => c.jobid),
      arr((c) => c.status ?? ''),
      arr((c) => c.naiveEnd),
      arr((c) => c.files),
      arr((c) => c.bytes),
    ],
  );
  const staged = await pool.query<{ d: string }>(
    `SELECT ${bucketDigestSql(STAGED_FINGERPRINT_ROW, hash)} AS d
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS x(job_id, status, end_time, files, bytes)`,
    utc,
  );
  return [catalog.rows[0].d, bareos.rows[0].d, staged.rows[0].d];
}

const nodeDigest = (cases: Case[]) =>
  bucketDigest(
    cases.map((c) =>
      fingerprintRow({ job_id: c.jobid, status: c.status, end_time: c.utcEnd, files: c.files, bytes: c.bytes }),
    ),
  );

test('bucket digests: Node, catalog, Bareos and staged SQL agree; order-independent; duplicates do not cancel', async () => {
  // More jobs, so that hashes with the top bit set (negative as bigint in SQL) are among them.
  const more: Case[] = Array.from({ length: 30 }, (_, i) => ({ ...CASES[0], jobid: String(100 + i) }));
  const rows = [...CASES, ...more];
  const hashes = rows.map((c) =>
    rowHash(fingerprintRow({ job_id: c.jobid, status: c.status, end_time: c.utcEnd, files: c.files, bytes: c.bytes })),
  );
  assert.ok(hashes.some((h) => h >= 1n << 63n) && hashes.some((h) => h < 1n << 63n), 'both signs of bigint covered');
  const node = nodeDigest(rows);
  assert.ok(BigInt(node) >= 0n && BigInt(node) < 1n << 64n);
  assert.deepEqual(await sqlDigests(rows), [node, node, node], 'catalog, Bareos and staged SQL = Node');
  assert.deepEqual(await sqlDigests([...rows].reverse()), [node, node, node], 'any order gives the same digest');
  assert.equal(nodeDigest([...rows].reverse()), node);

  const twice = [CASES[0], CASES[0]];
  const d2 = nodeDigest(twice);
  assert.notEqual(d2, '0', 'two identical jobs do not cancel');
  assert.notEqual(d2, nodeDigest([CASES[0]]), 'a duplicated job changes the digest');
  assert.deepEqual(await sqlDigests(twice), [d2, d2, d2]);
  assert.deepEqual(await sqlDigests([]), ['0', '0', '0'], 'an empty group is 0');
  assert.equal(nodeDigest([]), '0');
});

test('bucket digests with the hashtext64 row hash: catalog, Bareos and staged SQL agree; order-independent; duplicates add', async () => {
  const more: Case[] = Array.from({ length: 30 }, (_, i) => ({ ...CASES[0], jobid: String(100 + i) }));
  const rows = [...CASES, ...more];
  const [catalog, bareos, staged] = await sqlDigests(rows, 'hashtext64');
  assert.equal(bareos, catalog);
  assert.equal(staged, catalog);
  assert.notEqual(catalog, (await sqlDigests(rows, 'md5'))[0], 'a different row hash');
  assert.equal((await sqlDigests([...rows].reverse(), 'hashtext64'))[0], catalog, 'order-independent');
  const twice = (await sqlDigests([...rows, rows[0]], 'hashtext64'))[0];
  assert.notEqual(twice, catalog, 'a repeated job changes the digest');
  assert.notEqual((await sqlDigests([rows[0], rows[0]], 'hashtext64'))[0], '0', 'two identical rows do not cancel');
});
