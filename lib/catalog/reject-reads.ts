/**
 * Reads of the quarantined records (`reject` table) for `catalog-rebuild rejects`: which version to
 * show and its records with their reasons. Rejects are written by page copies and repairs
 * (`rejects.ts`); nothing here writes.
 */
import type { Queryable } from '../db';

/** How the version shown by `rejects` was chosen. */
export type RejectsVersionChoice = 'requested' | 'active' | 'latest with rejects' | 'latest';

/** The version whose quarantined records are listed, as {@link chooseRejectsVersion} returns it. */
export interface RejectsVersion {
  /** Version id (decimal text). */
  versionId: string;
  /** Version status: building, verifying, active, retired, dropped, abandoned or failed. */
  status: string;
  choice: RejectsVersionChoice;
}

/**
 * Chooses the version of `catalog` whose quarantined records to list: `versionId` when given (it
 * must belong to the catalog); otherwise the active (published) version, else the newest version
 * that has quarantined records, else the newest version.
 * @param db pool or client on the catalog database.
 * @param versionId requested version id (decimal digits), or undefined for the default.
 * @returns the version, or null when the catalog has no such version (or no version at all).
 */
export async function chooseRejectsVersion(
  db: Queryable,
  catalog: string,
  versionId?: string,
): Promise<RejectsVersion | null> {
  if (versionId !== undefined) {
    const { rows } = await db.query<{ version_id: string; status: string }>(
      `SELECT version_id::text, status FROM version WHERE catalog_name = $1 AND version_id = $2::bigint`,
      [catalog, versionId],
    );
    return rows[0] ? { versionId: rows[0].version_id, status: rows[0].status, choice: 'requested' } : null;
  }
  const { rows } = await db.query<{ version_id: string; status: string; choice: RejectsVersionChoice }>(
    `SELECT v.version_id::text, v.status, c.choice FROM (
       (SELECT a.version_id, 'active' AS choice, 1 AS pref FROM active a WHERE a.catalog_name = $1)
       UNION ALL
       (SELECT v.version_id, 'latest with rejects', 2 FROM version v
        WHERE v.catalog_name = $1 AND EXISTS (SELECT 1 FROM reject r WHERE r.version_id = v.version_id)
        ORDER BY v.version_id DESC LIMIT 1)
       UNION ALL
       (SELECT v.version_id, 'latest', 3 FROM version v WHERE v.catalog_name = $1 ORDER BY v.version_id DESC LIMIT 1)
     ) c JOIN version v ON v.version_id = c.version_id
     ORDER BY c.pref LIMIT 1`,
    [catalog],
  );
  return rows[0] ? { versionId: rows[0].version_id, status: rows[0].status, choice: rows[0].choice } : null;
}

/** One quarantined record, as {@link listRejects} returns it (and `rejects --json` prints it). */
export interface RejectListing {
  /** Paging key (Bareos jobid, or the listing position), decimal text; null only in rows of schema version 1. */
  jobKey: string | null;
  /** The record's job id as the source gave it; null when it had none. */
  jobId: string | null;
  /** Bucket (`YYYY-MM-DD`, the source-local start date); null for records without a start time. */
  bucket: string | null;
  /** Why the record was quarantined (field and rule, with the offending value). */
  reason: string;
  /** The record as read from the source (JSON text for database sources, the listing entry for files). */
  raw: string;
  /** Page that quarantined it (or the page of the repaired bucket's key). */
  pageNo: number;
  /** When it was (last) quarantined, ISO 8601 UTC. */
  createdAt: string;
}

/**
 * Reads every quarantined record of a version, by paging key.
 * @param db pool or client on the catalog database.
 * @param versionId version id (decimal text).
 */
export async function listRejects(db: Queryable, versionId: string): Promise<RejectListing[]> {
  const { rows } = await db.query<{
    job_key: string | null;
    job_id: string | null;
    bucket: string | null;
    reason: string;
    raw: string;
    page_no: number;
    created_at: Date;
  }>(
    `SELECT job_key::text, job_id, bucket::text, reason, raw, page_no, created_at
     FROM reject WHERE version_id = $1 ORDER BY job_key`,
    [versionId],
  );
  return rows.map((r) => ({
    jobKey: r.job_key,
    jobId: r.job_id,
    bucket: r.bucket,
    reason: r.reason,
    raw: r.raw,
    pageNo: r.page_no,
    createdAt: r.created_at.toISOString(),
  }));
}
