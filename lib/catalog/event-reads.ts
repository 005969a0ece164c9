/**
 * Reads of a catalog's event log (`event` table) for the CLI: the newest entries, the last
 * message and the renumbered job names a publish recorded. Events are written by the worker
 * (`recordEvent`); nothing here writes.
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
 * Whether the catalog has any version row (of any status) in this catalog database.
 * @param db pool or client on the catalog database.
 * @param catalog catalog name.
 */
export async function catalogHasVersion(db: Queryable, catalog: string): Promise<boolean> {
  const { rows } = await db.query<{ found: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM version WHERE catalog_name = $1) AS found`,
    [catalog],
  );
  return rows[0].found;
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

/** Job names whose job id changed at a publish, as recorded in the `published` event's details. */
export interface RenumberedJobsReport {
  /** Job names reported, sorted by name (at most 100): `job` is the Bareos unique job name. */
  jobs: { job: string; previousJobId: string; jobId: string }[];
  /** More job names were renumbered than `jobs` lists. */
  truncated: boolean;
}

/**
 * The renumbered job names recorded in a `published` event's details (`renumberedJobs`,
 * `renumberedJobsTruncated`, written by the publish); entries of another shape are skipped.
 * @returns the report, or null when the details record none.
 */
export function renumberedJobsOf(details: Record<string, unknown> | null | undefined): RenumberedJobsReport | null {
  const list = details?.renumberedJobs;
  if (!Array.isArray(list)) return null;
  const jobs = list
    .filter(
      (j): j is { job: string; previousJobId: string; jobId: string } =>
        typeof j === 'object' &&
        j !== null &&
        typeof (j as Record<string, unknown>).job === 'string' &&
        typeof (j as Record<string, unknown>).previousJobId === 'string' &&
        typeof (j as Record<string, unknown>).jobId === 'string',
    )
    .map((j) => ({ job: j.job, previousJobId: j.previousJobId, jobId: j.jobId }));
  if (!jobs.length) return null;
  return { jobs, truncated: details?.renumberedJobsTruncated === true };
}

/** The details of the newest `published` event of `versionId` of `catalog`, or null when it was never published. */
async function publishedDetails(
  db: Queryable,
  catalog: string,
  versionId: string,
): Promise<Record<string, unknown> | null> {
  const { rows } = await db.query<{ details: Record<string, unknown> }>(
    `SELECT details FROM event WHERE catalog_name = $1 AND version_id = $2 AND kind = 'published'
     ORDER BY event_id DESC LIMIT 1`,
    [catalog, versionId],
  );
  return rows[0]?.details ?? null;
}

/**
 * Reads the renumbered job names recorded when `versionId` of `catalog` was published (the newest
 * `published` event of that version).
 * @param db pool or client on the catalog database.
 * @returns the report, or null when the version was never published or no job was renumbered.
 */
export async function readRenumberedJobs(
  db: Queryable,
  catalog: string,
  versionId: string,
): Promise<RenumberedJobsReport | null> {
  return renumberedJobsOf(await publishedDetails(db, catalog, versionId));
}

/** The director's prunes a publish reported: jobs whose file records it purged since `since`, and the records. */
export interface PrunedFilesReport {
  jobs: number;
  records: number;
  /** The version they were counted against (the one the publish replaced). */
  since: string;
}

/**
 * The director's prunes recorded in a `published` event's details (`prunedFiles`, written by the
 * publish); null when the details record none (or in another shape).
 */
export function prunedFilesOf(details: Record<string, unknown> | null | undefined): PrunedFilesReport | null {
  const p = details?.prunedFiles as Partial<PrunedFilesReport> | undefined;
  if (!p || typeof p.jobs !== 'number' || typeof p.records !== 'number' || typeof p.since !== 'string') return null;
  return { jobs: p.jobs, records: p.records, since: p.since };
}

/** What a publish recorded of its version: the renumbered job ids and the director's prunes. */
export interface PublishReport {
  renumbered: RenumberedJobsReport | null;
  prunedFiles: PrunedFilesReport | null;
}

/**
 * Reads what was recorded when `versionId` of `catalog` was published (the newest `published`
 * event of that version), in one statement.
 * @returns both parts null when the version was never published or recorded neither.
 */
export async function readPublishReport(db: Queryable, catalog: string, versionId: string): Promise<PublishReport> {
  const details = await publishedDetails(db, catalog, versionId);
  return { renumbered: renumberedJobsOf(details), prunedFiles: prunedFilesOf(details) };
}

/**
 * The report of the director's prunes since `previous`: `files of 1 job pruned by the director since
 * version 3: 2,930 records`; null when none.
 */
export function prunedFilesSentence(p: { jobs: number; records: number } | null, previous: string): string | null {
  if (!p?.jobs) return null;
  return `files of ${p.jobs.toLocaleString('en-US')} job${p.jobs === 1 ? '' : 's'} pruned by the director since version ${previous}: ${p.records.toLocaleString('en-US')} record${p.records === 1 ? '' : 's'}`;
}

/** The newest event of one kind of a catalog, as {@link newestEventAges} returns it. */
export interface EventAge {
  catalog: string;
  /** Seconds since the event was recorded, by the database's clock. */
  ageSeconds: number;
}

/**
 * For each catalog with a published version and an event of `kind`, the age of its newest one (e.g.
 * `scheduled_refresh_done`: the last successful scheduled refresh). Per catalog, the event index is
 * read newest first until the first event of that kind.
 * @param db pool or client on the catalog database.
 */
export async function newestEventAges(db: Queryable, kind: string): Promise<EventAge[]> {
  const { rows } = await db.query<{ catalog: string; age: number }>(
    `SELECT a.catalog_name AS catalog, extract(epoch FROM clock_timestamp() - e.created_at)::float8 AS age
       FROM active a
       CROSS JOIN LATERAL (SELECT created_at FROM event
                            WHERE catalog_name = a.catalog_name AND kind = $1
                            ORDER BY event_id DESC LIMIT 1) e`,
    [kind],
  );
  return rows.map((r) => ({ catalog: r.catalog, ageSeconds: Math.max(0, Math.round(r.age)) }));
}

/**
 * Whether a RepairBucket rewrote rows of version `versionId` of `catalog` (a `repaired` event): its
 * counts stored at seal may then be stale. Uses the event log's catalog index.
 */
export async function versionWasRepaired(db: Queryable, catalog: string, versionId: string): Promise<boolean> {
  const { rows } = await db.query<{ repaired: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM event WHERE catalog_name = $1 AND version_id = $2 AND kind = 'repaired') AS repaired`,
    [catalog, versionId],
  );
  return rows[0].repaired;
}

/**
 * The report of job ids renumbered at a publish:
 * `N jobs renumbered: the same unique job names now have other job ids (e.g. <job>: 17 → 5000017)`,
 * with the first job name (by name) as the example. The publish records at most 100 names; when it
 * found more, N is written `100+`.
 */
export function renumberedSentence(r: RenumberedJobsReport): string {
  const e = r.jobs[0];
  return (
    `${r.jobs.length}${r.truncated ? '+' : ''} job${r.jobs.length === 1 && !r.truncated ? '' : 's'} renumbered: ` +
    `the same unique job names now have other job ids (e.g. ${e.job}: ${e.previousJobId} → ${e.jobId})`
  );
}
