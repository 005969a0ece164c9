/**
 * Catalog reads behind the rebuild health check (`catalog-rebuild check --rebuild`) and the worker's
 * rebuild gauges: a rebuild's version row, its ledger's progress, the time its pages take and its
 * retries. They answer without a worker; ages are measured by the database clock. Nothing is written.
 */
import type { Queryable } from '../db';

/** The version a rebuild builds, as {@link readRebuildVersion} and {@link listBuildingVersions} return it. */
export interface RebuildVersionRow {
  /** Catalog name. */
  catalog: string;
  /** Version id (decimal text). */
  versionId: string;
  /** building, verifying, active, retired, dropped, abandoned or failed. */
  status: string;
  /** Pages in the plan. */
  pagesTotal: number;
  /** Seconds (fractional) from the version's creation (the plan) to the database's `now()`. */
  secondsSinceCreated: number;
  /** Why the version failed (`failed` versions), else null. */
  failureReason: string | null;
}

interface VersionRecord {
  catalog_name: string;
  version_id: string;
  status: string;
  pages_total: number;
  created_age: number;
  failure_reason: string | null;
}

const VERSION_COLUMNS = `catalog_name, version_id::text, status, pages_total,
  extract(epoch FROM now() - created_at)::float8 AS created_age, failure_reason`;

function versionRow(r: VersionRecord): RebuildVersionRow {
  return {
    catalog: r.catalog_name,
    versionId: r.version_id,
    status: r.status,
    pagesTotal: r.pages_total,
    secondsSinceCreated: r.created_age,
    failureReason: r.failure_reason,
  };
}

/**
 * Reads the version planned by one rebuild: the version row keyed by the rebuild's workflow id and
 * its first run's id (what `planRebuild` records; the same through continue-as-new and resets).
 * @param db pool or client on the catalog database.
 * @returns the version, or null when that rebuild has not planned one (yet).
 */
export async function readRebuildVersion(
  db: Queryable,
  workflowId: string,
  firstRunId: string,
): Promise<RebuildVersionRow | null> {
  const { rows } = await db.query<VersionRecord>(
    `SELECT ${VERSION_COLUMNS} FROM version WHERE workflow_id = $1 AND first_run_id = $2`,
    [workflowId, firstRunId],
  );
  return rows[0] ? versionRow(rows[0]) : null;
}

/**
 * Lists the versions being built now (status `building`), one per catalog being rebuilt.
 * @param db pool or client on the catalog database.
 */
export async function listBuildingVersions(db: Queryable): Promise<RebuildVersionRow[]> {
  const { rows } = await db.query<VersionRecord>(
    `SELECT ${VERSION_COLUMNS} FROM version WHERE status = 'building' ORDER BY catalog_name, version_id`,
  );
  return rows.map(versionRow);
}

/** A version's progress according to its ledger, as {@link readLedgerProgress} returns it. */
export interface LedgerProgress {
  /** Pages committed (ledger rows with a commit time). */
  pagesCommitted: number;
  /** Rows written by the committed pages. */
  rows: number;
  /** Seconds (fractional) from the newest page commit to the database's `now()`; null when none has committed. */
  secondsSinceLastCommit: number | null;
  /** Rows of the pages committed within the last `windowSeconds`. */
  rowsInWindow: number;
}

/**
 * Reads a version's ledger totals: pages committed, rows, age of the newest commit and the rows
 * committed within the last `windowSeconds` (the rate's numerator).
 * @param db pool or client on the catalog database.
 * @param versionId version id (decimal text).
 * @param windowSeconds the rate window (s), e.g. 60.
 */
export async function readLedgerProgress(
  db: Queryable,
  versionId: string,
  windowSeconds: number,
): Promise<LedgerProgress> {
  const { rows } = await db.query<{ committed: number; rows: string; age: number | null; recent: string }>(
    `SELECT count(committed_at)::int AS committed,
            coalesce(sum(rows) FILTER (WHERE committed_at IS NOT NULL), 0)::text AS rows,
            extract(epoch FROM now() - max(committed_at))::float8 AS age,
            coalesce(sum(rows) FILTER (WHERE committed_at > now() - make_interval(secs => $2)), 0)::text AS recent
     FROM page WHERE version_id = $1`,
    [versionId, windowSeconds],
  );
  const r = rows[0];
  return {
    pagesCommitted: r.committed,
    rows: Number(r.rows),
    secondsSinceLastCommit: r.age,
    rowsInWindow: Number(r.recent),
  };
}

/**
 * Reads the 99th percentile of the time (ms) the newest `lastPages` committed pages of a version
 * took: from the start of the committing attempt (its `page_attempt` claim, made before the source
 * read) to the page's commit; the ledger row's own start when the attempt has no claim row.
 * @param db pool or client on the catalog database.
 * @param versionId version id (decimal text).
 * @param lastPages pages considered, newest commits first (e.g. 200).
 * @returns milliseconds, or null when no page has committed.
 */
export async function readPageTimeP99(db: Queryable, versionId: string, lastPages: number): Promise<number | null> {
  const { rows } = await db.query<{ p99: number | null }>(
    `SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::float8 AS p99 FROM (
       SELECT extract(epoch FROM p.committed_at - coalesce(a.started_at, p.started_at)) * 1000 AS ms
       FROM (SELECT page_no, worker_identity, started_at, committed_at FROM page
             WHERE version_id = $1 AND committed_at IS NOT NULL ORDER BY committed_at DESC LIMIT $2) p
       CROSS JOIN LATERAL (SELECT max(a.started_at) AS started_at FROM page_attempt a
             WHERE a.version_id = $1 AND a.page_no = p.page_no AND a.worker_identity = p.worker_identity
               AND a.started_at <= p.committed_at) a) d`,
    [versionId, lastPages],
  );
  return rows[0]?.p99 ?? null;
}

/**
 * Counts a version's page retries, the one definition every figure uses (the `progress` query, the
 * result, `status`, `check --rebuild`, the worker's gauges): for each committed page of the ledger,
 * the attempts before the one that committed it (`attempt - 1`). Attempts of pages still in flight
 * count once their page commits.
 * @param db pool or client on the catalog database.
 * @param versionId version id (decimal text).
 */
export async function countPageRetries(db: Queryable, versionId: string): Promise<number> {
  const { rows } = await db.query<{ retries: number }>(
    `SELECT coalesce(sum(attempt - 1) FILTER (WHERE committed_at IS NOT NULL), 0)::int AS retries
     FROM page WHERE version_id = $1`,
    [versionId],
  );
  return rows[0]?.retries ?? 0;
}
