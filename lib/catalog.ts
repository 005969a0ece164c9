/**
 * Catalog-side SQL: version partitions, page writes, checksums, bucket statistics, events.
 * Identifiers are escaped with pg-format's %I; values are always parameters.
 */
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import format from 'pg-format';
import { Pool, PoolClient } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { BucketStat, JOB_COLUMNS, SourceRow } from './sources/types';
import type { RejectRecord } from './validate';
import { copyValue, utcText } from './text-form';
import { CATALOG_FINGERPRINT_ROW } from './fingerprint';

type Queryable = Pool | PoolClient;

/** Name of the table holding one version's rows: `job_v<id>`. */
export function partitionName(versionId: string): string {
  if (!/^\d+$/.test(versionId)) throw new Error(`invalid version id ${JSON.stringify(versionId)}`);
  return `job_v${versionId}`;
}


/** SELECT list that renders catalog rows in the SourceRow text form (for field-by-field comparison). */
export const CATALOG_ROW_AS_TEXT = `
  t.job_key::text AS job_key, t.job_id, t.job, t.job_name, t.client, t.type, t.level, t.status,
  ${utcText('t.sched_time')} AS sched_time, ${utcText('t.start_time')} AS start_time,
  ${utcText('t.end_time')} AS end_time, ${utcText('t.real_end_time')} AS real_end_time,
  t.files::text AS files, t.bytes::text AS bytes, t.read_bytes::text AS read_bytes,
  t.job_errors::text AS job_errors, t.pool, t.fileset, t.prior_job_id, t.job_tdate::text AS job_tdate,
  t.vol_session_id::text AS vol_session_id, t.vol_session_time::text AS vol_session_time,
  t.comment, t.bucket::text AS bucket, t.extra::text AS extra`;

/**
 * Creates the version's standalone table with `CHECK (version_id = n)`, its primary key and an
 * index on the paging key (`job_key`, read by each page's range checksum), then attaches it to
 * `job` (SHARE UPDATE EXCLUSIVE on the parent: readers are not blocked).
 * Idempotent.
 */
