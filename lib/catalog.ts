/**
 * Catalog-side SQL: version partitions, page writes, checksums, bucket statistics, events.
 * Identifiers are escaped with pg-format's %I; values are always parameters.
 */
import format from 'pg-format';
import { Pool, PoolClient } from 'pg';
import { BucketStat, JOB_COLUMNS, SourceRow } from './sources/types';

type Queryable = Pool | PoolClient;

/** Name of the table holding one version's rows: `job_v<id>`. */
export function partitionName(versionId: string): string {
  if (!/^\d+$/.test(versionId)) throw new Error(`invalid version id ${JSON.stringify(versionId)}`);
  return `job_v${versionId}`;
}

/** Text form of a timestamptz column as a UTC instant, the form sources produce. */
const utcText = (col: string): string => `to_char(${col} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** SELECT list that renders catalog rows in the SourceRow text form (for field-by-field comparison). */
export const CATALOG_ROW_AS_TEXT = `
  t.job_key::text AS job_key, t.job_id, t.job, t.job_name, t.client, t.type, t.level, t.status,
  ${utcText('t.sched_time')} AS sched_time, ${utcText('t.start_time')} AS start_time,
  ${utcText('t.end_time')} AS end_time, ${utcText('t.real_end_time')} AS real_end_time,
  t.files::text AS files, t.bytes::text AS bytes, t.read_bytes::text AS read_bytes,
  t.job_errors::text AS job_errors, t.pool, t.fileset, t.prior_job_id, t.job_tdate::text AS job_tdate,
  t.vol_session_id::text AS vol_session_id, t.vol_session_time::text AS vol_session_time,
  t.comment, t.bucket::text AS bucket`;

/** The fingerprint input of one catalog row; equals the source's for an identical job. */
export const CATALOG_FINGERPRINT_ROW = `t.job_id || '|' || coalesce(t.status, '\\N') || '|' || coalesce(${utcText(
  't.end_time',
)}, '\\N') || '|' || coalesce(t.files::text, '\\N') || '|' || coalesce(t.bytes::text, '\\N')`;

/**
 * Creates the version's standalone table with `CHECK (version_id = n)` and its primary key,
 * then attaches it to `job` (SHARE UPDATE EXCLUSIVE on the parent: readers are not blocked).
 * Idempotent.
 */
export async function createVersionPartition(db: Queryable, versionId: string): Promise<string> {
  const table = partitionName(versionId);
  const exists = await db.query(`SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r'`, [table]);
  if (exists.rowCount) return table;
  await db.query(format('CREATE TABLE %I (LIKE job INCLUDING DEFAULTS)', table));
  await db.query(format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (version_id = %s)', table, `${table}_version`, versionId));
  await db.query(format('ALTER TABLE %I ADD PRIMARY KEY (version_id, job_id)', table));
  await db.query(format('ALTER TABLE job ATTACH PARTITION %I FOR VALUES IN (%s)', table, versionId));
  return table;
}

const CASTS: Record<string, string> = {
  job_key: 'bigint',
  sched_time: 'timestamptz',
  start_time: 'timestamptz',
  end_time: 'timestamptz',
  real_end_time: 'timestamptz',
  files: 'bigint',
  bytes: 'numeric(20,0)',
  read_bytes: 'numeric(20,0)',
  job_errors: 'integer',
  job_tdate: 'bigint',
  vol_session_id: 'bigint',
  vol_session_time: 'bigint',
  bucket: 'date',
};

const UPDATABLE = JOB_COLUMNS.filter((c) => c !== 'job_id');

/**
 * Upserts rows keyed by (version, job id), replacing the full record; a row found identical is
 * not rewritten (no dead tuple, no WAL). Values travel as text arrays through `unnest`.
 * Rows must be unique by job_id (ON CONFLICT cannot affect a row twice in one command).
 * @returns rows inserted or changed.
 */
