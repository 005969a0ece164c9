/**
 * The `reject` table: quarantined source records of a version, with the bucket and fingerprint
 * input the source gave them, the reason and the raw record. A job record is one row per (version,
 * paging key) with a NULL `record_key`; a file record carries its FileId as `record_key`, its job's
 * id in `job_id` and a NULL `job_key` (files.ts writes those; migrations/008_files.sql says why). Everything here is about job records unless it says otherwise.
 */
import type { Queryable } from '../db';
import type { RejectRecord } from '../validate';

/**
 * Records quarantined job records of a page (or a repaired bucket) in `reject`, one per (version,
 * paging key): a later attempt or repair replaces the reason and raw record.
 * @returns rejects written.
 */
export async function writeRejects(
  db: Queryable,
  versionId: string,
  pageNo: number,
  records: RejectRecord[],
): Promise<number> {
  // One row per paging key (the last one given wins): ON CONFLICT cannot affect a row twice.
  const rejects = [...new Map(records.map((r) => [r.jobKey, r])).values()];
  if (!rejects.length) return 0;
  const res = await db.query(
    `INSERT INTO reject (version_id, page_no, job_key, job_id, bucket, fingerprint_row, reason, raw)
     SELECT $1::bigint, $2::integer, u.k::bigint, u.id, u.b::date, u.fp, u.reason, u.raw
     FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) AS u(k, id, b, fp, reason, raw)
     ON CONFLICT (version_id, job_key) DO UPDATE
       SET page_no = EXCLUDED.page_no, job_id = EXCLUDED.job_id, bucket = EXCLUDED.bucket,
           fingerprint_row = EXCLUDED.fingerprint_row, reason = EXCLUDED.reason, raw = EXCLUDED.raw, created_at = now()`,
    [
      versionId,
      pageNo,
      rejects.map((r) => r.jobKey),
      rejects.map((r) => r.jobId),
      rejects.map((r) => r.bucket),
      rejects.map((r) => r.fingerprintRow),
      rejects.map((r) => r.reason),
      rejects.map((r) => r.raw),
    ],
  );
  return res.rowCount ?? 0;
}

/**
 * Deletes the quarantined job records of one bucket of a version except those with the paging keys
 * `keepKeys` (decimal text): records valid again, or gone from the source, leave the reject table.
 * Quarantined file records stay (files.ts `deleteJobFiles` removes a job's).
 */
export async function deleteBucketRejectsExcept(
  db: Queryable,
  versionId: string,
  bucket: string | null,
  keepKeys: string[],
): Promise<void> {
  await db.query(
    `DELETE FROM reject WHERE version_id = $1 AND record_key IS NULL AND bucket IS NOT DISTINCT FROM $2::date
       AND NOT (job_key = ANY($3::bigint[]))`,
    [versionId, bucket, keepKeys],
  );
}

/** Deletes every quarantined record of a version, job and file records (its rows are being dropped). */
export async function deleteVersionRejects(db: Queryable, versionId: string): Promise<void> {
  await db.query(`DELETE FROM reject WHERE version_id = $1`, [versionId]);
}

/** Quarantined job records of a version (what `maxRejects` limits). */
export async function countRejects(db: Queryable, versionId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM reject WHERE version_id = $1 AND record_key IS NULL`,
    [versionId],
  );
  return rows[0].n;
}

/** One quarantined record as shown in reports (column names as stored). */
export interface RejectSampleRow {
  /** Paging key, decimal text. */
  job_key: string;
  job_id: string | null;
  reason: string;
}

/** The first `limit` (default 20) quarantined job records of a version by paging key. */
export async function rejectSample(db: Queryable, versionId: string, limit = 20): Promise<RejectSampleRow[]> {
  const { rows } = await db.query<RejectSampleRow>(
    `SELECT job_key::text, job_id, reason FROM reject WHERE version_id = $1 AND record_key IS NULL ORDER BY job_key LIMIT $2`,
    [versionId, limit],
  );
  return rows;
}
