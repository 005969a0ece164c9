/**
 * Job rows of a version's table: page writes (unnest upsert, COPY, streamed COPY), the reads
 * and deletes of a bucket's repair, and the comparison of job ids between two versions.
 * Identifiers are escaped with pg-format's %I; values are always parameters.
 */
import { once } from 'node:events';
import type { Readable, Transform } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import format from 'pg-format';
import type { PoolClient } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Queryable } from '../db';
import { isDataError, withSavepoint } from '../db';
import { fingerprintRow } from '../fingerprint';
import { PAGE_COPY_COLUMNS } from '../rows';
import type { PageRejectRecord } from '../rows';
import type { SourceRow } from '../sources/types';
import { JOB_COLUMNS } from '../sources/types';
import { copyValue, utcText } from '../text-form';
import { partitionName } from './partitions';

/** SELECT list that renders catalog rows in the SourceRow text form (for field-by-field comparison). */
export const CATALOG_ROW_AS_TEXT = `
  t.job_key::text AS job_key, t.job_id, t.job, t.job_name, t.client, t.type, t.level, t.status,
  ${utcText('t.sched_time')} AS sched_time, ${utcText('t.start_time')} AS start_time,
  ${utcText('t.end_time')} AS end_time, ${utcText('t.real_end_time')} AS real_end_time,
  t.files::text AS files, t.bytes::text AS bytes, t.read_bytes::text AS read_bytes,
  t.job_errors::text AS job_errors, t.pool, t.fileset, t.prior_job_id, t.job_tdate::text AS job_tdate,
  t.vol_session_id::text AS vol_session_id, t.vol_session_time::text AS vol_session_time,
  t.comment, t.bucket::text AS bucket, t.extra::text AS extra`;

const CASTS: Record<string, string> = {
  job_key: 'bigint',
  sched_time: 'timestamptz',
  start_time: 'timestamptz',
  end_time: 'timestamptz',
  real_end_time: 'timestamptz',
  files: 'bigint',
  bytes: 'numeric(20,0)',
  read_bytes: 'numeric(20,0)',
  job_errors: 'integer',
  job_tdate: 'bigint',
  vol_session_id: 'bigint',
  vol_session_time: 'bigint',
  bucket: 'date',
  extra: 'jsonb',
};

const UPDATABLE = JOB_COLUMNS.filter((c) => c !== 'job_id');

/**
 * Upserts rows keyed by (version, job id), replacing the full record. A row found identical is
 * neither rewritten nor locked: identical rows are filtered out (NOT EXISTS on the primary key)
 * before `ON CONFLICT DO UPDATE`, which would otherwise lock every conflicting row (a WAL record
 * and a dirtied heap page per row, a full-page image after a checkpoint) even when its `WHERE`
 * refuses the update. A replayed page therefore writes only its ledger row. Values travel as text
 * arrays through `unnest`. Rows must be unique by job_id (ON CONFLICT cannot affect a row twice in
 * one command).
 * @returns rows inserted or changed.
 */
export async function upsertRows(db: Queryable, versionId: string, pageNo: number, rows: SourceRow[]): Promise<number> {
  if (!rows.length) return 0;
  const table = partitionName(versionId);
  const arrays = JOB_COLUMNS.map((c) => rows.map((r) => r[c]));
  const unnestArgs = JOB_COLUMNS.map((_, i) => `$${i + 3}::text[]`).join(', ');
  const selectList = JOB_COLUMNS.map((c) => (CASTS[c] ? `u.${c}::${CASTS[c]} AS ${c}` : `u.${c}`)).join(', ');
  const sql = format(
    `INSERT INTO %I AS t (version_id, page_no, %I)
     SELECT $1::bigint, $2::integer, s.* FROM (SELECT ${selectList} FROM unnest(${unnestArgs}) AS u(%I)) AS s
     WHERE NOT EXISTS (SELECT 1 FROM %I AS x WHERE x.version_id = $1::bigint AND x.job_id = s.job_id
                       AND (%s) IS NOT DISTINCT FROM (%s))
     ON CONFLICT (version_id, job_id) DO UPDATE SET page_no = EXCLUDED.page_no, %s
     WHERE (%s) IS DISTINCT FROM (%s)`,
    table,
    JOB_COLUMNS,
    JOB_COLUMNS,
    table,
    UPDATABLE.map((c) => `x.${c}`).join(', '),
    UPDATABLE.map((c) => `s.${c}`).join(', '),
    UPDATABLE.map((c) => format('%I = EXCLUDED.%I', c, c)).join(', '),
    UPDATABLE.map((c) => `t.${c}`).join(', '),
    UPDATABLE.map((c) => `EXCLUDED.${c}`).join(', '),
  );
  const res = await db.query(sql, [versionId, pageNo, ...arrays]);
  return res.rowCount ?? 0;
}

