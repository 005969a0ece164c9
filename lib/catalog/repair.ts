/**
 * The catalog side of a bucket's repair, by job-key range: the bucket's id span recorded by the
 * latest reconciliation round, the bucket's rows within it, and the count after the repair. A
 * version table has an index on `job_key` and none on the bucket, so every read here is a range
 * scan of the span, never a scan of the whole table.
 */
import format from 'pg-format';
import type { Queryable } from '../db';
import type { KeySpan } from '../sources/types';
import type { JobKeyPair } from './job-rows';
import { partitionName } from './partitions';

/**
 * The id span the latest reconciliation round of a version recorded for a bucket (report
 * `bucketSpans`, keyed by `YYYY-MM-DD` or `none`): the union of its source and catalog spans.
 * @returns the span, or null when the round recorded none for the bucket.
 */
export async function recordedBucketSpan(
  db: Queryable,
  versionId: string,
  bucket: string | null,
): Promise<KeySpan | null> {
  const { rows } = await db.query<{ span: KeySpan | null }>(
    `SELECT report->'bucketSpans'->$2::text AS span FROM reconciliation WHERE version_id = $1 ORDER BY round DESC LIMIT 1`,
    [versionId, bucket ?? 'none'],
  );
  const span = rows[0]?.span;
  return span && /^-?\d+$/.test(span.min) && /^-?\d+$/.test(span.max) ? span : null;
}

/** Job id and paging key of the rows of one bucket of a version (`null` = no start time) with a key in `span`. */
export async function bucketJobKeysInSpan(
  db: Queryable,
  versionId: string,
  bucket: string | null,
  span: KeySpan,
): Promise<JobKeyPair[]> {
  const { rows } = await db.query<JobKeyPair>(
    format(
      `SELECT job_id, job_key::text FROM %I
       WHERE job_key BETWEEN $2::bigint AND $3::bigint AND bucket IS NOT DISTINCT FROM $1::date`,
      partitionName(versionId),
    ),
    [bucket, span.min, span.max],
  );
  return rows;
}

/** Rows of one bucket of a version with a key in `span`, plus its quarantined job records of that bucket and span. */
export async function bucketCountInSpan(
  db: Queryable,
  versionId: string,
  bucket: string | null,
  span: KeySpan,
): Promise<number> {
  const { rows } = await db.query<{ n: string }>(
    format(
      `SELECT ((SELECT count(*) FROM %I WHERE job_key BETWEEN $2::bigint AND $3::bigint AND bucket IS NOT DISTINCT FROM $1::date)
             + (SELECT count(*) FROM reject WHERE version_id = %s AND record_key IS NULL
                  AND job_key BETWEEN $2::bigint AND $3::bigint
                  AND bucket IS NOT DISTINCT FROM $1::date))::text AS n`,
      partitionName(versionId),
      versionId,
    ),
    [bucket, span.min, span.max],
  );
  return Number(rows[0].n);
}
