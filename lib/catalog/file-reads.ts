/**
 * Reads of the published file records (`active_files`) behind `catalog-rebuild files` (a job's
 * files) and `catalog-rebuild find` (which jobs hold a path). Values are parameters; nothing is
 * written. Times are UTC text (`YYYY-MM-DDTHH:MI:SS.USZ`), numbers beyond 2^53 decimal text.
 */
import type { Queryable } from '../db';
import { utcText } from '../text-form';
import { FILE_FIND_KEY_CHARS, fileFindKey } from './files';

/** One published file record, as {@link listJobFiles} returns it. */
export interface FileRecord {
  jobId: string;
  /** The job's start time, UTC text; null when it has none (or the job is quarantined). */
  startTime: string | null;
  /** The source's FileId, decimal text. */
  fileId: string;
  /** The directory with its trailing '/', as text (decoded from the legacy encoding when not UTF-8). */
  path: string | null;
  /** The last component ('' for a directory's own entry). */
  name: string | null;
  /** `\x` and the hex of the path's exact bytes when the text is not them; else null. */
  pathBytes: string | null;
  /** `\x` and the hex of the name's exact bytes when the text is not them; else null. */
  nameBytes: string | null;
  fileIndex: number | null;
  deltaSeq: number | null;
  /** FileIndex 0: deleted since the previous accurate backup. */
  deleted: boolean | null;
  /** st_size in bytes, decimal text (exact beyond 2^53). */
  size: string | null;
  /** The full st_mode (file type and permission bits: 33188 for a regular 0644 file). */
  mode: number | null;
  /** st_uid, decimal text. */
  uid: string | null;
  /** st_gid, decimal text. */
  gid: string | null;
  /** st_mtime, UTC text. */
  mtime: string | null;
  md5: string | null;
  lstat: string | null;
}

/**
 * SQL: the condition that names the published version of catalog `$1` to the planner as a value
 * (an init plan): `file` partitions of other versions (a rebuild's, without indexes while it
 * loads) are then pruned when the statement runs, never scanned.
 */
const ACTIVE_VERSION_ONLY = `f.version_id = (SELECT a.version_id FROM active a WHERE a.catalog_name = $1)`;

/** SQL: `\x` and the hex of bytea `col`, or NULL. */
const hexText = (col: string) => `'\\x' || encode(${col}, 'hex')`;

/**
 * The file records of job `jobId` in the published version of `catalog`, by FileId; at most
 * `limit` of them (all when omitted: mind the memory for a job of millions of files). Served by
 * the version's `(job_id, file_id)` index.
 * @returns the records; empty when the catalog has no published version, the job is not in it, or
 * it has no files there.
 */
export async function listJobFiles(
  db: Queryable,
  catalog: string,
  jobId: string,
  limit?: number,
): Promise<FileRecord[]> {
  const { rows } = await db.query<FileRecord>(
    `SELECT f.job_id AS "jobId", ${utcText('j.start_time')} AS "startTime", f.file_id::text AS "fileId", f.path, f.name,
            ${hexText('f.path_bytes')} AS "pathBytes", ${hexText('f.name_bytes')} AS "nameBytes",
            f.file_index AS "fileIndex", f.delta_seq AS "deltaSeq", f.deleted, f.size::text AS size, f.mode,
            f.uid::text AS uid, f.gid::text AS gid, ${utcText('f.mtime')} AS mtime, f.md5, f.lstat
     FROM active_files f
     LEFT JOIN job j ON j.version_id = f.version_id AND j.job_id = f.job_id
     WHERE f.catalog_name = $1 AND ${ACTIVE_VERSION_ONLY} AND f.job_id = $2
     ORDER BY f.file_id LIMIT $3`,
    [catalog, jobId, limit ?? null],
  );
  return rows;
}

/** One job holding a path, as {@link findFiles} returns it. */
export interface FileHit {
  jobId: string;
  /** The job's start time, UTC text; null when it has none. */
  startTime: string | null;
  /** Path and name joined (the record's full path). */
  fullPath: string;
  /** st_size in bytes, decimal text. */
  size: string | null;
  /** st_mtime, UTC text. */
  mtime: string | null;
}

/** `s` with LIKE's wildcards and its escape character escaped. */
const likeLiteral = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * The file records of the published version of `catalog` whose path + name is `pattern` exactly,
 * or starts with it when it ends in `*` (only a final `*` is a wildcard), newest job first (start
 * time descending, jobs without one last, then job id, path + name, FileId); at most `limit`.
 * An exact path, or a prefix of fewer than {@link FIND_DENSE_MATCHES} matches, is served by the
 * version's find index (a range of its key, then the whole path + name) and its matches sorted; a
 * prefix of more walks the published jobs newest first and probes each job's records (its
 * `(job_id, file_id)` index) until `limit` are found.
 * @throws Error when `pattern` is `*` alone (a prefix needs at least one character).
 */