/**
 * Inserts rows with `COPY … FROM STDIN` (text format) into the version's table: about twice as fast
 * as the unnest upsert for a page, in the database and in the worker (docs/performance.md). Only for
 * rows that cannot exist yet: a duplicate key fails the COPY with SQLSTATE 23505 (see
 * {@link copyOrUpsertRows}). Rows must be unique by job_id.
 * @returns rows inserted.
 */
export async function copyRows(db: PoolClient, versionId: string, pageNo: number, rows: SourceRow[]): Promise<number> {
  if (!rows.length) return 0;
  const stream = db.query(
    copyFrom(format('COPY %I (version_id, page_no, %I) FROM STDIN', partitionName(versionId), JOB_COLUMNS)),
  );
  const done = finished(stream);
  done.catch(() => undefined); // awaited below; never an unhandled rejection
  const prefix = `${versionId}\t${pageNo}`;
  let chunk = '';
  for (const r of rows) {
    let line = prefix;
    for (const c of JOB_COLUMNS) line += `\t${copyValue(r[c])}`;
    chunk += `${line}\n`;
    if (chunk.length >= 65_536) {
      const more = stream.write(chunk);
      chunk = '';
      if (!more) await Promise.race([once(stream, 'drain'), done]);
    }
  }
  stream.end(chunk);
  await done;
  return stream.rowCount;
}

/**
 * Streams rows in COPY text form (a source's page read, fields in lib/rows.ts PAGE_COPY_COLUMNS
 * order) into the version's table with `COPY … FROM STDIN`. The source stream, the
 * `through` transforms (a digest) and the catalog side are joined in ONE `stream.pipeline`: an
 * error on any of them (or `signal`) ends every stream and rejects, and no stream is ever left
 * without an error listener (a connection lost while another stream still runs cannot crash the
 * worker). The catalog side then sends CopyFail, so the transaction is left aborted (roll back to
 * a savepoint to go on). Only for keys that cannot exist yet (a duplicate key fails with SQLSTATE 23505).
 * @param rows the source's rows, created by the caller only once the catalog is ready for them.
 * @returns rows inserted.
 */
export async function copyRowsFromStream(
  db: PoolClient,
  versionId: string,
  rows: Readable,
  signal?: AbortSignal,
  through: Transform[] = [],
): Promise<number> {
  const sink = db.query(copyFrom(format('COPY %I (%I) FROM STDIN', partitionName(versionId), PAGE_COPY_COLUMNS)));
  const streams: (NodeJS.ReadableStream | NodeJS.WritableStream)[] = [rows, ...through, sink];
  await pipeline(streams, signal ? { signal } : {});
  return sink.rowCount;
}

/**
 * The first attempt at a page of a fresh version: `COPY` (no other attempt can have committed these
 * keys: the ledger row inserted first serialises attempts), inside a savepoint; should a row exist
 * after all (a page replayed by hand as attempt 1), the savepoint is rolled back and the rows are
 * upserted instead, so the outcome is the same as {@link upsertRows}.
 * Must run inside a transaction.
 * @returns rows inserted or changed, and which write was used.
 */
