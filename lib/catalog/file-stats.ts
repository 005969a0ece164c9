/**
 * The catalog side of file reconciliation: per-bucket and per-job counts and order-independent
 * fingerprints of a version's file records together with its quarantined file records, and the
 * shrink guard's file counts per bucket. Same digest definition as the sources' (lib/fingerprint.ts).
 */
import format from 'pg-format';
import type { Pool } from 'pg';
import type { Queryable } from '../db';
import { withLongSession } from '../db';
import type { RowHashKind } from '../fingerprint';
import { bucketDigestSql, fileFingerprintRow } from '../fingerprint';
import type { FileBucketStat, FileJobStat } from '../sources/types';
import { filePartitionName } from './files';
import { partitionName } from './partitions';

export type { FileBucketStat, FileJobStat } from '../sources/types';

/** SQL: the fingerprint input of a catalog file record (alias `t`). */
export const CATALOG_FILE_FINGERPRINT_ROW = fileFingerprintRow({
  fileId: 't.file_id',
  jobId: 't.job_id',
  path: 't.path',
  pathBytes: 't.path_bytes',
  name: 't.name',
  nameBytes: 't.name_bytes',
  fileIndex: 't.file_index',
  deltaSeq: 't.delta_seq',
  lstat: 't.lstat',
  md5: 't.md5',
  listed: { size: 't.size', mode: 't.mode', uid: 't.uid', gid: 't.gid', mtime: 't.mtime' },
});

/**
 * SQL: a version's file records and quarantined file records as `(bucket, job_id, fp)`: the rows of
 * `file_v<id>` with their fingerprint input, and the `reject` rows with a record key with theirs.
 * `filter` restricts both (SQL over the columns `bucket` and `job_id`, unqualified).
 */
function fileInputsSql(versionId: string, filter = 'true'): string {
  return format(
    `SELECT t.bucket, t.job_id, ${CATALOG_FILE_FINGERPRINT_ROW} AS fp FROM %I t WHERE ${filter}
     UNION ALL
     SELECT r.bucket, r.job_id, r.fingerprint_row FROM reject r
     WHERE r.version_id = %s AND r.record_key IS NOT NULL AND ${filter}`,
    filePartitionName(versionId),
    versionId,
  );
}

/**
 * Per bucket, the count and digest of a version's file records plus its quarantined file records,
 * ordered by bucket (`null` first). One statement, one scan of `file_v<id>`, on a session of its
 * own without statement timeout.
 */
export async function fileBucketStats(pool: Pool, versionId: string, kind: RowHashKind): Promise<FileBucketStat[]> {
  const { rows } = await withLongSession(pool, (c) =>
    c.query<{ bucket: string | null; files: string; fingerprint: string }>(
      `SELECT s.bucket::text AS bucket, count(*)::text AS files, ${bucketDigestSql('s.fp', kind)} AS fingerprint
       FROM (${fileInputsSql(versionId)}) s GROUP BY 1 ORDER BY 1 NULLS FIRST`,
    ),
  );
  return rows.map((r) => ({ bucket: r.bucket, files: Number(r.files), fingerprint: r.fingerprint }));
}

/**
 * Per job of `jobIds`, the count and digest of its file records plus its quarantined file records
 * in the version, one entry per distinct job id (jobs without any: 0 and `0`), ordered by job id.
 * Served by the seal's `(job_id, file_id)` index (a scan of the table before it exists); on a
 * session of its own without statement timeout.
 */
export async function fileJobStats(
  pool: Pool,
  versionId: string,
  jobIds: string[],
  kind: RowHashKind,
): Promise<FileJobStat[]> {
  if (!jobIds.length) return [];
  const { rows } = await withLongSession(pool, (c) =>
    c.query<{ job_id: string; files: string; fingerprint: string }>(
      `SELECT j.job_id, coalesce(s.files, 0)::text AS files, coalesce(s.fingerprint, '0') AS fingerprint
       FROM (SELECT DISTINCT unnest($1::text[]) AS job_id) j
       LEFT JOIN (SELECT s.job_id, count(*) AS files, ${bucketDigestSql('s.fp', kind)} AS fingerprint
                  FROM (${fileInputsSql(versionId, 'job_id = ANY($1::text[])')}) s GROUP BY 1) s ON s.job_id = j.job_id
       ORDER BY 1`,
      [jobIds],
    ),
  );
  return rows.map((r) => ({ jobId: r.job_id, files: Number(r.files), fingerprint: r.fingerprint }));
}

