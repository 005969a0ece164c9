/**
 * The source side of a listing source's file reconciliation (restic, borg with a `filesCommand`):
 * what each job's listing held when its page read it, per job (`listing_file_stat`, migration 011),
 * recorded from the page stage in the page transaction, and read back per bucket and per job with
 * the same digest definition as the catalog side (lib/fingerprint.ts, `hashtextextended` row hashes).
 */
import type { Pool, PoolClient } from 'pg';
import { withLongSession } from '../db';
import { digestOfSumSql, rowHashSql } from '../fingerprint';
import type { FileBucketStat, FileJobStat } from '../sources/types';
import { stagedFileFingerprintRow } from './files';

/**
 * Records, per job of the page stage, its listed file records' count and the sum of their row
 * hashes, replacing what an earlier read of the same job recorded. Run it in the page transaction,
 * after the stage is filled and before `insertStagedFiles` empties it; `timezone` as given to that
 * (naive mtimes). Jobs whose listing was empty are recorded from `jobs` with 0 records.
 * @param jobs every job the page listed: key, id and bucket (`YYYY-MM-DD` or null).
 */
export async function recordListingFileStats(
  c: PoolClient,
  versionId: string,
  jobs: { jobKey: string; jobId: string; bucket: string | null }[],
  timezone: string,
): Promise<void> {
  if (!jobs.length) return;
  await c.query(
    `INSERT INTO listing_file_stat (version_id, job_key, job_id, bucket, files, hash_sum)
     SELECT $1::bigint, j.job_key, j.job_id, j.bucket, coalesce(s.files, 0), coalesce(s.hash_sum, 0)
     FROM unnest($2::bigint[], $3::text[], $4::date[]) AS j(job_key, job_id, bucket)
     LEFT JOIN (SELECT s.job_key, count(*) AS files, sum(${rowHashSql(stagedFileFingerprintRow('$5'), 'hashtext64')}) AS hash_sum
                FROM pg_temp.file_stage s GROUP BY 1) s
       ON s.job_key = j.job_key
     ON CONFLICT (version_id, job_key) DO UPDATE
       SET job_id = EXCLUDED.job_id, bucket = EXCLUDED.bucket, files = EXCLUDED.files, hash_sum = EXCLUDED.hash_sum`,
    [versionId, jobs.map((j) => j.jobKey), jobs.map((j) => j.jobId), jobs.map((j) => j.bucket), timezone],
  );
}

/**
 * Per bucket, the listed file records of the version's jobs with paging key at or below `maxKey`:
 * count and digest, ordered by bucket (`null` first). On a session without statement timeout.
 */
export async function listingFileBucketStats(pool: Pool, versionId: string, maxKey: string): Promise<FileBucketStat[]> {
  const { rows } = await withLongSession(pool, (c) =>
    c.query<{ bucket: string | null; files: string; fingerprint: string }>(
      `SELECT bucket::text AS bucket, sum(files)::text AS files, ${digestOfSumSql('sum(hash_sum)')} AS fingerprint
       FROM listing_file_stat WHERE version_id = $1 AND job_key <= $2::bigint AND files > 0
       GROUP BY 1 ORDER BY 1 NULLS FIRST`,
      [versionId, maxKey],
    ),
  );
  return rows.map((r) => ({ bucket: r.bucket, files: Number(r.files), fingerprint: r.fingerprint }));
}

/** Per job of `jobIds` (distinct, ascending), its listed file records' count and digest (0 and `0` when none were listed). */
export async function listingFileJobStats(pool: Pool, versionId: string, jobIds: string[]): Promise<FileJobStat[]> {
  if (!jobIds.length) return [];
  const { rows } = await pool.query<{ job_id: string; files: string; fingerprint: string }>(
    `SELECT j.job_id, coalesce(sum(s.files), 0)::text AS files, ${digestOfSumSql('sum(s.hash_sum)')} AS fingerprint
     FROM (SELECT DISTINCT unnest($2::text[]) AS job_id) j
     LEFT JOIN listing_file_stat s ON s.version_id = $1 AND s.job_id = j.job_id
     GROUP BY 1 ORDER BY 1`,
    [versionId, jobIds],
  );
  return rows.map((r) => ({ jobId: r.job_id, files: Number(r.files), fingerprint: r.fingerprint }));
}
