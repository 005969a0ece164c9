/**
 * File records of a version: its table `file_v<id>` attached to the partitioned `file`, the page
 * stage (`pg_temp.file_stage`, the COPY contract with the source), the write of a staged page
 * (good records decoded into the version's table, bad ones quarantined in `reject` with their
 * FileId as record key), the replacement of whole jobs' files, and the indexes built at seal.
 * LStat is decoded here, in the catalog database (migrations/008_files.sql). Identifiers are
 * escaped with pg-format's %I; values are parameters.
 */
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import format from 'pg-format';
import type { Pool, PoolClient } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { Queryable } from '../db';
import { withLongSession } from '../db';
import { DIRECTOR_STAGE_COLUMNS, FILE_STAGE_COLUMNS } from '../file-stage';
import { fileFingerprintRow } from '../fingerprint';
import type { FileRead } from '../sources/types';
import { detachAndDropTable } from './partitions';

/**
 * Name of the table holding one version's file records: `file_v<id>`.
 * @throws Error when `versionId` is not decimal digits (it becomes an identifier).
 */
export function filePartitionName(versionId: string): string {
  if (!/^\d+$/.test(versionId)) throw new Error(`invalid version id ${JSON.stringify(versionId)}`);
  return `file_v${versionId}`;
}

/**
 * Creates the version's standalone file table with `CHECK (version_id = n)` and attaches it to
 * `file` (SHARE UPDATE EXCLUSIVE on the parent: readers are not blocked). No index while pages
 * load; {@link createFileIndexes} builds them at seal. Idempotent.
 * @returns the table's name.
 */
export async function createFilePartition(db: Queryable, versionId: string): Promise<string> {
  const table = filePartitionName(versionId);
  const exists = await db.query(`SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r'`, [table]);
  if (!exists.rowCount) {
    await db.query(format('CREATE TABLE %I (LIKE file INCLUDING DEFAULTS)', table));
    await db.query(
      format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (version_id = %s)', table, `${table}_version`, versionId),
    );
  }
  const attached = await db.query(
    `SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE c.relname = $1`,
    [table],
  );
  if (!attached.rowCount) {
    await db.query(format('ALTER TABLE file ATTACH PARTITION %I FOR VALUES IN (%s)', table, versionId));
  }
  return table;
}

export { DIRECTOR_STAGE_COLUMNS, FILE_STAGE_COLUMNS } from '../file-stage';

/**
 * Creates the session's page stage `pg_temp.file_stage` unless it exists (`ON COMMIT DELETE ROWS`:
 * stage and write inside one transaction; a commit empties it).
 */
export async function ensureFileStage(c: PoolClient): Promise<void> {
  await c.query(`CREATE TEMP TABLE IF NOT EXISTS file_stage (${FILE_STAGE_COLUMNS}) ON COMMIT DELETE ROWS`);
}

/**
 * Streams file records in COPY text form (the stage's column order) into `pg_temp.file_stage`
 * with `COPY … FROM STDIN`, joined with `stream.pipeline`: an error on either side (or `signal`)
 * ends both streams and rejects; the transaction is then left aborted. `columns` are the stage
 * columns the text holds, in order (default: a director catalog's, {@link DIRECTOR_STAGE_COLUMNS}). Must run inside the
 * transaction that then calls {@link insertStagedFiles} (the stage empties at commit).
 * @returns records staged.
 */
export async function copyFilesIntoStage(
  c: PoolClient,
  rows: Readable,
  signal?: AbortSignal,
  columns: readonly string[] = DIRECTOR_STAGE_COLUMNS,
): Promise<number> {
  const sink = c.query(copyFrom(format('COPY pg_temp.file_stage (%I) FROM STDIN', columns)));
  await pipeline(rows, sink, signal ? { signal } : {});
  return sink.rowCount;
}

/**
 * Removes from the page stage the records of the jobs with these paging keys (jobs left out of the
 * page, e.g. gone from the source); no statement when there are none.
 * @returns records removed.
 */
export async function discardStagedJobFiles(c: PoolClient, jobKeys: string[]): Promise<number> {
  if (!jobKeys.length) return 0;
  const r = await c.query(`DELETE FROM pg_temp.file_stage WHERE job_key = ANY($1::bigint[])`, [jobKeys]);
  return r.rowCount ?? 0;
}

/** A quarantined file record, as {@link insertStagedFiles} reports the first ones. */
export interface FileRejectSample {
  jobId: string;
  /** The source's FileId, decimal text. */
  fileId: string;
  reason: string;
}