/** The file tables (`file_v<s>`) of version `versionId`'s segments that exist, by segment. */
async function segmentFileTables(db: Queryable, versionId: string): Promise<string[]> {
  const { rows } = await db.query<{ t: string }>(
    `SELECT c.relname AS t FROM version v, unnest(v.segment_ids) s(segment_id)
     JOIN pg_class c ON c.relname = 'file_v' || s.segment_id::text AND c.relkind = 'r'
     WHERE v.version_id = $1 ORDER BY s.segment_id`,
    [versionId],
  );
  return rows.map((r) => r.t);
}

/**
 * File records of a version per bucket (`null` = jobs without a start time), quarantined records
 * not included: what readers of `active_files` would see, for the shrink guard. One scan of every
 * segment of the version (a refresh shares its base's file records), superseded records left out.
 */
export async function fileCountsByBucket(db: Queryable, versionId: string): Promise<Map<string | null, number>> {
  const tables = await segmentFileTables(db, versionId);
  if (!tables.length) return new Map();
  const union = tables
    .map((t) => format(`SELECT bucket FROM %I WHERE superseded_by IS NULL OR superseded_by > $1`, t))
    .join(' UNION ALL ');
  const { rows } = await db.query<{ bucket: string | null; n: string }>(
    `SELECT bucket::text AS bucket, count(*)::text AS n FROM (${union}) f GROUP BY 1`,
    [versionId],
  );
  return new Map(rows.map((r) => [r.bucket, Number(r.n)]));
}

/**
 * File records of version `versionId` as the planner estimates them (its segments' file tables'
 * `reltuples`, no scan; superseded records included): the base of a refresh's `maxFileRejects`.
 */
export async function estimatedVersionFiles(db: Queryable, versionId: string): Promise<number> {
  const tables = await segmentFileTables(db, versionId);
  if (!tables.length) return 0;
  const { rows } = await db.query<{ n: string | null }>(
    `SELECT sum(greatest(reltuples, 0))::bigint::text AS n FROM pg_class WHERE relname = ANY ($1::text[]) AND relkind = 'r'`,
    [tables],
  );
  return Number(rows[0]?.n ?? 0);
}

/** Quarantined file records of a version (`reject` rows with a record key: what `maxFileRejects` limits). */
export async function countFileRejects(db: Queryable, versionId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM reject WHERE version_id = $1 AND record_key IS NOT NULL`,
    [versionId],
  );
  return rows[0].n;
}

/** A job that holds fewer file records in a new version than in the one it replaces. */
export interface JobFileLoss {
  jobId: string;
  /** File records (quarantined ones included) in the active version, and in the new one. */
  before: number;
  after: number;
}

/**
 * The jobs whose file records shrank from version `before` to `after` (jobs present in both; a job
 * gone from the source takes its files with it), with their counts (quarantined records counted
 * with them), by job id. One scan of each version's file table; run it on a session without
 * statement timeout. What the director says of those jobs (`PurgedFiles`) is the source's to tell.
 */
export async function shrunkJobFiles(db: Queryable, before: string, after: string): Promise<JobFileLoss[]> {
  const perJob = (v: string) =>
    format(
      `SELECT job_id, count(*) AS n FROM (SELECT job_id FROM %I UNION ALL
         SELECT job_id FROM reject WHERE version_id = %s AND record_key IS NOT NULL) f GROUP BY job_id`,
      filePartitionName(v),
      v,
    );
  const { rows } = await db.query<{ job_id: string; before: string; after: string }>(
    format(
      `WITH b AS (${perJob(before)}), a AS (${perJob(after)})
       SELECT b.job_id, b.n::text AS before, coalesce(a.n, 0)::text AS after
       FROM b JOIN %I j ON j.job_id = b.job_id LEFT JOIN a ON a.job_id = b.job_id
       WHERE coalesce(a.n, 0) < b.n
       ORDER BY length(b.job_id), b.job_id`,
      partitionName(after),
    ),
  );
  return rows.map((r) => ({ jobId: r.job_id, before: Number(r.before), after: Number(r.after) }));
}
