/**
 * Tables and SQL the bench's baselines share with the product: an equivalent of a version
 * partition, rows in COPY text form, a fingerprint of a table's rows, the server's WAL position.
 */
import { finished } from 'node:stream/promises';
import type { Client as PgClient, Pool } from 'pg';
import format from 'pg-format';
import { from as copyFrom } from 'pg-copy-streams';
import { withLongSession } from '../../lib/db';
import { BAREOS_JOB_SELECT } from '../../lib/sources/bareos-columns';
import type { SourceRow } from '../../lib/sources/types';
import { JOB_COLUMNS } from '../../lib/sources/types';
import { copyValue } from '../../lib/text-form';

/** The catalog's row columns in COPY order (the table also has version_id and page_no). */
export const COPY_COLUMNS = ['version_id', 'page_no', ...JOB_COLUMNS];

/**
 * The source's jobs in the catalog's text form, in key order: the product's own mapping
 * (`BAREOS_JOB_SELECT`, the one BareosSource.readRange uses); `$1` is the source's time zone.
 */
export const SELECT_JOBS_AS_TEXT = `${BAREOS_JOB_SELECT}\nORDER BY j.jobid`;

/** Rows as COPY text lines (version id and page number first). */
export function copyText(versionId: string, pageNo: number, rows: SourceRow[]): string {
  let out = '';
  for (const r of rows) {
    out += `${versionId}\t${pageNo}`;
    for (const c of JOB_COLUMNS) out += `\t${copyValue(r[c])}`;
    out += '\n';
  }
  return out;
}

/** COPYs `text` (COPY text format) into `table` on a connected client. */
export async function copyInto(db: { query: PgClient['query'] }, table: string, text: string): Promise<void> {
  const stream = (db.query as unknown as (q: unknown) => NodeJS.WritableStream)(
    copyFrom(format('COPY %I (%I) FROM STDIN', table, COPY_COLUMNS)),
  );
  stream.end(text);
  await finished(stream as unknown as NodeJS.WritableStream);
}

/** Creates `table` like a version partition: the columns of `job` and its primary key. */
export async function createEquivalentTable(db: Pool, table: string): Promise<void> {
  await db.query(format('DROP TABLE IF EXISTS %I', table));
  await db.query(format('CREATE TABLE %I (LIKE job INCLUDING DEFAULTS)', table));
  await db.query(format('ALTER TABLE %I ADD PRIMARY KEY (version_id, job_id)', table));
}

/**
 * The 24 columns of baseline (p)'s table `j`, in its order, with their types: the catalog's job
 * columns without `extra` (and without version_id and page_no), `job_id text PRIMARY KEY`.
 */
export const P_COLUMNS: [string, string][] = [
  ['job_id', 'text PRIMARY KEY'],
  ['job', 'text'],
  ['job_name', 'text'],
  ['client', 'text'],
  ['type', 'text'],
  ['level', 'text'],
  ['status', 'text'],
  ['sched_time', 'timestamptz'],
  ['start_time', 'timestamptz'],
  ['end_time', 'timestamptz'],
  ['real_end_time', 'timestamptz'],
  ['files', 'bigint'],
  ['bytes', 'numeric(20,0)'],
  ['read_bytes', 'numeric(20,0)'],
  ['job_errors', 'integer'],
  ['pool', 'text'],
  ['fileset', 'text'],
  ['prior_job_id', 'text'],
  ['job_tdate', 'bigint'],
  ['vol_session_id', 'bigint'],
  ['vol_session_time', 'bigint'],
  ['comment', 'text'],
  ['bucket', 'date'],
  ['job_key', 'bigint'],
];

/** Columns of {@link P_COLUMNS} holding instants. */
const TIME_COLUMNS = new Set(['sched_time', 'start_time', 'end_time', 'real_end_time']);