export async function copyOrUpsertRows(
  db: PoolClient,
  versionId: string,
  pageNo: number,
  rows: SourceRow[],
): Promise<{ rows: number; method: 'copy' | 'upsert' }> {
  if (!rows.length) return { rows: 0, method: 'copy' };
  await db.query('SAVEPOINT page_copy');
  try {
    const n = await copyRows(db, versionId, pageNo, rows);
    await db.query('RELEASE SAVEPOINT page_copy');
    return { rows: n, method: 'copy' };
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code !== '23505') throw err;
    await db.query('ROLLBACK TO SAVEPOINT page_copy');
    return { rows: await upsertRows(db, versionId, pageNo, rows), method: 'upsert' };
  }
}

/** A catalog row's job id and paging key (decimal text). */
export interface JobKeyPair {
  job_id: string;
  job_key: string;
}

/** Job id and paging key of every row of one bucket of a version (`null` = jobs without a start time). */
export async function bucketJobKeys(db: Queryable, versionId: string, bucket: string | null): Promise<JobKeyPair[]> {
  const { rows } = await db.query<JobKeyPair>(
    format(`SELECT job_id, job_key::text FROM %I WHERE bucket IS NOT DISTINCT FROM $1::date`, partitionName(versionId)),
    [bucket],
  );
  return rows;
}

/**
 * Deletes the version's rows with these job ids; no statement when the list is empty.
 * @returns rows deleted.
 */
export async function deleteJobsById(db: Queryable, versionId: string, jobIds: string[]): Promise<number> {
  if (!jobIds.length) return 0;
  const r = await db.query(format('DELETE FROM %I WHERE job_id = ANY($1::text[])', partitionName(versionId)), [jobIds]);
  return r.rowCount ?? 0;
}

/**
 * Deletes the version's rows with these paging keys (decimal text); no statement when the list is empty.
 * @returns rows deleted.
 */
export async function deleteJobsByKey(db: Queryable, versionId: string, jobKeys: string[]): Promise<number> {
  return (await deleteJobsByKeyReturningIds(db, versionId, jobKeys)).length;
}

/**
 * Deletes the job rows of `jobKeys` from version `versionId`'s own table, like {@link deleteJobsByKey}.
 * @returns the job ids of the rows deleted (a listing's snapshot ids: its file records are found by them).
 */
export async function deleteJobsByKeyReturningIds(
  db: Queryable,
  versionId: string,
  jobKeys: string[],
): Promise<string[]> {
  if (!jobKeys.length) return [];
  const r = await db.query<{ job_id: string }>(
    format('DELETE FROM %I WHERE job_key = ANY($1::bigint[]) RETURNING job_id', partitionName(versionId)),
    [jobKeys],
  );
  return r.rows.map((x) => x.job_id);
}

/** Rows of one bucket of a version plus its quarantined job records of that bucket, in one statement. */
export async function bucketCountWithRejects(db: Queryable, versionId: string, bucket: string | null): Promise<number> {
  const after = await db.query<{ n: string }>(
    format(
      `SELECT ((SELECT count(*) FROM %I WHERE bucket IS NOT DISTINCT FROM $1::date)
                       + (SELECT count(*) FROM reject WHERE version_id = %s AND record_key IS NULL
                          AND bucket IS NOT DISTINCT FROM $1::date))::text AS n`,
      partitionName(versionId),
      versionId,
    ),
    [bucket],
  );
  return Number(after.rows[0].n);
}

/** A job name (`job`) whose job id differs between two versions. */
export interface RenumberedJob {
  job: string;
  previousJobId: string;
  jobId: string;
}

/** At most this many renumbered job names are reported. */
const RENUMBERED_LIMIT = 100;

/**
 * Job names (`job`, the Bareos unique job name) whose job id changed from version `oldId` to
 * `newId`: a join of the two partitions on `job` where the id differs and neither side's
 * (name, id) pair exists in the other version (so duplicate names are not reported), limited to
 * 100 names sorted by name; `truncated` says there are more.
 */
