/**
 * The `version` table: one row per rebuild's output, its lifecycle (`building` → `verifying` →
 * `active` → `retired` → `dropped`; `abandoned`, `failed`), the fence every write takes on it, and
 * the per-catalog publish lock that serialises plan, publish, retirement claims and rollback.
 */
import { PAGE_SIZING } from '../page-sizing';
import type { PoolClient } from 'pg';
import type { Queryable } from '../db';
import { NotPublishableError, PlanEndedError, VersionFencedError } from '../errors';
import type { PageSizing, PlanResult } from '../../workflows/definitions';

/** Status of a version (column `version.status`). */
export type VersionStatus = 'building' | 'verifying' | 'active' | 'retired' | 'dropped' | 'abandoned' | 'failed';

/** A version row as activities read it (ids and keys as decimal text). */
export interface VersionRow {
  version_id: string;
  catalog_name: string;
  source_name: string;
  status: VersionStatus;
  /** Highest paging key at plan; null for an empty source. */
  watermark_key: string | null;
  pages_total: number;
  workflow_id: string;
  /** `start --verify full`: every reconciliation round scans both sides. */
  verify_full: boolean;
}

/**
 * Reads one version row.
 * @throws NotPublishableError when the version does not exist.
 */
export async function loadVersion(db: Queryable, versionId: string): Promise<VersionRow> {
  const { rows } = await db.query<VersionRow>(
    `SELECT version_id::text, catalog_name, source_name, status, watermark_key::text, pages_total, workflow_id, verify_full
       FROM version WHERE version_id = $1`,
    [versionId],
  );
  if (!rows.length) throw new NotPublishableError(`version ${versionId} does not exist`);
  return rows[0];
}

/** How a transaction locks a version row: `share` for writes into the version, `update` to change its status. */
export type VersionLockMode = 'share' | 'update';

/** A version row locked by the current transaction. */
export interface LockedVersion {
  status: VersionStatus;
  /** Catalog the version belongs to. */
  catalog: string;
}

/**
 * Locks a version row (`FOR SHARE` or `FOR UPDATE`) in the transaction of `c` and reads its status.
 * Page and repair writes take `share`, so status changes (`update`: seal, publish, end, drop) wait
 * for the writes in flight, and writes that come later see the new status.
 * @returns the row, or null when the version does not exist.
 */
export async function lockVersionRow(
  c: PoolClient,
  versionId: string,
  mode: VersionLockMode,
): Promise<LockedVersion | null> {
  const { rows } = await c.query<{ status: VersionStatus; catalog_name: string }>(
    `SELECT status, catalog_name FROM version WHERE version_id = $1 ${mode === 'share' ? 'FOR SHARE' : 'FOR UPDATE'}`,
    [versionId],
  );
  return rows[0] ? { status: rows[0].status, catalog: rows[0].catalog_name } : null;
}

/**
 * Requires a version's status to be one of `allowed`.
 * @returns the status.
 * @throws VersionFencedError (VERSION_FENCED, non-retryable) naming the status (`missing` when there is no row).
 */
export function requireVersionStatus(
  versionId: string,
  status: VersionStatus | undefined,
  allowed: readonly VersionStatus[],
): VersionStatus {
  if (!status || !allowed.includes(status)) throw new VersionFencedError(versionId, status ?? 'missing');
  return status;
}

/**
 * The version fence: locks the version row in the transaction of `c` and requires one of the
 * `allowed` statuses (page writes: `building`; repair writes: `building` or `verifying`).
 * @returns the status found.
 * @throws VersionFencedError (VERSION_FENCED, non-retryable) when the version is in another status or missing.
 */
export async function lockVersion(
  c: PoolClient,
  versionId: string,
  opts: { mode: VersionLockMode; allowed: readonly VersionStatus[] },
): Promise<VersionStatus> {
  const row = await lockVersionRow(c, versionId, opts.mode);
  return requireVersionStatus(versionId, row?.status, opts.allowed);
}