/** What {@link insertStagedFiles} wrote. */
export interface StagedFilesResult {
  /** File records written to the version's table. */
  rows: number;
  /** File records quarantined (written or replaced in `reject`). */
  rejects: number;
  /** The first (at most 10, by job key and FileId) quarantined records. */
  firstRejects: FileRejectSample[];
}

/** At most this many quarantined records are named in a {@link StagedFilesResult}. */
const FIRST_REJECTS = 10;

/** SQL: a staged path or name as catalog text: the source text, else its bytes decoded from the encoding `$3`. */
const decodedText = (text: string, bytes: string) => `coalesce(${text}, catalog_decode_legacy(${bytes}, $3))`;

/** SQL: why a staged path or name (bytes that are not UTF-8) cannot be decoded from the encoding `$3`; NULL when it can. */
const undecodable = (field: string, text: string, bytes: string) =>
  `WHEN ${text} IS NULL AND ${bytes} IS NOT NULL AND catalog_decode_legacy(${bytes}, $3) IS NULL
   THEN '${field}: bytes are neither UTF-8 nor ' || $3 || ' (\\x' || left(encode(${bytes}, 'hex'), 80) || ')'`;

/**
 * SQL: why a staged record (alias `s`) is quarantined: the source's reason, else a path or name
 * the legacy encoding `$3` does not define, else its LStat's; NULL when good.
 */
const STAGE_PROBLEM = `coalesce(s.problem,
  CASE ${undecodable('path', 's.path', 's.path_bytes')} ${undecodable('name', 's.name', 's.name_bytes')} END,
  catalog_lstat_problem(s.lstat))`;

/** SQL: a staged path or name as raw text: the text, or `\x` and the hex of its bytes when not UTF-8. */
const rawText = (text: string, bytes: string) => `coalesce('\\x' || encode(${bytes}, 'hex'), ${text})`;

/** SQL: a staged record (alias `s`) as readable text, path and name included: the listing's line, else JSON of its fields. */
const STAGE_RAW = `coalesce(s.raw, json_build_object('file_id', s.file_id, 'job_id', s.job_id, 'job_key', s.job_key,
  'path_id', s.path_id, 'path', ${rawText('s.path', 's.path_bytes')}, 'name', ${rawText('s.name', 's.name_bytes')},
  'file_index', s.file_index, 'delta_seq', s.delta_seq, 'lstat', s.lstat, 'md5', s.md5)::text)`;

/**
 * SQL: a staged listing mtime (alias `s`) as timestamptz: a time with an offset as that instant,
 * a naive one (borg 1.x) in the source's zone `$4`.
 */
const stageMtime = (tz: string) => `(CASE WHEN s.mtime ~ '(Z|[+-][0-9]{2}:[0-9]{2})$' THEN s.mtime::timestamptz
  ELSE s.mtime::timestamp AT TIME ZONE ${tz}::text END)`;
const STAGE_MTIME = stageMtime('$4');

/**
 * SQL: the fingerprint input of a staged record (alias `s`); the same text the source and the
 * catalog rows give. `tz` is the SQL parameter holding the source's zone (naive listing mtimes).
 */
export const stagedFileFingerprintRow = (tz: string): string =>
  fileFingerprintRow({
    fileId: 's.file_id',
    jobId: 's.job_id',
    path: 's.path',
    pathBytes: 's.path_bytes',
    name: 's.name',
    nameBytes: 's.name_bytes',
    fileIndex: 's.file_index',
    deltaSeq: 's.delta_seq',
    lstat: 's.lstat',
    md5: 's.md5',
    listed: { size: 's.size', mode: 's.mode', uid: 's.uid', gid: 's.gid', mtime: stageMtime(tz) },
  });
const STAGE_FINGERPRINT_ROW = stagedFileFingerprintRow('$4');

