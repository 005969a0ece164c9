/**
 * A listing refresh's change detection (restic, borg): the next listing, COPYed into the plan's
 * transaction-local `pg_temp.staged_listing` under its stable job keys (lib/sources/staged.ts
 * `copyListingToTemp`), against the active version's jobs, both in the catalog database: new,
 * changed (another row hash, lib/sources/staged-select.ts `STAGED_ROW_HASH`) and gone keys, in one
 * statement over O(snapshots) rows. A listing's snapshots never change their files, so the set of
 * ids and the rows are the whole comparison; no file record is read.
 */
import type { PoolClient } from 'pg';
import format from 'pg-format';
import { STAGED_ROW_HASH, stagedSelect } from '../sources/staged-select';
import type { Queryable } from '../db';
import { partitionName } from './partitions';
import { versionSegments } from './segments';

/** What changed between a listing and a version (job keys, decimal text, ascending). */
export interface ListingChanges {
  /** Keys of the listing that the version has no job for (quarantined records included: read again). */
  newKeys: string[];
  /** Keys of both whose rows differ (or that the listing now quarantines). */
  changedKeys: string[];
  /** Keys of the version that the listing no longer has. */
  deletedKeys: string[];
  /** Job ids (snapshot or archive ids) of the version's changed and deleted jobs: their file records leave. */
  leavingJobIds: string[];
  /** Records of the listing equal to the version's job. */
  unchanged: number;
}

/**
 * Compares `pg_temp.staged_listing` (in the transaction of `c`) with version `baseVersionId`'s jobs
 * (every segment, superseded rows left out). `zone`: the source's IANA zone of naive times.
 * @throws the catalog's errors (no staged listing in the transaction: 42P01).
 */
export async function listingChanges(c: PoolClient, baseVersionId: string, zone: string): Promise<ListingChanges> {
  const segments = await versionSegments(c, baseVersionId);
  const base = segments.length
    ? segments
        .map((s) =>
          format(
            `SELECT job_key, job_id, row_hash FROM %I WHERE superseded_by IS NULL OR superseded_by > $1`,
            partitionName(s),
          ),
        )
        .join(' UNION ALL ')
    : 'SELECT NULL::bigint AS job_key, NULL::text AS job_id, NULL::bigint AS row_hash WHERE false';
  const listed = `SELECT x.seq, x.reject_reason, ${STAGED_ROW_HASH} AS h
    FROM (${stagedSelect(format('%L', zone), '0', 'pg_temp.staged_listing')}) x`;
  const { rows } = await c.query<{ key: string; job_id: string | null; change: 'new' | 'changed' | 'gone' | 'same' }>(
    `SELECT coalesce(x.seq, b.job_key)::text AS key, b.job_id,
            CASE WHEN b.job_key IS NULL THEN 'new' WHEN x.seq IS NULL THEN 'gone'
                 WHEN x.reject_reason IS NULL AND b.row_hash = x.h THEN 'same' ELSE 'changed' END AS change
     FROM (${listed}) x FULL JOIN (${base}) b ON b.job_key = x.seq
     ORDER BY coalesce(x.seq, b.job_key)`,
    [baseVersionId],
  );
  const out: ListingChanges = { newKeys: [], changedKeys: [], deletedKeys: [], leavingJobIds: [], unchanged: 0 };
  for (const r of rows) {
    if (r.change === 'same') out.unchanged++;
    else if (r.change === 'new') out.newKeys.push(r.key);
    else {
      (r.change === 'gone' ? out.deletedKeys : out.changedKeys).push(r.key);
      if (r.job_id !== null) out.leavingJobIds.push(r.job_id);
    }
  }
  return out;
}

/**
 * A listing refresh's per-job file figures (`listing_file_stat`, migration 011): those of version
 * `baseVersionId` for every job the refresh keeps as it is (not among `rewritten`: the keys its
 * pages write again or delete), so the version holds every job's. In the plan transaction. Idempotent.
 */
export async function carryListingFileStats(
  db: Queryable,
  versionId: string,
  baseVersionId: string,
  rewritten: string[],
): Promise<number> {
  const r = await db.query(
    `INSERT INTO listing_file_stat (version_id, job_key, job_id, bucket, files, hash_sum)
     SELECT $1, job_key, job_id, bucket, files, hash_sum FROM listing_file_stat
     WHERE version_id = $2 AND job_key <> ALL ($3::bigint[])
     ON CONFLICT (version_id, job_key) DO NOTHING`,
    [versionId, baseVersionId, rewritten],
  );
  return r.rowCount ?? 0;
}
