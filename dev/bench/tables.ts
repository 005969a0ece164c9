/**
 * Tables and SQL the bench's baselines share with the product: an equivalent of a version
 * partition, rows in COPY text form, a fingerprint of a table's rows, the server's WAL position.
 */
import { finished } from 'node:stream/promises';
import type { Client as PgClient, Pool } from 'pg';
import format from 'pg-format';
import { from as copyFrom } from 'pg-copy-streams';
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
 * Order-independent fingerprint of a table's catalog rows: every field but version_id and page_no
 * (the product's job fingerprint, lib/fingerprint.ts, covers five fields: not enough to show that
 * two copies hold the same rows field by field).
 */
export async function tableFingerprint(db: Pool, table: string): Promise<{ rows: number; sum: string }> {
  const cols = JOB_COLUMNS.map((c) => format('%I', c)).join(', ');
  const { rows } = await db.query<{ rows: number; sum: string }>(
    format(
      `SELECT count(*)::int AS rows, coalesce(sum(('x' || substr(md5(row(${cols})::text), 1, 15))::bit(60)::bigint), 0)::text AS sum FROM %I`,
      table,
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