export async function createVersionPartition(db: Queryable, versionId: string): Promise<string> {
  const table = partitionName(versionId);
  const exists = await db.query(`SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r'`, [table]);
  if (exists.rowCount) return table;
  await db.query(format('CREATE TABLE %I (LIKE job INCLUDING DEFAULTS)', table));
  await db.query(format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (version_id = %s)', table, `${table}_version`, versionId));
  await db.query(format('ALTER TABLE %I ADD PRIMARY KEY (version_id, job_id)', table));
  // The page checksum reads the page's key range: without this index every page would scan the
  // whole partition (quadratic in the job count; docs/performance.md).
  await db.query(format('CREATE INDEX %I ON %I (job_key)', `${table}_job_key`, table));
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
  extra: 'jsonb',
};

const UPDATABLE = JOB_COLUMNS.filter((c) => c !== 'job_id');

/**
 * Upserts rows keyed by (version, job id), replacing the full record. A row found identical is
 * neither rewritten nor locked: identical rows are filtered out (NOT EXISTS on the primary key)
 * before `ON CONFLICT DO UPDATE`, which would otherwise lock every conflicting row (a WAL record
 * and a dirtied heap page per row, a full-page image after a checkpoint) even when its `WHERE`
 * refuses the update. A replayed page therefore writes only its ledger row. Values travel as text
 * arrays through `unnest`. Rows must be unique by job_id (ON CONFLICT cannot affect a row twice in
 * one command).
 * @returns rows inserted or changed.
 */
export async function upsertRows(db: Queryable, versionId: string, pageNo: number, rows: SourceRow[]): Promise<number> {
  if (!rows.length) return 0;
  const table = partitionName(versionId);
  const arrays = JOB_COLUMNS.map((c) => rows.map((r) => r[c]));
  const unnestArgs = JOB_COLUMNS.map((_, i) => `$${i + 3}::text[]`).join(', ');
  const selectList = JOB_COLUMNS.map((c) => (CASTS[c] ? `u.${c}::${CASTS[c]} AS ${c}` : `u.${c}`)).join(', ');
  const sql = format(
    `INSERT INTO %I AS t (version_id, page_no, %I)
     SELECT $1::bigint, $2::integer, s.* FROM (SELECT ${selectList} FROM unnest(${unnestArgs}) AS u(%I)) AS s
     WHERE NOT EXISTS (SELECT 1 FROM %I AS x WHERE x.version_id = $1::bigint AND x.job_id = s.job_id
                       AND (%s) IS NOT DISTINCT FROM (%s))
     ON CONFLICT (version_id, job_id) DO UPDATE SET page_no = EXCLUDED.page_no, %s
     WHERE (%s) IS DISTINCT FROM (%s)`,
    table,
    JOB_COLUMNS,
    JOB_COLUMNS,
    table,
    UPDATABLE.map((c) => `x.${c}`).join(', '),
    UPDATABLE.map((c) => `s.${c}`).join(', '),
    UPDATABLE.map((c) => format('%I = EXCLUDED.%I', c, c)).join(', '),
    UPDATABLE.map((c) => `t.${c}`).join(', '),
    UPDATABLE.map((c) => `EXCLUDED.${c}`).join(', '),
  );
  const res = await db.query(sql, [versionId, pageNo, ...arrays]);
  return res.rowCount ?? 0;
}

/**
 * Inserts rows with `COPY … FROM STDIN` (text format) into the version's table: about twice as fast
 * as the unnest upsert for a page, in the database and in the worker (docs/performance.md). Only for
 * rows that cannot exist yet: a duplicate key fails the COPY with SQLSTATE 23505 (see
 * {@link copyOrUpsertRows}). Rows must be unique by job_id.
 * @returns rows inserted.
 */
export async function copyRows(db: PoolClient, versionId: string, pageNo: number, rows: SourceRow[]): Promise<number> {
  if (!rows.length) return 0;
  const stream = db.query(copyFrom(format('COPY %I (version_id, page_no, %I) FROM STDIN', partitionName(versionId), JOB_COLUMNS)));
  const done = finished(stream);
  done.catch(() => undefined); // awaited below; never an unhandled rejection
  const prefix = `${versionId}\t${pageNo}`;
  let chunk = '';
  for (const r of rows) {
    let line = prefix;
    for (const c of JOB_COLUMNS) line += `\t${copyValue(r[c])}`;
    chunk += `${line}\n`;
    if (chunk.length >= 65_536) {
      const more = stream.write(chunk);
      chunk = '';
      if (!more) await Promise.race([once(stream, 'drain'), done]);
    }
  }
  stream.end(chunk);
  await done;
  return stream.rowCount;
}

/**
 * The first attempt at a page of a fresh version: `COPY` (no other attempt can have committed these
 * keys: the ledger row inserted first serialises attempts), inside a savepoint; should a row exist
 * after all (a page replayed by hand as attempt 1), the savepoint is rolled back and the rows are
 * upserted instead, so the outcome is the same as {@link upsertRows}.
 * Must run inside a transaction.
 * @returns rows inserted or changed, and which write was used.
 */
export async function copyOrUpsertRows(db: PoolClient, versionId: string, pageNo: number, rows: SourceRow[]): Promise<{ rows: number; method: 'copy' | 'upsert' }> {
  if (!rows.length) return { rows: 0, method: 'copy' };
  await db.query('SAVEPOINT page_copy');
  try {
    const n = await copyRows(db, versionId, pageNo, rows);
    await db.query('RELEASE SAVEPOINT page_copy');
    return { rows: n, method: 'copy' };
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code !== '23505') throw err;
    await db.query('ROLLBACK TO SAVEPOINT page_copy');
    return { rows: await upsertRows(db, versionId, pageNo, rows), method: 'upsert' };
  }
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

/**
 * Per-bucket counts and fingerprints of a version: its rows together with its quarantined records
 * (`reject`, with the bucket and fingerprint input the source gave them), so that for every bucket
 * source = catalog + rejects. Same definition as the sources'.
 */
export async function catalogBucketStats(db: Queryable, versionId: string): Promise<BucketStat[]> {
  // A reject's bytes are the last field of its fingerprint input (job ids may hold '|').
  const { rows } = await db.query<{ bucket: string | null; count: string; fingerprint: string; bytes: string }>(
    format(
      `SELECT s.bucket::text AS bucket, count(*)::text AS count, md5(string_agg(s.fp, E'\\n' ORDER BY s.k)) AS fingerprint,
              coalesce(sum(s.bytes), 0)::text AS bytes
       FROM (SELECT t.bucket, t.job_key AS k, ${CATALOG_FINGERPRINT_ROW} AS fp, t.bytes FROM %I t
             UNION ALL
             SELECT r.bucket, r.job_key, r.fingerprint_row,
                    CASE WHEN substring(r.fingerprint_row FROM '[|]([^|]*)$') ~ '^-?[0-9]+$'
                         THEN substring(r.fingerprint_row FROM '[|]([^|]*)$')::numeric END
             FROM reject r WHERE r.version_id = %s) s
       GROUP BY 1 ORDER BY 1 NULLS FIRST`,
      partitionName(versionId),
      versionId,
    ),
  );
  return rows.map((r) => ({ bucket: r.bucket, count: Number(r.count), fingerprint: r.fingerprint, bytes: r.bytes }));
}

/**
 * Records quarantined records of a page (or a repaired bucket) in `reject`, one per (version,
 * paging key): a later attempt or repair replaces the reason and raw record.
 * @returns rejects written.
 */
export async function writeRejects(db: Queryable, versionId: string, pageNo: number, records: RejectRecord[]): Promise<number> {
  // One row per paging key (the last one given wins): ON CONFLICT cannot affect a row twice.
  const rejects = [...new Map(records.map((r) => [r.jobKey, r])).values()];
  if (!rejects.length) return 0;
  const res = await db.query(
    `INSERT INTO reject (version_id, page_no, job_key, job_id, bucket, fingerprint_row, reason, raw)
     SELECT $1::bigint, $2::integer, u.k::bigint, u.id, u.b::date, u.fp, u.reason, u.raw
     FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[]) AS u(k, id, b, fp, reason, raw)
     ON CONFLICT (version_id, job_key) DO UPDATE
       SET page_no = EXCLUDED.page_no, job_id = EXCLUDED.job_id, bucket = EXCLUDED.bucket,
           fingerprint_row = EXCLUDED.fingerprint_row, reason = EXCLUDED.reason, raw = EXCLUDED.raw, created_at = now()`,
    [
      versionId,
      pageNo,
      rejects.map((r) => r.jobKey),
      rejects.map((r) => r.jobId),
      rejects.map((r) => r.bucket),
      rejects.map((r) => r.fingerprintRow),
      rejects.map((r) => r.reason),
      rejects.map((r) => r.raw),
    ],
  );
  return res.rowCount ?? 0;
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