/**
 * Baseline (p)'s SELECT on a Bareos source, on one line (psql's `\copy` reads one line): `job`
 * LEFT JOIN `client`, `pool`, `fileset`, the 24 columns of {@link P_COLUMNS} typed as the catalog
 * types them, naive times read as UTC (`AT TIME ZONE 'UTC'`). Codes map as the product maps them
 * (`''` → NULL, `priorjobid` 0 → NULL), so the row sets can be compared.
 */
export const P_SELECT = [
  `SELECT j.jobid::text AS job_id, j.job, j.name AS job_name, c.name AS client,`,
  `NULLIF(j.type::text, '') AS type, NULLIF(j.level::text, '') AS level, NULLIF(j.jobstatus::text, '') AS status,`,
  `j.schedtime AT TIME ZONE 'UTC' AS sched_time, j.starttime AT TIME ZONE 'UTC' AS start_time,`,
  `j.endtime AT TIME ZONE 'UTC' AS end_time, j.realendtime AT TIME ZONE 'UTC' AS real_end_time,`,
  `j.jobfiles::bigint AS files, j.jobbytes::numeric(20,0) AS bytes, j.readbytes::numeric(20,0) AS read_bytes,`,
  `j.joberrors AS job_errors, p.name AS pool, f.fileset, NULLIF(j.priorjobid, 0)::text AS prior_job_id,`,
  `j.jobtdate AS job_tdate, j.volsessionid::bigint AS vol_session_id, j.volsessiontime::bigint AS vol_session_time,`,
  `j.comment, j.starttime::date AS bucket, j.jobid::bigint AS job_key`,
  `FROM job j LEFT JOIN client c ON c.clientid = j.clientid LEFT JOIN pool p ON p.poolid = j.poolid`,
  `LEFT JOIN fileset f ON f.filesetid = j.filesetid`,
].join(' ');

/** Creates (p)'s table: logged, the 24 typed columns, `job_id text PRIMARY KEY` and no other index. */
export async function createPipeTable(db: Pool, table: string): Promise<void> {
  await db.query(format('DROP TABLE IF EXISTS %I', table));
  await db.query(
    format('CREATE TABLE %I (%s)', table, P_COLUMNS.map(([c, t]) => `${format('%I', c)} ${t}`).join(', ')),
  );
}

/**
 * Order-independent fingerprint of a table's rows over the 24 columns of {@link P_COLUMNS}: the
 * count and the sum of 60 bits of the md5 of each row's text, with instants shown as wall-clock
 * times in `zone` (the zone the source's naive times were read in: 'UTC' for (p), the source's zone
 * for the product), so tables read in different zones compare equal when they hold the same rows.
 * Works on (p)'s table and on any table with the catalog's job columns.
 */
export async function rowSetFingerprint(db: Pool, table: string, zone: string): Promise<{ rows: number; sum: string }> {
  const cols = P_COLUMNS.map(([c]) =>
    TIME_COLUMNS.has(c) ? format('(%I AT TIME ZONE %L)', c, zone) : format('%I', c),
  );
  // One scan of the whole table: on a session of its own without statement timeout (10M rows take minutes).
  const { rows } = await withLongSession(db, (c) =>
    c.query<{ rows: number; sum: string }>(
      format(
        `SELECT count(*)::int AS rows, coalesce(sum(('x' || substr(md5(row(${cols.join(', ')})::text), 1, 15))::bit(60)::bigint), 0)::text AS sum FROM %I`,
        table,
      ),
    ),
  );
  return rows[0];
}

/** Server-wide WAL insert position. */
export async function walLsn(db: Pool): Promise<string> {
  return (await db.query<{ l: string }>('SELECT pg_current_wal_insert_lsn()::text AS l')).rows[0].l;
}

/** WAL bytes written server-wide since `lsn`. */
export async function walSince(db: Pool, lsn: string): Promise<number> {
  return Number(
    (await db.query<{ d: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)::text AS d', [lsn])).rows[0]
      .d,
  );
}

/** `url` whose sessions use `search_path = schema` only. */
export function withSearchPath(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return u.toString();
}