/**
 * Writes the staged page: one `INSERT … SELECT` of the good records into `file_v<id>`, with size,
 * mode, uid, gid and mtime decoded from LStat (fields 8, 3, 5, 6, 12) and `deleted` = FileIndex ≤ 0 (Bacula's
 * and Bareos' mark of a record not saved: 0, or negative for a file deleted since the previous accurate job);
 * then, only when some staged record was not written, one `INSERT` of the bad ones (a source
 * `problem` or a `catalog_lstat_problem`) into `reject` with the job's id (`job_key` NULL: see migrations/008_files.sql), `record_key` = FileId,
 * the reason, `raw` (the record as JSON text, a path or name that is not UTF-8 as `\x` hex) and
 * the fingerprint input (lib/fingerprint.ts `fileFingerprintRow`); a reject of the same (version,
 * FileId) is replaced. Then empties the stage. The version's table must not hold these
 * records yet: a replay first removes its jobs' files ({@link deleteJobFiles}). Run it in the
 * transaction that staged the records. A path or name staged as bytes only (not UTF-8) is decoded
 * from `legacyEncoding` (the source's, default LATIN1) by `catalog_decode_legacy`; one that the
 * encoding does not define is quarantined. A listing record (no LStat) keeps its listed size, mode,
 * uid, gid and mtime; a naive mtime is read in `timezone` (the source's IANA zone, default UTC).
 */