export async function upsertRows(db: Queryable, versionId: string, pageNo: number, rows: SourceRow[]): Promise<number> {
  if (!rows.length) return 0;
  const table = partitionName(versionId);
  const arrays = JOB_COLUMNS.map((c) => rows.map((r) => r[c]));
  const unnestArgs = JOB_COLUMNS.map((_, i) => `$${i + 3}::text[]`).join(', ');
  const selectList = JOB_COLUMNS.map((c) => (CASTS[c] ? `u.${c}::${CASTS[c]}` : `u.${c}`)).join(', ');
  const sql = format(
    `INSERT INTO %I AS t (version_id, page_no, %I)
     SELECT $1::bigint, $2::integer, ${selectList}
     FROM unnest(${unnestArgs}) AS u(%I)
     ON CONFLICT (version_id, job_id) DO UPDATE SET page_no = EXCLUDED.page_no, %s
     WHERE (%s) IS DISTINCT FROM (%s)`,
    table,
    JOB_COLUMNS,
    JOB_COLUMNS,
    UPDATABLE.map((c) => format('%I = EXCLUDED.%I', c, c)).join(', '),
    UPDATABLE.map((c) => `t.${c}`).join(', '),
    UPDATABLE.map((c) => `EXCLUDED.${c}`).join(', '),
  );
  const res = await db.query(sql, [versionId, pageNo, ...arrays]);
  return res.rowCount ?? 0;
}

/**
 * Row count and md5 of the catalog rows with keys in [firstKey, lastKey], in key order.
 * The checksum covers every field, so a replay that changes nothing leaves it equal.
 */
export async function rangeChecksum(
  db: Queryable,
  versionId: string,
  firstKey: string,
  lastKey: string,
): Promise<{ rows: number; checksum: string }> {
  const { rows } = await db.query<{ rows: number; checksum: string }>(
    format(
      `SELECT count(*)::int AS rows, md5(coalesce(string_agg(s::text, E'\\n' ORDER BY s.k), '')) AS checksum
       FROM (SELECT t.job_key AS k, ${CATALOG_ROW_AS_TEXT} FROM %I t
             WHERE t.job_key BETWEEN $1::bigint AND $2::bigint) s`,
      partitionName(versionId),
    ),
    [firstKey, lastKey],
  );
  return rows[0];
}

/** Per-bucket counts and fingerprints of a version's rows (same definition as the source's). */
export async function catalogBucketStats(db: Queryable, versionId: string): Promise<BucketStat[]> {
  const { rows } = await db.query<{ bucket: string | null; count: string; fingerprint: string }>(
    format(
      `SELECT t.bucket::text AS bucket, count(*)::text AS count,
              md5(string_agg(${CATALOG_FINGERPRINT_ROW}, E'\\n' ORDER BY t.job_key)) AS fingerprint
       FROM %I t GROUP BY 1 ORDER BY 1 NULLS FIRST`,
      partitionName(versionId),
    ),
  );
  return rows.map((r) => ({ bucket: r.bucket, count: Number(r.count), fingerprint: r.fingerprint }));
}

/** One entry of a catalog's event log. */
export interface CatalogEvent {
  catalog: string;
  versionId: string | null;
  /** Stable kind: planned, page_retry, reconciled, repaired, published, retired, abandoned, failed, … */
  kind: string;
  message: string;
  details?: Record<string, unknown>;
}

/** Appends an event to the catalog's event log. */
export async function recordEvent(db: Queryable, e: CatalogEvent): Promise<void> {
  await db.query(`INSERT INTO event (catalog_name, version_id, kind, message, details) VALUES ($1, $2, $3, $4, $5)`, [
    e.catalog,
    e.versionId,
    e.kind,
    e.message,
    JSON.stringify(e.details ?? {}),
  ]);
}

/** Advisory lock key serialising plan, publish and rollback of one catalog. */
export const PUBLISH_LOCK_SQL = `SELECT pg_advisory_xact_lock(hashtext('catalog-rebuild:publish:' || $1))`;
