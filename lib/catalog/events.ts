/**
 * The catalog's event log (`event` table): what happened to a catalog and its versions, read by
 * `catalog-rebuild events`, `status` and the operator. Events written by a worker carry its build
 * id in `details.buildId`, stamped by the {@link EventLog}, never by the caller.
 */
import type { Queryable } from '../db';

/** One entry of a catalog's event log. */
export interface CatalogEvent {
  /** Catalog name. */
  catalog: string;
  /** Version the event is about (decimal text); null for catalog-wide events. */
  versionId: string | null;
  /** Stable kind: planned, page_retry, reconciled, repaired, published, retired, abandoned, failed, … */
  kind: string;
  /** One line for humans. */
  message: string;
  /** Machine-readable details (stored as jsonb); `{}` when absent. */
  details?: Record<string, unknown>;
}

/**
 * Appends an event as given. For events written outside a worker (the CLI's rollback); workers
 * write through {@link createEventLog}.
 */
export async function appendEvent(db: Queryable, e: CatalogEvent): Promise<void> {
  await db.query(`INSERT INTO event (catalog_name, version_id, kind, message, details) VALUES ($1, $2, $3, $4, $5)`, [
    e.catalog,
    e.versionId,
    e.kind,
    e.message,
    JSON.stringify(e.details ?? {}),
  ]);
}

/** A worker's event log: every event it records carries the worker's build id. */
export interface EventLog {
  /** Build id stamped on every event (`details.buildId`). */
  readonly buildId: string;
  /**
   * Appends `e` on `db` (a pool, or the client of a transaction the event belongs to), with
   * `details.buildId` set to this log's build id (after the caller's details).
   */
  record(db: Queryable, e: CatalogEvent): Promise<void>;
}

/** The event log of a worker whose build id is `buildId` (package version or CATALOG_REBUILD_BUILD_ID). */
export function createEventLog(buildId: string): EventLog {
  return {
    buildId,
    record: (db, e) => appendEvent(db, { ...e, details: { ...(e.details ?? {}), buildId } }),
  };
}
