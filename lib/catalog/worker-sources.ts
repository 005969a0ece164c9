/**
 * The `worker_source` table: which source NAMES each worker of a task queue serves, and when it
 * last said so. Workers record their names at start and every 30 s; `catalog-rebuild start` reads
 * the recent ones to refuse a source no live worker serves. Settings never enter this table.
 */
import type { Queryable } from '../db';

/** Records older than this (days) are removed when a worker of the same task queue records. */
export const WORKER_SOURCE_RETENTION_DAYS = 7;

/** One worker's names, as {@link recordWorkerSources} writes them. */
export interface WorkerSourceRecord {
  taskQueue: string;
  /** The worker's Temporal identity (`<pid>@<host>`). */
  workerIdentity: string;
  /** Source names of the worker's configuration (no settings). */
  sourceNames: readonly string[];
}

/**
 * Records (upserts) the names of one worker's sources with the database's `now()`, and removes the
 * task queue's records older than {@link WORKER_SOURCE_RETENTION_DAYS} days (workers long gone).
 * Does nothing when the worker has no sources.
 * @throws the database error (e.g. 42P01 when the catalog schema predates migration 3).
 */
export async function recordWorkerSources(db: Queryable, r: WorkerSourceRecord): Promise<void> {
  if (!r.sourceNames.length) return;
  await db.query(
    `WITH recorded AS (
       INSERT INTO worker_source (task_queue, worker_identity, source_name, recorded_at)
       SELECT $1, $2, name, now() FROM unnest($3::text[]) AS name
       ON CONFLICT (task_queue, worker_identity, source_name) DO UPDATE SET recorded_at = excluded.recorded_at
       RETURNING 1)
     DELETE FROM worker_source
      WHERE task_queue = $1 AND recorded_at < now() - make_interval(days => $4)`,
    [r.taskQueue, r.workerIdentity, [...new Set(r.sourceNames)], WORKER_SOURCE_RETENTION_DAYS],
  );
}

/**
 * Removes the records of one worker (a clean shutdown), so `start` no longer counts it as serving
 * its sources; a worker that dies without shutting down ages out instead.
 * @throws the database error (e.g. 42P01 when the catalog schema predates migration 3).
 */
export async function forgetWorkerSources(db: Queryable, taskQueue: string, workerIdentity: string): Promise<void> {
  await db.query(`DELETE FROM worker_source WHERE task_queue = $1 AND worker_identity = $2`, [
    taskQueue,
    workerIdentity,
  ]);
}

/**
 * The source names recorded for `taskQueue` by any worker within the last `withinSeconds` seconds
 * (by the database's clock), each once, in no particular order.
 * @throws the database error (42P01 when the catalog schema predates migration 3).
 */
export async function recentWorkerSourceNames(
  db: Queryable,
  taskQueue: string,
  withinSeconds: number,
): Promise<string[]> {
  const { rows } = await db.query<{ source_name: string }>(
    `SELECT DISTINCT source_name FROM worker_source
      WHERE task_queue = $1 AND recorded_at >= now() - make_interval(secs => $2)`,
    [taskQueue, withinSeconds],
  );
  return rows.map((r) => r.source_name);
}

/** The newest record of a task queue: when, and how long ago by the database's clock. */
export interface LastWorkerSourceRecord {
  /** ISO 8601 UTC. */
  recordedAt: string;
  /** Seconds between the record and the database's `now()` (fractional). */
  ageSeconds: number;
}

/**
 * When a worker of `taskQueue` last recorded its source names.
 * @returns null when no worker of the task queue ever recorded (or its records were removed).
 * @throws the database error (42P01 when the catalog schema predates migration 3).
 */
export async function lastWorkerSourceRecord(db: Queryable, taskQueue: string): Promise<LastWorkerSourceRecord | null> {
  const { rows } = await db.query<{ recorded_at: string | null; age: number | null }>(
    `SELECT to_char(max(recorded_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS recorded_at,
            extract(epoch FROM now() - max(recorded_at))::float8 AS age
       FROM worker_source WHERE task_queue = $1`,
    [taskQueue],
  );
  const r = rows[0];
  return r?.recorded_at ? { recordedAt: r.recorded_at, ageSeconds: Number(r.age) } : null;
}
