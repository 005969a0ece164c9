/**
 * A version's storage in the catalog database: its own table `job_v<id>` attached to the
 * partitioned `job`, the reader index, and the removal of a version's rows (table, staged listing).
 * Identifiers are escaped with pg-format's %I; values are parameters.
 */
import format from 'pg-format';
import type { Pool } from 'pg';
import type { Queryable } from '../db';
import { settleAll, withLongSession } from '../db';

/**
 * Name of the table holding one version's rows: `job_v<id>`.
 * @throws Error when `versionId` is not decimal digits (it becomes an identifier).
 */
export function partitionName(versionId: string): string {
  if (!/^\d+$/.test(versionId)) throw new Error(`invalid version id ${JSON.stringify(versionId)}`);
  return `job_v${versionId}`;
}

/**
 * Creates the version's standalone table with `CHECK (version_id = n)` and its primary key, then
 * attaches it to `job` (SHARE UPDATE EXCLUSIVE on the parent: readers are not blocked). No other
 * index while pages load: pages only COPY; the paging-key and reader indexes are built at seal
 * ({@link createReaderIndex}).
 * Idempotent.
 * @returns the table's name.
 */
export async function createVersionPartition(db: Queryable, versionId: string): Promise<string> {
  const table = partitionName(versionId);
  if (await partitionExists(db, versionId)) return table;
  await db.query(format('CREATE TABLE %I (LIKE job INCLUDING DEFAULTS)', table));
  await db.query(
    format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (version_id = %s)', table, `${table}_version`, versionId),
  );
  await db.query(format('ALTER TABLE %I ADD PRIMARY KEY (version_id, job_id)', table));
  await db.query(format('ALTER TABLE job ATTACH PARTITION %I FOR VALUES IN (%s)', table, versionId));
  return table;
}

/** Whether the version's table exists (attached or not). */
export async function partitionExists(db: Queryable, versionId: string): Promise<boolean> {
  const r = await db.query(`SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r'`, [partitionName(versionId)]);
  return !!r.rowCount;
}

/**
 * Creates the reader index (client, start time) on one session and the paging-key index (job_key)
 * on a second, side by side (`CREATE INDEX` takes the table's SHARE lock, which does not conflict
 * with itself), then `ANALYZE`s the table (its SHARE UPDATE EXCLUSIVE lock waits for both builds);
 * each on a session without statement timeout (they grow with the table; the sessions are
 * discarded afterwards). Built one after the other, the key index ran on one core after the reader
 * index while the other had finished its work (docs/performance.md). Idempotent.
 * @throws the first database error, once both builds have ended.
 */
export async function createReaderIndex(pool: Pool, versionId: string): Promise<void> {
  const table = partitionName(versionId);
  const build = (name: string, columns: string) =>
    withLongSession(pool, (c) => c.query(format('CREATE INDEX IF NOT EXISTS %I ON %I (%s)', name, table, columns)));
  // The paging key: a refresh built on this version finds (and supersedes) its jobs by key.
  await settleAll([build(`${table}_client_start`, 'client, start_time'), build(`${table}_job_key`, 'job_key')]);
  await withLongSession(pool, (c) => c.query(format('ANALYZE %I', table)));
}

/**
 * Detaches the version's table from `job` and drops it ({@link detachAndDropTable}).
 * @returns false when the table was already gone (nothing done), true when it was dropped now.
 * @throws the database error of the detach or drop (lock_timeout 55P03 is retryable).
 */
export async function detachAndDropPartition(pool: Pool, versionId: string): Promise<boolean> {
  return detachAndDropTable(pool, 'job', partitionName(versionId));
}

/**
 * Detaches `table` from the partitioned `parent` (`DETACH PARTITION … CONCURRENTLY`, lock_timeout
 * 5 s, outside any transaction; a pending detach of an interrupted attempt is finished with
 * `FINALIZE`) and drops it, on a session of its own without statement timeout (discarded
 * afterwards). The one removal of a version's tables (`job_v<id>`, `file_v<id>`).
 * @returns false when the table was already gone (nothing done), true when it was dropped now.
 * @throws the database error of the detach or drop (lock_timeout 55P03 is retryable).
 */
