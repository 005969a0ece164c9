/**
 * The catalog side of reconciliation: per-bucket counts and fingerprints of a version (with its
 * quarantined records), duplicate job names, the random sample compared field by field, unknown
 * codes, repeated ids dropped, and the `reconciliation` report of each round.
 */
import type { PoolClient } from 'pg';
import format from 'pg-format';
import type { Queryable } from '../db';
import { bucketDigestSql, CATALOG_FINGERPRINT_ROW, HASH_PROBE_SQL } from '../fingerprint';
import type { RowHashKind } from '../fingerprint';
import type { BucketStat, SourceRow, StatRow } from '../sources/types';
import { toBucketStat } from '../sources/types';
import { CATALOG_ROW_AS_TEXT } from './job-rows';
import { partitionName } from './partitions';

/** Type, level and status codes the product knows (reconcile counts the jobs with any other). */
export interface KnownCodes {
  type: Iterable<string>;
  level: Iterable<string>;
  status: Iterable<string>;
}

/** The catalog side of a reconciliation pass: per-bucket statistics and jobs with an unknown code. */
export interface CatalogStats {
  /** Per bucket, rows plus quarantined records: count, digest, bytes, id span; ordered by bucket, `null` first. */
  buckets: BucketStat[];
  /** Rows with at least one type, level or status code not among the known ones. */
  unknownCodeJobs: number;
}

/** True for a row of `t` with a non-NULL `col` not in the array parameter `param`. */
const unknownCode = (col: string, param: string) =>
  `(t.${col} IS NOT NULL AND NOT (t.${col} = ANY (${param}::text[])))`;

/**
 * Per-bucket counts, digests, bytes and id spans (min/max job key) of a version: its rows together
 * with its quarantined job records (`reject` rows without a record key, with the bucket and
 * fingerprint input the source gave them), so that for every bucket source = catalog + rejects; plus the rows with an unknown code.
 * One statement, one (parallel) scan of the version's table; same digest definition as the
 * sources' (lib/fingerprint.ts). Run it on a session without statement timeout.
 */
export async function catalogBucketStats(
  db: Queryable,
  versionId: string,
  known: KnownCodes,
  hash: RowHashKind = 'md5',
): Promise<CatalogStats> {
  // A reject's bytes are the last field of its fingerprint input (job ids may hold '|').
  const { rows } = await db.query<StatRow & { unknown: string }>(
    format(
      `SELECT s.bucket::text AS bucket, count(*)::text AS count, ${bucketDigestSql('s.fp', hash)} AS fingerprint,
              coalesce(sum(s.bytes), 0)::text AS bytes, min(s.k)::text AS min_key, max(s.k)::text AS max_key,
              count(*) FILTER (WHERE s.unknown)::text AS unknown
       FROM (SELECT t.bucket, t.job_key AS k, ${CATALOG_FINGERPRINT_ROW} AS fp, t.bytes,
                    ${unknownCode('type', '$1')} OR ${unknownCode('level', '$2')} OR ${unknownCode('status', '$3')} AS unknown
             FROM %I t
             UNION ALL
             SELECT r.bucket, r.job_key, r.fingerprint_row,
                    CASE WHEN substring(r.fingerprint_row FROM '[|]([^|]*)$') ~ '^-?[0-9]+$'
                         THEN substring(r.fingerprint_row FROM '[|]([^|]*)$')::numeric END, false
             FROM reject r WHERE r.version_id = %s AND r.record_key IS NULL) s
       GROUP BY 1 ORDER BY 1 NULLS FIRST`,
      partitionName(versionId),
      versionId,
    ),
    [[...known.type], [...known.level], [...known.status]],
  );
  return {
    buckets: rows.map(toBucketStat),
    unknownCodeJobs: rows.reduce((n, r) => n + Number(r.unknown), 0),
  };
}

/**
 * SQL: the job names (`job`) of table `%I` that occur more than once, counted in two stages. First
 * the 64-bit hashes of the names (`hashtextextended`) that occur more than once, by a sort: a hash
 * aggregate of 10^7 distinct names spills to disk. Then, only when there are any, the names of
 * those hashes, so that two names sharing a hash are not counted. Jobs without a name count for none.
 */
const DUPLICATE_JOB_NAMES_SQL = `WITH h AS MATERIALIZED (SELECT hashtextextended(job, 0) AS h FROM %I WHERE job IS NOT NULL
                           GROUP BY 1 HAVING count(*) > 1)
  SELECT (CASE WHEN NOT EXISTS (SELECT 1 FROM h) THEN 0
          ELSE (SELECT count(*) FROM (SELECT job FROM %I WHERE hashtextextended(job, 0) IN (SELECT h FROM h)
                                      GROUP BY job HAVING count(*) > 1) d) END)::text AS n`;

