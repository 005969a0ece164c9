/**
 * Catalog reads behind `catalog-rebuild status` when no worker answers the `progress` query: the
 * latest version with its ledger totals. Values are parameters; nothing is
 * written.
 */
import type { Queryable } from '../db';

/** The latest version of a catalog with its ledger totals, as {@link readLatestVersionProgress} returns it. */
export interface LatestVersionProgress {
  /** Version id (decimal text). */
  versionId: string;
  /** Version status: building, verifying, active, retired, dropped, abandoned or failed. */
  status: string;
  /** Pages in the plan (0 while planning). */
  pagesTotal: number;
  /** Ledger rows with a commit time: pages committed. */
  pagesCommitted: number;
  /** Rows written by the committed pages (sum of the ledger's `rows`). */
  rows: number;
  /** Commit time of the newest committed page; null when none has committed. */
  lastCommitAt: Date | null;
  /** Seconds (fractional) from the newest page commit to the database's `now()`; null when none has committed. */
  secondsSinceLastCommit: number | null;
  /** Seconds (fractional) from the version's creation (plan) to the database's `now()`. */
  secondsSinceCreated: number;
}

/**
 * Reads a catalog's newest version (highest version id) joined with its ledger (`page`): pages
 * committed, rows written and the time of the last commit. Ages are measured by the database clock.
 * @param db pool or client on the catalog database.
 * @param catalog catalog name.
 * @returns the newest version, or null when the catalog has no version.
 */
export async function readLatestVersionProgress(db: Queryable, catalog: string): Promise<LatestVersionProgress | null> {
  const { rows } = await db.query<{
    version_id: string;
    status: string;
    pages_total: number;
    committed: number;
    rows: string;
    last: Date | null;
    age: number | null;
    created_age: number;
  }>(
    `SELECT v.version_id::text, v.status, v.pages_total,
            count(p.committed_at)::int AS committed, coalesce(sum(p.rows), 0)::text AS rows,
            max(p.committed_at) AS last, extract(epoch FROM now() - max(p.committed_at))::float8 AS age,
            extract(epoch FROM now() - v.created_at)::float8 AS created_age
     FROM version v LEFT JOIN page p ON p.version_id = v.version_id
     WHERE v.catalog_name = $1 GROUP BY v.version_id ORDER BY v.version_id DESC LIMIT 1`,
    [catalog],
  );
  const l = rows[0];
  if (!l) return null;
  return {
    versionId: l.version_id,
    status: l.status,
    pagesTotal: l.pages_total,
    pagesCommitted: l.committed,
    rows: Number(l.rows),
    lastCommitAt: l.last,
    secondsSinceLastCommit: l.age,
    secondsSinceCreated: l.created_age,
  };
}
