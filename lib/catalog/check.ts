/**
 * Reads behind the backup check (`catalog-rebuild check`): the active version of a catalog and,
 * per client in scope, whether its newest backups in `active_jobs` are recent enough. Both come
 * from one read-only, repeatable-read transaction, so the pointer and the rows are one snapshot and
 * a rebuild in progress is invisible until its publish. Works with the `catalog_reader` role, which
 * may read `active_jobs` and nothing else.
 */
import type { PoolClient } from 'pg';

/** What {@link readBackupCheck} reads. */
export interface BackupCheckQuery {
  /** Catalog name. */
  catalog: string;
  /** A backup (`T`, or a warning backup: `W`, `T` with `JobErrors` > 0) at most this old counts (seconds). */
  maxAgeSeconds: number;
  /** Without `clients`: a non-empty client with a backup job in this window is in scope (seconds). */
  lookbackSeconds: number;
  /** Clients in scope (exact names, without duplicates); empty: every client with a backup job in the lookback. */
  clients: string[];
  /** Reference time (ISO 8601 with a zone) instead of the database's `now()`; null for `now()`. */
  now: string | null;
}

/** One client in scope, as {@link readBackupCheck} returns it. Only backup jobs (type `B`) count. */
export interface ClientBackupRow {
  /** Client name. */
  client: string;
  /** Some backup with status `T` and no `JobErrors` started (else ended) within the maximum age. */
  hasGoodBackup: boolean;
  /** Some backup with status `W`, or `T` with `JobErrors` > 0, started (else ended) within the maximum age. */
  hasWarningBackup: boolean;
  /** Seconds (fractional; negative when the backup is after the reference time) since the newest `T` or `W` backup of any age; null when there is none. */
  newestAgeSeconds: number | null;
}

/** Result of {@link readBackupCheck}. */
export interface BackupCheckSnapshot {
  /** Active version of the catalog (decimal text); null when it has none (then `clients` is empty). */
  versionId: string | null;
  /** Clients in scope ordered by name; a client asked for without any backup job has a row too. */
  clients: ClientBackupRow[];
}

/**
 * Reads the active version from the `active` pointer, which tells "no active version" from "active
 * but empty". A role that may not read the pointer (SQLSTATE 42501, e.g. `catalog_reader`) falls
 * back to `active_jobs`: then a catalog without rows there counts as not active.
 * Runs inside the caller's transaction (uses a savepoint).
 */
async function readActiveVersionForCheck(db: PoolClient, catalog: string): Promise<string | null> {
  await db.query('SAVEPOINT pointer');
  try {
    const a = await db.query<{ version_id: string }>(`SELECT version_id::text FROM active WHERE catalog_name = $1`, [
      catalog,
    ]);
    await db.query('RELEASE SAVEPOINT pointer');
    return a.rows[0]?.version_id ?? null;
  } catch (err) {
    if ((err as { code?: string }).code !== '42501') throw err;
    await db.query('ROLLBACK TO SAVEPOINT pointer');
  }
  const v = await db.query<{ version_id: string }>(
    `SELECT version_id::text FROM active_jobs WHERE catalog_name = $1 LIMIT 1`,
    [catalog],
  );
  return v.rows[0]?.version_id ?? null;
}

/** SQL over a backup `b`: it terminated normally without errors (`T`, `JobErrors` 0 or unknown). */
const GOOD = `(b.status = 'T' AND coalesce(b.job_errors, 0) = 0)`;

/**
 * SQL over a backup `b`: it terminated with warnings. Bareos writes `W`; Bacula 9.6 never does: its
 * "Backup OK -- with warnings" is `T` with `JobErrors` > 0.
 */
const WARNING = `(b.status = 'W' OR (b.status = 'T' AND b.job_errors > 0))`;

/**
 * Per client in scope: a good backup ({@link GOOD}) and a warning backup ({@link WARNING}) within
 * the maximum age, and the age of the newest `T` or `W` backup. The time of a job is its start time,
 * else its end time. Runs inside the caller's transaction.
 */
async function readClientBackups(db: PoolClient, q: BackupCheckQuery): Promise<ClientBackupRow[]> {
  const { rows } = await db.query<{ client: string; ok: boolean; warn: boolean; age: number | null }>(
    `WITH ref AS (SELECT coalesce($2::timestamptz, now()) AS now),
     b AS (
       SELECT j.client, j.status, j.job_errors, coalesce(j.start_time, j.end_time) AS t
       FROM active_jobs j
       WHERE j.catalog_name = $1 AND j.type = 'B'
     ),
     scope AS (
       SELECT DISTINCT c AS client FROM unnest($5::text[]) AS c WHERE cardinality($5::text[]) > 0
       UNION
       SELECT DISTINCT b.client FROM b
       WHERE cardinality($5::text[]) = 0 AND b.client <> '' AND b.t >= (SELECT now FROM ref) - make_interval(secs => $4)
     )
     SELECT s.client,
            coalesce(bool_or(${GOOD} AND b.t >= ref.now - make_interval(secs => $3)), false) AS ok,
            coalesce(bool_or(${WARNING} AND b.t >= ref.now - make_interval(secs => $3)), false) AS warn,
            extract(epoch FROM ref.now - max(b.t) FILTER (WHERE b.status IN ('T', 'W')))::float8 AS age
     FROM scope s CROSS JOIN ref LEFT JOIN b ON b.client = s.client
     GROUP BY s.client, ref.now
     ORDER BY s.client`,
    [q.catalog, q.now, q.maxAgeSeconds, q.lookbackSeconds, q.clients],
  );
  return rows.map((r) => ({
    client: r.client,
    hasGoodBackup: r.ok,
    hasWarningBackup: r.warn,
    newestAgeSeconds: r.age,
  }));
}

/**
 * Reads the backup check's snapshot of a catalog in one read-only, repeatable-read transaction on
 * `db`: the active version, then (when there is one) the clients in scope with their backups.
 * @param db a connected client on the catalog database, outside any transaction.
 * @param q catalog, limits (seconds), clients and reference time.
 * @throws the database error of any statement, after rolling the transaction back (when the
 *   rollback fails too, the connection is unusable: the caller should destroy it on any error).
 */
export async function readBackupCheck(db: PoolClient, q: BackupCheckQuery): Promise<BackupCheckSnapshot> {
  try {
    await db.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const versionId = await readActiveVersionForCheck(db, q.catalog);
    const clients = versionId ? await readClientBackups(db, q) : [];
    await db.query('COMMIT');
    return { versionId, clients };
  } catch (err) {
    await db.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