export async function insertStagedFiles(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  legacyEncoding = 'LATIN1',
  timezone = 'UTC',
): Promise<StagedFilesResult> {
  const table = filePartitionName(versionId);
  const good = await c.query(
    format(
      `INSERT INTO %I (version_id, page_no, job_key, job_id, bucket, file_id, path, name, path_bytes, name_bytes,
                       file_index, delta_seq, deleted, size, mode, uid, gid, mtime, md5, lstat)
       SELECT $1::bigint, $2::integer, s.job_key, s.job_id, s.bucket, s.file_id,
              ${decodedText('s.path', 's.path_bytes')}, ${decodedText('s.name', 's.name_bytes')}, s.path_bytes,
              s.name_bytes, s.file_index, s.delta_seq, s.file_index <= 0,
              CASE WHEN s.lstat IS NULL THEN s.size ELSE catalog_b64_unchecked(s.f[8]) END::numeric(20,0),
              CASE WHEN s.lstat IS NULL THEN s.mode ELSE catalog_b64_unchecked(s.f[3])::integer END,
              CASE WHEN s.lstat IS NULL THEN s.uid ELSE catalog_b64_unchecked(s.f[5]) END,
              CASE WHEN s.lstat IS NULL THEN s.gid ELSE catalog_b64_unchecked(s.f[6]) END,
              CASE WHEN s.lstat IS NULL THEN ${STAGE_MTIME} ELSE to_timestamp(catalog_b64_unchecked(s.f[12])) END,
              s.md5, s.lstat
       FROM (SELECT s.*, string_to_array(s.lstat, ' ') AS f FROM pg_temp.file_stage s
             WHERE ${STAGE_PROBLEM} IS NULL OFFSET 0) s`,
      table,
    ),
    [versionId, pageNo, legacyEncoding, timezone],
  );
  const rows = good.rowCount ?? 0;
  const staged = await c.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_temp.file_stage`);
  let rejects = 0;
  let firstRejects: FileRejectSample[] = [];
  if (Number(staged.rows[0].n) > rows) {
    const bad = await c.query<{ n: number; first: FileRejectSample[] | null }>(
      `WITH bad AS (
         INSERT INTO reject (version_id, page_no, job_key, job_id, bucket, record_key, fingerprint_row, reason, raw)
         SELECT $1::bigint, $2::integer, NULL, s.job_id, s.bucket, s.file_id, ${STAGE_FINGERPRINT_ROW},
                ${STAGE_PROBLEM}, ${STAGE_RAW}
         FROM pg_temp.file_stage s WHERE ${STAGE_PROBLEM} IS NOT NULL
         ON CONFLICT (version_id, record_key) WHERE record_key IS NOT NULL DO UPDATE
           SET page_no = EXCLUDED.page_no, job_id = EXCLUDED.job_id, bucket = EXCLUDED.bucket,
               fingerprint_row = EXCLUDED.fingerprint_row, reason = EXCLUDED.reason, raw = EXCLUDED.raw,
               created_at = now()
         RETURNING job_id, record_key, reason)
       SELECT (SELECT count(*)::int FROM bad) AS n,
              (SELECT json_agg(json_build_object('jobId', b.job_id, 'fileId', b.record_key::text, 'reason', b.reason)
                               ORDER BY b.record_key)
               FROM (SELECT * FROM bad ORDER BY record_key LIMIT ${FIRST_REJECTS}) b) AS first`,
      [versionId, pageNo, legacyEncoding, timezone],
    );
    rejects = bad.rows[0].n;
    firstRejects = bad.rows[0].first ?? [];
  }
  await c.query('TRUNCATE pg_temp.file_stage');
  return { rows, rejects, firstRejects };
}

/**
 * Deletes the file records of these jobs from the version's table and their quarantined file
 * records (`reject` rows with a record key); no statement when the list is empty. Without the
 * seal's `(job_id, file_id)` index this scans the version's table.
 * @returns file records plus quarantined file records deleted.
 */
export async function deleteJobFiles(c: Queryable, versionId: string, jobIds: string[]): Promise<number> {
  if (!jobIds.length) return 0;
  const rows = await c.query(format('DELETE FROM %I WHERE job_id = ANY($1::text[])', filePartitionName(versionId)), [
    jobIds,
  ]);
  const rejects = await c.query(
    `DELETE FROM reject WHERE version_id = $1 AND record_key IS NOT NULL AND job_id = ANY($2::text[])`,
    [versionId, jobIds],
  );
  return (rows.rowCount ?? 0) + (rejects.rowCount ?? 0);
}

/** Characters of path + name in the find key ({@link fileFindKey}). */
export const FILE_FIND_KEY_CHARS = 512;

/**
 * SQL: the find key of a file record (columns of `alias`, or unqualified): its first 512 characters of path + name. A btree
 * entry holds at most 2,704 bytes and a path may be 4,096 bytes long (PATH_MAX); 512 characters
 * are at most 2,048 bytes in UTF-8. Readers match on this key, then on the whole path + name.
 */
export const fileFindKey = (alias?: string): string => {
  const q = alias ? `${alias}.` : '';
  return `left(${q}path || ${q}name, ${FILE_FIND_KEY_CHARS})`;
};

/**
 * Builds the version's file indexes unless they exist: unique `(file_id)`, `(job_id, file_id)`
 * (a job's files: listing, replacement, per-job statistics) and the find index on
 * {@link fileFindKey} with `text_pattern_ops` (exact and prefix patterns), then ANALYZEs the
 * table; on a session of its own without statement timeout (discarded afterwards). Idempotent.
 * @throws the database error of a build (23505 when two records share a FileId).
 */
export async function createFileIndexes(pool: Pool, versionId: string): Promise<void> {
  const table = filePartitionName(versionId);
  await withLongSession(pool, async (c) => {
    await c.query(format('CREATE UNIQUE INDEX IF NOT EXISTS %I ON %I (file_id)', `${table}_file_id`, table));
    await c.query(format('CREATE INDEX IF NOT EXISTS %I ON %I (job_id, file_id)', `${table}_job`, table));
    await c.query(
      format(`CREATE INDEX IF NOT EXISTS %I ON %I ((${fileFindKey()}) text_pattern_ops)`, `${table}_find`, table),
    );
    await c.query(format('ANALYZE %I', table));
  });
}

/**
 * Detaches the version's file table from `file` and drops it (partitions.ts `detachAndDropTable`).
 * The version's quarantined file records are not touched.
 * @returns false when the table was already gone (nothing done), true when it was dropped now.
 * @throws the database error of the detach or drop (lock_timeout 55P03 is retryable).
 */
export async function detachAndDropFilePartition(pool: Pool, versionId: string): Promise<boolean> {
  return detachAndDropTable(pool, 'file', filePartitionName(versionId));
}

/** What a file write did. */
export interface FilesWritten {
  /** File records written. */
  rows: number;
  /** File records quarantined. */
  rejects: number;
  /** The first quarantined records (at most 5), for the `rejected` event. */
  firstRejects: FileRejectSample[];
}

/**
 * The one write of file records, for a page (rebuilds with `--files`) and for a bucket's repair:
 * a source's file stream (a director catalog's snapshot, a listing's spooled `filesCommand`
 * output) COPYed into `pg_temp.file_stage`, the source's own records beside them
 * (`read.beforeInsert`), then {@link insertStagedFiles} (`pageNo` 0 for a repair). A page attempt
 * whose ledger insert succeeded holds no committed file of its range (the ledger row and the files
 * commit together), so nothing is deleted first. Must run inside the page's (or the repair's)
 * transaction; memory does not depend on the number of files.
 * @throws the database errors of either side (the attempt fails and is retried).
 */
export async function writeFileRead(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  read: FileRead,
  signal?: AbortSignal,
): Promise<FilesWritten> {
  await ensureFileStage(c);
  await copyFilesIntoStage(c, await read.copyFilesOut(), signal, read.stageColumns);
  await read.beforeInsert?.(c, versionId);
  return insertStagedFiles(c, versionId, pageNo, read.legacyEncoding, read.timezone);
}