export async function findFiles(db: Queryable, catalog: string, pattern: string, limit: number): Promise<FileHit[]> {
  const prefix = pattern.endsWith('*') ? pattern.slice(0, -1) : null;
  if (prefix === '') throw new Error(`find: the pattern needs at least one character before '*'`);
  const key = fileFindKey('f');
  if (prefix === null)
    return findHits(db, `${key} = left($3::text, ${FILE_FIND_KEY_CHARS}) AND f.path || f.name = $3::text`, [
      catalog,
      limit,
      pattern,
    ]);
  // The key's characters are code points (PostgreSQL's left()), not UTF-16 units.
  const keyPrefix = [...prefix].slice(0, FILE_FIND_KEY_CHARS).join('');
  const params = [catalog, limit, `${likeLiteral(prefix)}%`, `${likeLiteral(keyPrefix)}%`];
  const match = `${key} LIKE $4::text AND f.path || f.name LIKE $3::text`;
  const dense = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM active_files f
       WHERE f.catalog_name = $1 AND ${ACTIVE_VERSION_ONLY} AND ${key} LIKE $2::text LIMIT $3) s`,
    [catalog, params[3], FIND_DENSE_MATCHES],
  );
  const many = (dense.rows[0]?.n ?? 0) >= FIND_DENSE_MATCHES;
  return many ? findDenseHits(db, params.slice(0, 3)) : findHits(db, match, params);
}

/**
 * Matches of a prefix from which on `find` walks the jobs newest first instead of sorting every
 * match: counting this many is one short range of the find index.
 */
export const FIND_DENSE_MATCHES = 5_000;

/** SQL: the columns of a {@link FileHit} over `f` (a file record) and `j` (its job). */
const HIT_COLUMNS = `f.job_id AS "jobId", ${utcText('j.start_time')} AS "startTime", f.path || f.name AS "fullPath",
            f.size::text AS size, ${utcText('f.mtime')} AS mtime`;

/** The matches of `match` (over `f`; `$1` catalog, `$2` limit), sorted whole: few of them (the find index finds them). */
async function findHits(db: Queryable, match: string, params: unknown[]): Promise<FileHit[]> {
  const { rows } = await db.query<FileHit>(
    `SELECT ${HIT_COLUMNS}
     FROM active_files f
     LEFT JOIN job j ON j.version_id = f.version_id AND j.job_id = f.job_id
     WHERE f.catalog_name = $1 AND ${ACTIVE_VERSION_ONLY} AND ${match}
     ORDER BY j.start_time DESC NULLS LAST, f.job_id, f.path || f.name, f.file_id
     LIMIT $2`,
    params,
  );
  return rows;
}

/**
 * The matches of a prefix that matches many records (`$3`, a LIKE pattern; `$1` catalog, `$2`
 * limit): the published jobs newest first (the same order), each probed for its matches through the
 * version's `(job_id, file_id)` index (the per-job LIMIT keeps the probe per job; the find index is
 * left out of it on purpose), until `limit` are found: no sort of every match. Its cost grows with
 * the jobs of the version (one sort of them), not with the matches. Records of a quarantined job
 * (not among the version's jobs) are not found this way.
 */
async function findDenseHits(db: Queryable, params: unknown[]): Promise<FileHit[]> {
  const { rows } = await db.query<FileHit>(
    `SELECT ${HIT_COLUMNS}
     FROM (SELECT j.job_id, j.start_time FROM job j
           WHERE j.version_id = (SELECT a.version_id FROM active a WHERE a.catalog_name = $1)) j
     CROSS JOIN LATERAL (
       SELECT f.* FROM file f WHERE ${ACTIVE_VERSION_ONLY} AND f.job_id = j.job_id AND f.path || f.name LIKE $3::text
       ORDER BY f.path || f.name, f.file_id LIMIT $2) f
     ORDER BY j.start_time DESC NULLS LAST, j.job_id, f.path || f.name, f.file_id
     LIMIT $2`,
    params,
  );
  return rows;
}

/**
 * The published version of `catalog` and whether it holds file records (`version.files`), or null
 * when the catalog has no published version.
 */
export async function activeFileVersion(
  db: Queryable,
  catalog: string,
): Promise<{ versionId: string; files: boolean } | null> {
  const r = await db.query<{ version_id: string; files: boolean }>(
    `SELECT a.version_id::text, v.files FROM active a JOIN version v USING (version_id) WHERE a.catalog_name = $1`,
    [catalog],
  );
  return r.rows[0] ? { versionId: r.rows[0].version_id, files: r.rows[0].files } : null;
}