/** Seals a version: `building` → `verifying` (caller holds the row `FOR UPDATE`). */
export async function markVerifying(c: PoolClient, versionId: string): Promise<void> {
  await c.query(`UPDATE version SET status = 'verifying' WHERE version_id = $1`, [versionId]);
}

/** Ends an unpublished version as `abandoned` or `failed` with its reason (caller holds the row `FOR UPDATE`). */
export async function markEnded(
  c: PoolClient,
  versionId: string,
  status: 'abandoned' | 'failed',
  reason: string,
): Promise<void> {
  await c.query(`UPDATE version SET status = $2, finished_at = now(), failure_reason = $3 WHERE version_id = $1`, [
    versionId,
    status,
    reason,
  ]);
}

/** Marks a version `dropped` (its rows are about to be removed; caller holds the publish lock and the row). */
export async function markDropped(c: PoolClient, versionId: string): Promise<void> {
  await c.query(`UPDATE version SET status = 'dropped' WHERE version_id = $1`, [versionId]);
}

/**
 * Marks every `building` or `verifying` version of `catalog` `abandoned` (superseded by a new
 * rebuild: the previous one was terminated or lost). Caller holds the publish lock.
 * @returns the ids abandoned now.
 */
export async function abandonSupersededVersions(c: PoolClient, catalog: string): Promise<string[]> {
  const { rows } = await c.query<{ version_id: string }>(
    `UPDATE version SET status = 'abandoned', finished_at = now(), failure_reason = 'superseded by a new rebuild'
             WHERE catalog_name = $1 AND status IN ('building', 'verifying') RETURNING version_id::text`,
    [catalog],
  );
  return rows.map((r) => r.version_id);
}

/**
 * The plan stored for (workflow id, first run id), as planRebuild returned it.
 * @returns null when no version was planned for them.
 */
export async function findPlan(db: Queryable, workflowId: string, firstRunId: string): Promise<PlanResult | null> {
  const existing = await db.query<{
    version_id: string;
    pages_total: number;
    source_rows: string;
    watermark_key: string | null;
    watermark_time: string;
    source_timezone: string;
    page_size: number;
    page_sizing: PageSizing | null;
    max_rows: number | null;
  }>(
    `SELECT version_id::text, pages_total, page_size, page_sizing, source_rows::text, watermark_key::text,
            (SELECT max(p.planned_rows) FROM plan_page p WHERE p.version_id = version.version_id) AS max_rows,
                  to_char(watermark_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS watermark_time, source_timezone
           FROM version WHERE workflow_id = $1 AND first_run_id = $2`,
    [workflowId, firstRunId],
  );
  if (!existing.rowCount) return null;
  const v = existing.rows[0];
  return {
    versionId: v.version_id,
    pagesTotal: v.pages_total,
    pageSize: v.page_size,
    pageSizing: v.page_sizing ?? 'fixed',
    sourceRows: v.source_rows,
    watermark: { jobKey: v.watermark_key, time: v.watermark_time },
    timezone: v.source_timezone,
    ...(v.max_rows !== null && v.max_rows > PAGE_SIZING.maxRows ? { maxPageRows: v.max_rows } : {}),
  };
}

/**
 * Records that the rebuild of (workflow id, first run id) of `catalog` ended with no version
 * planned, so that a late plan attempt of it stores none ({@link openPlanStore}). Idempotent. Call
 * under the catalog's publish lock, after finding no version of those ids.
 * @returns true when recorded now, false when it was recorded before.
 */