/**
 * Job names (`job`) that occur more than once in a version ({@link DUPLICATE_JOB_NAMES_SQL}), in a
 * transaction of its own on `c` with 64 MB of `work_mem` and sorted groups: at 10^7 distinct
 * names 4.1 s, against 14.2 s for the hash aggregate of the names (docs/performance.md).
 * @throws the database error.
 */
export async function duplicateJobNameCount(c: PoolClient, versionId: string): Promise<number> {
  const table = partitionName(versionId);
  await c.query('BEGIN');
  try {
    await c.query(`SET LOCAL work_mem = '64MB'`);
    await c.query(`SET LOCAL enable_hashagg = off`);
    const dup = await c.query<{ n: string }>(format(DUPLICATE_JOB_NAMES_SQL, table, table));
    await c.query('COMMIT');
    return Number(dup.rows[0].n);
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/**
 * A pseudo-random sample of `size` rows of a version in SourceRow text form (for the field-by-field
 * comparison): the table's blocks are sampled (`TABLESAMPLE SYSTEM`, about 4 × `size` rows by the
 * table's row estimate, all of it when small), the sampled rows ordered by hashtext(job id ||
 * `seed`), and only the `size` first are rendered as text. Reads a share of the table that shrinks as
 * it grows; the same seed on the same table gives the same sample.
 */
export async function sampleCatalogRows(
  db: Queryable,
  versionId: string,
  seed: string,
  size: number,
): Promise<SourceRow[]> {
  const table = partitionName(versionId);
  const est = await db.query<{ n: number }>(
    `SELECT greatest(reltuples, 0)::float8 AS n FROM pg_class WHERE relname = $1`,
    [table],
  );
  const rows = est.rows[0]?.n ?? 0;
  const percent = rows > 0 ? Math.min(100, (400 * size) / rows) : 100;
  const sample = await db.query<SourceRow>(
    format(
      `WITH picked AS (SELECT s.job_id FROM %I s TABLESAMPLE SYSTEM ($3) REPEATABLE (hashtext($1))
                       ORDER BY hashtext(s.job_id || $1::text) LIMIT $2)
       SELECT ${CATALOG_ROW_AS_TEXT} FROM %I t JOIN picked p ON p.job_id = t.job_id AND t.version_id = %s`,
      table,
      table,
      versionId,
    ),
    [seed, size, percent],
  );
  return sample.rows;
}

/** Jobs of a version with one code the product does not know, per field and code. */
export interface UnknownCodeCount {
  field: string;
  code: string;
  jobs: number;
}

/**
 * Type, level and status codes of a version's rows that are not among the known ones, with the
 * number of jobs for each, ordered by field and code.
 */
export async function unknownCodeCounts(
  db: Queryable,
  versionId: string,
  known: KnownCodes,
): Promise<UnknownCodeCount[]> {
  const codes = await db.query<UnknownCodeCount>(
    format(
      `SELECT f.field, f.code, count(*)::int AS jobs FROM %I t
                   CROSS JOIN LATERAL (VALUES ('type', t.type), ('level', t.level), ('status', t.status)) AS f(field, code)
                   WHERE f.code IS NOT NULL AND NOT (f.code = ANY (CASE f.field WHEN 'type' THEN $1::text[] WHEN 'level' THEN $2::text[] ELSE $3::text[] END))
                   GROUP BY 1, 2 ORDER BY 1, 2`,
      partitionName(versionId),
    ),
    [[...known.type], [...known.level], [...known.status]],
  );
  return codes.rows;
}

/** Source records dropped as repeats of a job id: at staging (listings) plus in every committed page. */
export async function duplicateRecordCount(db: Queryable, versionId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT (SELECT source_duplicates FROM version WHERE version_id = $1) + coalesce((SELECT sum(duplicates)::int FROM page WHERE version_id = $1), 0) AS n`,
    [versionId],
  );
  return rows[0].n;
}

/** Stores (or replaces) the report of one reconciliation round; `report` is stored as jsonb. */
export async function saveReconciliation(
  db: Queryable,
  versionId: string,
  round: number,
  ok: boolean,
  report: object,
): Promise<void> {
  await db.query(
    `INSERT INTO reconciliation (version_id, round, ok, report) VALUES ($1, $2, $3, $4)
               ON CONFLICT (version_id, round) DO UPDATE SET ok = EXCLUDED.ok, report = EXCLUDED.report, created_at = now()`,
    [versionId, round, ok, JSON.stringify(report)],
  );
}

/** Whether the latest reconciliation round of a version passed (false when it has none). */
export async function latestReconciliationPassed(db: Queryable, versionId: string): Promise<boolean> {
  const rec = await db.query<{ ok: boolean }>(
    `SELECT ok FROM reconciliation WHERE version_id = $1 ORDER BY round DESC LIMIT 1`,
    [versionId],
  );
  return !!rec.rows[0]?.ok;
}

/** The catalog server's answer to lib/fingerprint.ts HASH_PROBE_SQL. */
export async function catalogHashProbe(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ h: string }>(HASH_PROBE_SQL);
  return rows[0].h;
}