export async function detachAndDropTable(pool: Pool, parent: string, table: string): Promise<boolean> {
  const exists = await pool.query(`SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r'`, [table]);
  if (!exists.rowCount) return false;
  const attached = await pool.query(
    `SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE c.relname = $1`,
    [table],
  );
  await withLongSession(pool, async (client) => {
    await client.query(`SET lock_timeout = '5s'`);
    try {
      if (attached.rowCount)
        await client.query(format('ALTER TABLE %I DETACH PARTITION %I CONCURRENTLY', parent, table));
    } catch (err) {
      // A pending detach from an interrupted attempt is finished by FINALIZE.
      if (!/pending detach|FINALIZE/i.test((err as Error).message)) throw err;
      await client.query(format('ALTER TABLE %I DETACH PARTITION %I FINALIZE', parent, table));
    }
    await client.query(format('DROP TABLE IF EXISTS %I', table));
  });
  return true;
}

/**
 * Versions of a catalog marked dropped whose table is still there though no version uses it as a
 * segment (an interrupted drop); `$1` is the catalog.
 */
const LEFTOVER_TABLES_SQL = `SELECT version_id::text FROM version v WHERE catalog_name = $1 AND status = 'dropped'
     AND EXISTS (SELECT 1 FROM pg_class c WHERE c.relname = 'job_v' || v.version_id::text AND c.relkind = 'r')
     AND NOT EXISTS (SELECT 1 FROM version x WHERE x.segment_ids @> ARRAY[v.version_id])`;

/** Ids of the versions of `catalog` marked `dropped` whose table is still there (an interrupted drop). */
export async function leftoverVersionIds(db: Queryable, catalog: string): Promise<string[]> {
  const { rows } = await db.query<{ version_id: string }>(LEFTOVER_TABLES_SQL, [catalog]);
  return rows.map((r) => r.version_id);
}

/**
 * Ids of the versions of `catalog` whose rows can go when a rebuild is planned: `abandoned` and
 * `failed` versions, and leftovers of an interrupted drop; ordered by id as text.
 */
export async function unpublishableVersionIds(db: Queryable, catalog: string): Promise<string[]> {
  const { rows } = await db.query<{ version_id: string }>(
    `SELECT version_id::text FROM version WHERE catalog_name = $1 AND status IN ('abandoned', 'failed')
           UNION ${LEFTOVER_TABLES_SQL} ORDER BY 1`,
    [catalog],
  );
  return rows.map((r) => r.version_id);
}

/** Deletes the staged listing records of one version, and its listings' file statistics. */
export async function deleteStagedRecords(db: Queryable, versionId: string): Promise<void> {
  await db.query(`DELETE FROM staged_record WHERE version_id = $1`, [versionId]);
  await db.query(`DELETE FROM listing_file_stat WHERE version_id = $1`, [versionId]);
}

/**
 * Deletes the staged listing records (and listings' file statistics) of the versions of `catalog`
 * that are published, retired or dropped (a listing is only read while its version is built and verified).
 */
export async function deleteStagedRecordsOfFinishedVersions(db: Queryable, catalog: string): Promise<void> {
  await db.query(
    `DELETE FROM staged_record s USING version v
           WHERE s.version_id = v.version_id AND v.catalog_name = $1 AND v.status IN ('active', 'retired', 'dropped')`,
    [catalog],
  );
  await db.query(
    `DELETE FROM listing_file_stat s USING version v
           WHERE s.version_id = v.version_id AND v.catalog_name = $1 AND v.status IN ('active', 'retired', 'dropped')`,
    [catalog],
  );
}

/**
 * Creates the paging-key index (`job_key`) of the version's table unless it exists, on a session
 * without statement timeout: only repairs read and delete by job-id span, so the first repair of a
 * version builds it (a rebuild without repairs never pays for it). Of two repairs racing to build
 * it, the one that commits second meets a duplicate name (23505 or 42P07) and goes on: it exists.
 */
export async function ensurePagingKeyIndex(pool: Pool, versionId: string): Promise<void> {
  const table = partitionName(versionId);
  await withLongSession(pool, async (c) => {
    try {
      await c.query(format('CREATE INDEX IF NOT EXISTS %I ON %I (job_key)', `${table}_job_key`, table));
    } catch (err) {
      // Another repair built it at the same time and committed first: the index exists.
      const code = (err as { code?: unknown } | null)?.code;
      if (code !== '23505' && code !== '42P07') throw err;
    }
  });
}