export async function recordEndedPlan(
  db: Queryable,
  ids: { workflowId: string; firstRunId: string; catalog: string },
): Promise<boolean> {
  const r = await db.query(
    `INSERT INTO ended_plan (workflow_id, first_run_id, catalog_name) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    [ids.workflowId, ids.firstRunId, ids.catalog],
  );
  return r.rowCount === 1;
}

/**
 * Opens the store of a plan in the transaction of `c`: takes the catalog's publish lock, then tells
 * whether the rebuild of (workflow id, first run id) may store its version.
 * @returns false when its version is stored already (a retry after the commit: the caller reads it).
 * @throws PlanEndedError (non-retryable) when the rebuild ended before its plan committed a version.
 */
export async function openPlanStore(
  c: PoolClient,
  plan: { catalog: string; workflowId: string; firstRunId: string },
): Promise<boolean> {
  await lockCatalogForPublish(c, plan.catalog);
  // Its version, or its end (`ended_plan`, migration 18: a plan attempt that runs on after the rebuild ended).
  const { rows } = await c.query<{ planned: boolean; ended: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM version WHERE workflow_id = $1 AND first_run_id = $2) AS planned,
            EXISTS (SELECT 1 FROM ended_plan WHERE workflow_id = $1 AND first_run_id = $2) AS ended`,
    [plan.workflowId, plan.firstRunId],
  );
  if (rows[0].planned) return false;
  if (rows[0].ended) throw new PlanEndedError(plan.workflowId, plan.firstRunId);
  return true;
}

/** A new `building` version's row. Keys and counts are decimal text. */
export interface NewVersion {
  catalog: string;
  source: string;
  workflowId: string;
  firstRunId: string;
  /** Jobs per page. */
  pageSize: number;
  /** How the plan sized its pages. */
  pageSizing: PageSizing;
  pagesTotal: number;
  /** Source rows at or below the watermark. */
  sourceRows: string;
  /** Highest paging key at plan; null for an empty source. */
  watermarkKey: string | null;
  /** Source clock at plan (ISO 8601 UTC). */
  watermarkTime: string;
  /** IANA zone of the source's naive times. */
  timezone: string;
  /** `start --verify full`: every reconciliation round scans both sides (default false). */
  verifyFull?: boolean;
}

/** Inserts a `building` version. @returns its id (decimal text). */
export async function insertVersion(c: Queryable, v: NewVersion): Promise<string> {
  const ins = await c.query<{ version_id: string }>(
    `INSERT INTO version (catalog_name, source_name, workflow_id, first_run_id, page_size, pages_total,
                                  source_rows, watermark_key, watermark_time, source_timezone, page_sizing, verify_full)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING version_id::text`,
    [
      v.catalog,
      v.source,
      v.workflowId,
      v.firstRunId,
      v.pageSize,
      v.pagesTotal,
      v.sourceRows,
      v.watermarkKey,
      v.watermarkTime,
      v.timezone,
      v.pageSizing,
      v.verifyFull ?? false,
    ],
  );
  return ins.rows[0].version_id;
}

/** Marks the version as one that rebuilds file records too (`--files`). */
export async function setVersionFiles(c: Queryable, versionId: string): Promise<void> {
  await c.query(`UPDATE version SET files = true WHERE version_id = $1`, [versionId]);
}

/** Whether the version rebuilds file records (`--files`); false for an unknown version. */
export async function versionHasFiles(db: Queryable, versionId: string): Promise<boolean> {
  const r = await db.query<{ files: boolean }>(`SELECT files FROM version WHERE version_id = $1`, [versionId]);
  return r.rows[0]?.files ?? false;
}

/** Records a staged listing's sha256 and the repeated ids dropped while staging it. */
export async function setSourceSnapshot(
  c: Queryable,
  versionId: string,
  snapshot: string | null,
  duplicates: number,
): Promise<void> {
  await c.query(`UPDATE version SET source_snapshot = $2, source_duplicates = $3 WHERE version_id = $1`, [
    versionId,
    snapshot,
    duplicates,
  ]);
}

/** Records the name of the version's table. */
export async function setPartitionTable(c: Queryable, versionId: string, table: string): Promise<void> {
  await c.query(`UPDATE version SET partition_table = $2 WHERE version_id = $1`, [versionId, table]);
}

/**
 * Takes the catalog's publish lock (a transaction-scoped advisory lock on
 * `catalog-rebuild:publish:<catalog>`), held until the transaction of `c` ends. Plan, publish,
 * the claim of a version to drop, and rollback take it, so they never interleave.
 */
export async function lockCatalogForPublish(c: PoolClient, catalog: string): Promise<void> {
  await c.query(`SELECT pg_advisory_xact_lock(hashtext('catalog-rebuild:publish:' || $1))`, [catalog]);
}