export async function renumberedJobs(
  db: Queryable,
  oldId: string,
  newId: string,
): Promise<{ jobs: RenumberedJob[]; truncated: boolean }> {
  const { rows } = await db.query<{ job: string; old_id: string; new_id: string }>(
    format(
      `SELECT o.job, o.job_id AS old_id, n.job_id AS new_id
       FROM %I o JOIN %I n ON n.job = o.job AND n.job_id <> o.job_id
       WHERE NOT EXISTS (SELECT 1 FROM %I x WHERE x.version_id = %s AND x.job_id = o.job_id AND x.job = o.job)
         AND NOT EXISTS (SELECT 1 FROM %I y WHERE y.version_id = %s AND y.job_id = n.job_id AND y.job = n.job)
       LIMIT %s`,
      partitionName(oldId),
      partitionName(newId),
      partitionName(newId),
      newId,
      partitionName(oldId),
      oldId,
      RENUMBERED_LIMIT + 1,
    ),
  );
  const byName = new Map<string, RenumberedJob>();
  for (const r of rows)
    if (!byName.has(r.job)) byName.set(r.job, { job: r.job, previousJobId: r.old_id, jobId: r.new_id });
  const jobs = [...byName.values()].sort((a, b) => a.job.localeCompare(b.job));
  return { jobs: jobs.slice(0, RENUMBERED_LIMIT), truncated: rows.length > RENUMBERED_LIMIT };
}

/**
 * Upserts `rows` (unique by job id) so that a row the catalog refuses with a data error (SQLSTATE
 * class 22 or 54000) is quarantined alone: the batch is tried in a savepoint, and a refused batch is
 * split in halves until the refused rows stand alone (about k·log2(n) statements for k bad rows).
 * Each refused row is appended to `rejects` with the database's reason.
 * @returns rows written.
 * @throws any error that is not a data error.
 */
export async function upsertRowsQuarantining(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  rows: SourceRow[],
  rejects: PageRejectRecord[],
): Promise<number> {
  if (!rows.length) return 0;
  try {
    await withSavepoint(c, 'page_rows', () => upsertRows(c, versionId, pageNo, rows));
    return rows.length;
  } catch (err) {
    if (!isDataError(err)) throw err;
    if (rows.length === 1) {
      const r = rows[0];
      const e = err as Error & { code: string };
      rejects.push({
        jobKey: r.job_key!,
        jobId: r.job_id,
        bucket: r.bucket,
        fingerprintRow: fingerprintRow(r),
        reason: `catalog refused the row: database error ${e.code}: ${e.message}`,
        raw: JSON.stringify(r),
      });
      return 0;
    }
    const half = Math.ceil(rows.length / 2);
    return (
      (await upsertRowsQuarantining(c, versionId, pageNo, rows.slice(0, half), rejects)) +
      (await upsertRowsQuarantining(c, versionId, pageNo, rows.slice(half), rejects))
    );
  }
}

/**
 * The digest of the version's rows of `jobIds` (primary-key lookups): their count and the sum
 * modulo 2^64 of their `row_hash`, decimal text; `''` when one of them has no hash (written row by
 * row, not streamed from the source).
 */
export async function rowsDigest(db: Queryable, versionId: string, jobIds: string[]): Promise<string> {
  if (!jobIds.length) return '0';
  const { rows } = await db.query<{ n: string; h: string; d: string }>(
    format(
      `SELECT count(*)::text AS n, count(row_hash)::text AS h,
              ((coalesce(sum(row_hash), 0) %% 18446744073709551616 + 18446744073709551616) %% 18446744073709551616)::text AS d
       FROM %I WHERE version_id = $1 AND job_id = ANY ($2::text[])`,
      partitionName(versionId),
    ),
    [versionId, jobIds],
  );
  return rows[0].n === rows[0].h ? rows[0].d : '';
}
