/**
 * Reads of a catalog's event log (`event` table) for the CLI: the newest entries and the last
 * message. Events are written by the worker (`recordEvent`); nothing here writes.
 */
import type { Queryable } from '../db';

/**
 * One event as {@link listEvents} returns it. The column names are those of the `event` table;
 * `catalog-rebuild events --json` prints this object as is.
 */
export interface EventRow {
  /** Event id (bigserial, decimal text): increases with the order of recording. */
  event_id: string;
  /** When the event was recorded (the database's clock_timestamp()). */
  created_at: Date;
  /** Version the event concerns (decimal text), null for catalog-wide events. */
  version_id: string | null;
  /** Stable kind: planned, page_retry, reconciled, repaired, published, retired, abandoned, failed, rolled_back, … */
  kind: string;
  /** Human-readable message. */
  message: string;
  /** Structured details (JSON object; `{}` when none). */
  details: Record<string, unknown>;
}

/**
 * Reads the newest `limit` events of a catalog, returned oldest first.
 * @param db pool or client on the catalog database.
 * @param catalog catalog name.
 * @param limit number of events (rows), at least 1.
 */
export async function listEvents(db: Queryable, catalog: string, limit: number): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT * FROM (SELECT event_id, created_at, version_id::text, kind, message, details FROM event
       WHERE catalog_name = $1 ORDER BY event_id DESC LIMIT $2) e ORDER BY event_id`,
    [catalog, limit],
  );
  return rows;
}

/**
 * Reads the message of a catalog's newest event.
 * @param db pool or client on the catalog database.
 * @param catalog catalog name.
 * @returns the message, or null when the catalog has no event.
 */
export async function readLastEventMessage(db: Queryable, catalog: string): Promise<string | null> {
  const { rows } = await db.query<{ message: string }>(
    `SELECT message FROM event WHERE catalog_name = $1 ORDER BY event_id DESC LIMIT 1`,
    [catalog],
  );
  return rows[0]?.message ?? null;
}
