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
  CATALOG_FINGERPRINT_ROW,
  fingerprintRow,
  STAGED_FINGERPRINT_ROW,
} from '../lib/fingerprint';
import { resolveAdminUrl } from '../dev/env/postgres';

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
