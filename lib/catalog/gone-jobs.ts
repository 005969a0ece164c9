/**
 * Jobs gone from the source after the plan (`gone_job`, migration 013): a restic snapshot or borg
 * archive staged at plan that was no longer in the repository when its page listed its files. The
 * page leaves it out of the version and records it here in its own transaction; reconciliation
 * leaves it out of the source side (lib/sources/staged.ts) and reports the count with the delta.
 */
import type { PoolClient } from 'pg';
import type { Queryable } from '../db';
import type { GoneJob } from '../rows';

/** A job a page left out because it is gone from the source (lib/rows.ts). */
export type GoneJobRecord = GoneJob;

/**
 * Records the jobs page `pageNo` left out as gone (a job recorded before keeps one row, updated).
 * Run it in the page transaction; nothing when `jobs` is empty.
 */
export async function recordGoneJobs(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  jobs: GoneJobRecord[],
): Promise<void> {
  if (!jobs.length) return;
  await c.query(
    `INSERT INTO gone_job (version_id, job_key, job_id, bucket, page_no, reason)
     SELECT $1::bigint, g.job_key, g.job_id, g.bucket, $2::integer, g.reason
     FROM unnest($3::bigint[], $4::text[], $5::date[], $6::text[]) AS g(job_key, job_id, bucket, reason)
     ON CONFLICT (version_id, job_key) DO UPDATE
       SET job_id = EXCLUDED.job_id, bucket = EXCLUDED.bucket, page_no = EXCLUDED.page_no, reason = EXCLUDED.reason`,
    [
      versionId,
      pageNo,
      jobs.map((j) => j.jobKey),
      jobs.map((j) => j.jobId),
      jobs.map((j) => j.bucket),
      jobs.map((j) => j.reason),
    ],
  );
}

/** The jobs of a version gone from the source after the plan: how many, and the first (by paging key). */
export interface GoneJobs {
  count: number;
  /** The first 10 by paging key. */
  first: (GoneJobRecord & { pageNo: number })[];
}

/** The jobs of a version recorded gone by its pages (with paging key at or below `maxKey` when given). */
export async function goneJobs(db: Queryable, versionId: string, maxKey: string | null = null): Promise<GoneJobs> {
  const { rows } = await db.query<{ n: number; first: GoneJobs['first'] | null }>(
    `WITH g AS (SELECT * FROM gone_job WHERE version_id = $1 AND ($2::bigint IS NULL OR job_key <= $2::bigint))
     SELECT (SELECT count(*)::int FROM g) AS n,
            (SELECT json_agg(json_build_object('jobKey', f.job_key::text, 'jobId', f.job_id, 'bucket', f.bucket::text,
                                               'reason', f.reason, 'pageNo', f.page_no) ORDER BY f.job_key)
             FROM (SELECT * FROM g ORDER BY job_key LIMIT 10) f) AS first`,
    [versionId, maxKey],
  );
  return { count: rows[0].n, first: rows[0].first ?? [] };
}

/** Jobs page `pageNo` of a version recorded gone (what a replay of the committed page reports). */
export async function pageGoneJobCount(db: Queryable, versionId: string, pageNo: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM gone_job WHERE version_id = $1 AND page_no = $2`,
    [versionId, pageNo],
  );
  return rows[0].n;
}

/** `1 job gone from the source after the plan`, `3 jobs gone …`: how reports name them (a follow-up delta). */
export function goneJobsSentence(count: number): string {
  return `${count} job${count === 1 ? '' : 's'} gone from the source after the plan`;
}

/** Deletes the gone jobs recorded for a version (with its rows). */
export async function deleteGoneJobs(db: Queryable, versionId: string): Promise<void> {
  await db.query(`DELETE FROM gone_job WHERE version_id = $1`, [versionId]);
}
