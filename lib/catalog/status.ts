/**
 * Catalog reads behind `catalog-rebuild status`: a version with its ledger totals (the latest one of
 * a catalog, or the one a given rebuild planned) and its latest reconciliation report. Values are
 * parameters; nothing is written.
 */
import type { Queryable } from '../db';

/** A version of a catalog with its ledger totals, as {@link readLatestVersionProgress} returns it. */
export interface LatestVersionProgress {
  /** Version id (decimal text). */
  versionId: string;
  /** Version status: building, verifying, active, retired, dropped, abandoned or failed. */
  status: string;
  /** Pages in the plan (0 while planning). */
  pagesTotal: number;
  /** Rows per page of the plan. */
  pageSize: number;
  /** How the plan sized its pages: `auto` or `fixed` (`fixed` when the version row does not say). */
  pageSizing: 'auto' | 'fixed';
  /** Ledger rows with a commit time: pages committed. */
  pagesCommitted: number;
  /** Highest n such that pages 1..n are all committed (from the plan and the ledger). */
  checkpoint: number;
  /** Rows written by the committed pages (sum of the ledger's `rows`). */
  rows: number;
  /** Quarantined records of the version (rows of `reject`). */
  rejects: number;
  /** Retries: for each committed page, the attempts before the one that committed it (the ledger's `attempt - 1`). */
  retries: number;
  /** Why the version failed or was abandoned (`version.failure_reason`); null otherwise. */
  failureReason: string | null;
  /** Commit time of the newest committed page; null when none has committed. */
  lastCommitAt: Date | null;
  /** Seconds (fractional) from the newest page commit to the database's `now()`; null when none has committed. */
  secondsSinceLastCommit: number | null;
  /** Seconds (fractional) from the version's creation (plan) to the database's `now()`. */
  secondsSinceCreated: number;
}

/** The rebuild that planned a version: its workflow id and the run id of its first run. */
export interface RebuildRunKey {
  workflowId: string;
  firstRunId: string;
}

/**
 * Reads a catalog's newest version (highest version id) joined with its ledger (`page`): pages
 * committed, the checkpoint, rows written, quarantined records, retries and the time of the last
 * commit. With `run`, only the version planned by that rebuild (workflow id and first run id) is
 * considered. Ages are measured by the database clock. Cost: one pass over the version's plan,
 * ledger, attempts and rejects (indexed by version).
 * @param db pool or client on the catalog database.
 * @param catalog catalog name.
 * @param run the rebuild whose version is wanted; default any rebuild.
 * @returns the version, or null when there is none.
 */
export async function readLatestVersionProgress(
  db: Queryable,
  catalog: string,
  run?: RebuildRunKey,
): Promise<LatestVersionProgress | null> {
  const { rows } = await db.query<{
    version_id: string;
    status: string;
    pages_total: number;
    page_size: number;
    page_sizing: 'auto' | 'fixed' | null;
    failure_reason: string | null;
    committed: number;
    rows: string;
    last: Date | null;
    age: number | null;
    created_age: number;
    checkpoint: number;
    rejects: number;
    retries: number;
  }>(
    `SELECT l.*,
            (SELECT coalesce(min(pp.page_no), l.pages_total + 1) - 1 FROM plan_page pp
             WHERE pp.version_id = l.version_id::bigint
               AND NOT EXISTS (SELECT 1 FROM page p WHERE p.version_id = pp.version_id AND p.page_no = pp.page_no
                                 AND p.committed_at IS NOT NULL))::int AS checkpoint,
            (SELECT count(*) FROM reject r WHERE r.version_id = l.version_id::bigint)::int AS rejects
     FROM (SELECT v.version_id::text, v.status, v.pages_total, v.page_size, v.page_sizing, v.failure_reason,
                  count(p.committed_at)::int AS committed, coalesce(sum(p.rows), 0)::text AS rows,
                  coalesce(sum(p.attempt - 1) FILTER (WHERE p.committed_at IS NOT NULL), 0)::int AS retries,
                  max(p.committed_at) AS last, extract(epoch FROM now() - max(p.committed_at))::float8 AS age,
                  extract(epoch FROM now() - v.created_at)::float8 AS created_age
           FROM version v LEFT JOIN page p ON p.version_id = v.version_id
           WHERE v.catalog_name = $1 AND ($2::text IS NULL OR (v.workflow_id = $2 AND v.first_run_id = $3))
           GROUP BY v.version_id ORDER BY v.version_id DESC LIMIT 1) l`,
    [catalog, run?.workflowId ?? null, run?.firstRunId ?? null],
  );
  const l = rows[0];
  if (!l) return null;
  return {
    versionId: l.version_id,
    status: l.status,
    pagesTotal: l.pages_total,
    pageSize: l.page_size,
    pageSizing: l.page_sizing ?? 'fixed',
    pagesCommitted: l.committed,
    checkpoint: l.checkpoint,
    rows: Number(l.rows),
    rejects: l.rejects,
    retries: Math.max(0, l.retries),
    failureReason: l.failure_reason,
    lastCommitAt: l.last,
    secondsSinceLastCommit: l.age,
    secondsSinceCreated: l.created_age,
  };
}

/** A version's latest reconciliation round, as {@link readLatestReconciliation} returns it. */
export interface StoredReconciliation {
  round: number;
  /** Whether the round passed (counts, fingerprints, sample, reject threshold). */
  ok: boolean;
  /**
   * The stored report (`reconciliation.report`): the round's summary fields (`buckets`,
   * `sourceRows`, `catalogRows`, `rejects`, `mismatched`, `delta`, `duplicateJobNames`,
   * `sampleMismatches`, `sampled`) and more details.
   */
  report: Record<string, unknown>;
  /** When the round was stored. */
  createdAt: Date;
}

/**
 * Reads the report of a version's latest (highest) reconciliation round.
 * @param db pool or client on the catalog database.
 * @param versionId version id (decimal text).
 * @returns the round, or null when the version was never reconciled.
 */
export async function readLatestReconciliation(db: Queryable, versionId: string): Promise<StoredReconciliation | null> {
  const { rows } = await db.query<{ round: number; ok: boolean; report: Record<string, unknown>; created_at: Date }>(
    `SELECT round, ok, report, created_at FROM reconciliation WHERE version_id = $1 ORDER BY round DESC LIMIT 1`,
    [versionId],
  );
  const r = rows[0];
  return r ? { round: r.round, ok: r.ok, report: r.report, createdAt: r.created_at } : null;
}
