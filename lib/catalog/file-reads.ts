/**
 * Reads of the published file records (`active_files`) behind `catalog-rebuild files` (a job's
 * files) and `catalog-rebuild find` (which jobs hold a path). Values are parameters; nothing is
 * written. Times are UTC text (`YYYY-MM-DDTHH:MI:SS.USZ`), numbers beyond 2^53 decimal text.
 */
import { isUtf8 } from 'node:buffer';
import format from 'pg-format';
import { LEGACY_ENCODINGS } from '../config';
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
  /** FileIndex ≤ 0: the director marks the record not saved (deleted since the previous accurate job). */
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
 * SQL: whether file record `f` (a row of `file` or `active_files`) was not saved by its job: its
 * FileIndex is 0 or negative (Bacula and Bareos; Bacula 9.6 marks a file deleted since the previous
 * accurate job with a negative one), or, without FileIndex, its stored `deleted`. The same rule as
 * the view (migrations/012_file_saved.sql), for reads of `file` itself.
 */
const DELETED = `(CASE WHEN f.file_index IS NULL THEN f.deleted ELSE f.file_index <= 0 END)`;

/** The published version of a catalog and its segments (migration 014), decimal text. */
interface ActiveSegments {
  versionId: string;
  segments: string[];
}

/** The published version of `catalog` and its segments; null when it has none. */
async function activeSegments(db: Queryable, catalog: string): Promise<ActiveSegments | null> {
  const { rows } = await db.query<{ v: string; s: string[] }>(
    `SELECT a.version_id::text AS v, v.segment_ids::text[] AS s FROM active a JOIN version v USING (version_id)
     WHERE a.catalog_name = $1`,
    [catalog],
  );
  return rows[0] ? { versionId: rows[0].v, segments: rows[0].s } : null;
}

/**
 * SQL: row `alias` (of `file` or `job`) belongs to the published version `a`: it is in one of the
 * version's segments and not superseded at it. The segments are literals, so the planner prunes
 * the partitions of other versions (a rebuild's, loading without indexes): they are never scanned.
 */
function inActive(alias: string, a: ActiveSegments): string {
  for (const id of [a.versionId, ...a.segments]) if (!/^\d+$/.test(id)) throw new Error(`bad version id ${id}`);
  // A full rebuild's version is its one segment: an equality, as the plans had before segments.
  const seg = a.segments.length === 1 ? `= ${a.segments[0]}` : `= ANY ('{${a.segments.join(',')}}'::bigint[])`;
  return `${alias}.version_id ${seg} AND (${alias}.superseded_by IS NULL OR ${alias}.superseded_by > ${a.versionId})`;
}

/** SQL: file record `f` was saved by its job (Bacula's `FileIndex > 0`). */
const SAVED = `${DELETED} IS NOT TRUE`;

/** SQL: `\x` and the hex of bytea `col`, or NULL. */
const hexText = (col: string) => `'\\x' || encode(${col}, 'hex')`;

/**
 * The file records of job `jobId` in the published version of `catalog`, by FileId; at most
 * `limit` of them (all when omitted: mind the memory for a job of millions of files). Served by
 * the version's `(job_id, file_id)` index. Only saved records (FileIndex > 0, as `bconsole list
 * files` shows them) unless `includeDeleted`, which adds those the job did not save (`deleted`).
 * @returns the records; empty when the catalog has no published version, the job is not in it, or
 * it has no files there.
 */
export async function listJobFiles(
  db: Queryable,
  catalog: string,
  jobId: string,
  limit?: number,
  includeDeleted = false,
): Promise<FileRecord[]> {
  const active = await activeSegments(db, catalog);
  if (!active) return [];
  const { rows } = await db.query<FileRecord>(
    `SELECT f.job_id AS "jobId", ${utcText('j.start_time')} AS "startTime", f.file_id::text AS "fileId", f.path, f.name,
            ${hexText('f.path_bytes')} AS "pathBytes", ${hexText('f.name_bytes')} AS "nameBytes",
            f.file_index AS "fileIndex", f.delta_seq AS "deltaSeq", ${DELETED} AS deleted, f.size::text AS size,
            f.mode, f.uid::text AS uid, f.gid::text AS gid, ${utcText('f.mtime')} AS mtime, f.md5, f.lstat
     FROM file f
     LEFT JOIN job j ON j.job_id = f.job_id AND ${inActive('j', active)}
     WHERE $1::text IS NOT NULL AND ${inActive('f', active)} AND f.job_id = $2 AND ($4::boolean OR ${SAVED})
     ORDER BY f.file_id LIMIT $3`,
    [catalog, jobId, limit ?? null, includeDeleted],
  );
  return rows;
}

/** Shortest prefix of a listing source's job id (restic snapshot, borg archive: hex) that `files --job` accepts. */
export const JOB_ID_MIN_PREFIX = 8;

/**
 * The job ids of the published version of `catalog` that `job` names: the job whose id is exactly
 * `job`; else, when `job` is at least {@link JOB_ID_MIN_PREFIX} lowercase hex digits, the jobs
 * whose id starts with it, among ids that are not decimal numbers (listing sources' hex ids: a
 * director's job id `12` is never a prefix of `120`). At most `limit` ids, sorted.
 * A prefix reads the version's job ids (one pass over its jobs, as many as the source's snapshots).
 * @returns the matching ids; empty when none matches or the catalog has no published version.
 */
export async function matchActiveJobIds(db: Queryable, catalog: string, job: string, limit: number): Promise<string[]> {
  const active = await activeSegments(db, catalog);
  if (!active) return [];
  const exact = await db.query<{ job_id: string }>(
    `SELECT j.job_id FROM job j WHERE $1::text IS NOT NULL AND ${inActive('j', active)} AND j.job_id = $2 LIMIT 1`,
    [catalog, job],
  );
  if (exact.rows.length || !new RegExp(`^[0-9a-f]{${JOB_ID_MIN_PREFIX},}$`).test(job))
    return exact.rows.map((r) => r.job_id);
  const prefixed = await db.query<{ job_id: string }>(
    `SELECT j.job_id FROM job j
      WHERE $1::text IS NOT NULL AND ${inActive('j', active)} AND j.job_id !~ '^[0-9]+$' AND left(j.job_id, length($2)) = $2
      ORDER BY j.job_id LIMIT $3`,
    [catalog, job, limit],
  );
  return prefixed.rows.map((r) => r.job_id);
}

/** One job holding a path, as {@link findFiles} returns it. */
export interface FileHit {
  jobId: string;
  /** The job's start time, UTC text; null when it has none. */
  startTime: string | null;
  /** The directory with its trailing '/'. */
  path: string | null;
  /** The last component ('' for a directory's own entry). */
  name: string | null;
  /** The job did not save this record (FileIndex ≤ 0); only returned with `includeDeleted`. */
  deleted: boolean;
  /** st_size in bytes, decimal text. */
  size: string | null;
  /** st_mtime, UTC text. */
  mtime: string | null;
}

/** SQL: the exact bytes of file record `f`'s path + name (the source's bytes where not UTF-8). */
const FULL_PATH_BYTES = `(coalesce(f.path_bytes, convert_to(f.path, 'UTF8')) || coalesce(f.name_bytes, convert_to(f.name, 'UTF8')))`;

/** SQL: ` AND` the record's path + name bytes equal `bytes` (or start with them, for a prefix). */
function bytesMatch(bytes: Buffer, prefix: boolean): string {
  const literal = format('%L::bytea', `\\x${bytes.toString('hex')}`);
  return prefix
    ? ` AND substring(${FULL_PATH_BYTES} FROM 1 FOR ${bytes.length}) = ${literal}`
    : ` AND ${FULL_PATH_BYTES} = ${literal}`;
}

/**
 * The file records of the published version of `catalog` whose path + name is exactly the bytes
 * `bytes` (or starts with them, when `prefix`), as a director's `SQL_ASCII` catalog holds them:
 * what an operator on a Latin-1 terminal types, or `find --path-hex`. Bytes that are valid UTF-8
 * are that text ({@link findFiles}). Others are decoded with every legacy encoding a source may
 * name (lib/config.ts): each distinct text is looked up through the find index like a typed path,
 * and only the records whose exact bytes (`path_bytes`, `name_bytes`) are `bytes` are kept. Order
 * and limit as {@link findFiles}.
 */
export async function findFilesByBytes(
  db: Queryable,
  catalog: string,
  bytes: Buffer,
  prefix: boolean,
  limit: number,
  includeDeleted = false,
): Promise<FileHit[]> {
  if (!bytes.length) throw new Error('find: the path needs at least one byte');
  const star = prefix ? '*' : '';
  if (isUtf8(bytes)) return findFiles(db, catalog, bytes.toString('utf8') + star, limit, includeDeleted);
  const texts = await db.query<{ t: string }>(
    `SELECT DISTINCT t FROM (SELECT catalog_decode_legacy($1::bytea, e) AS t FROM unnest($2::text[]) e) d
     WHERE t IS NOT NULL ORDER BY t`,
    [bytes, [...LEGACY_ENCODINGS]],
  );
  const hits: FileHit[] = [];
  for (const { t } of texts.rows) hits.push(...(await findFiles(db, catalog, t + star, limit, includeDeleted, bytes)));
  const full = (h: FileHit) => `${h.path ?? ''}${h.name ?? ''}`;
  hits.sort(
    (a, b) =>
      (b.startTime ?? '').localeCompare(a.startTime ?? '') ||
      (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0) ||
      (full(a) < full(b) ? -1 : full(a) > full(b) ? 1 : 0),
  );
  return hits.slice(0, limit);
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
 * `(job_id, file_id)` index) until `limit` are found. Only records their job saved (FileIndex > 0,
 * as Bacula's own queries ask) unless `includeDeleted`.
 * @throws Error when `pattern` is `*` alone (a prefix needs at least one character).
 */
export async function findFiles(
  db: Queryable,
  catalog: string,
  pattern: string,
  limit: number,
  includeDeleted = false,
  exactBytes?: Buffer,
): Promise<FileHit[]> {
  const prefix = pattern.endsWith('*') ? pattern.slice(0, -1) : null;
  if (prefix === '') throw new Error(`find: the pattern needs at least one character before '*'`);
  const active = await activeSegments(db, catalog);
  if (!active) return [];
  const key = fileFindKey('f');
  const saved = (includeDeleted ? '' : ` AND ${SAVED}`) + (exactBytes ? bytesMatch(exactBytes, prefix !== null) : '');
  if (prefix === null)
    return findHits(
      db,
      active,
      `${key} = left($3::text, ${FILE_FIND_KEY_CHARS}) AND f.path || f.name = $3::text${saved}`,
      [catalog, limit, pattern],
    );
  // The key's characters are code points (PostgreSQL's left()), not UTF-16 units.
  const keyPrefix = [...prefix].slice(0, FILE_FIND_KEY_CHARS).join('');
  const params = [catalog, limit, `${likeLiteral(prefix)}%`, `${likeLiteral(keyPrefix)}%`];
  const match = `${key} LIKE $4::text AND f.path || f.name LIKE $3::text${saved}`;
  const dense = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM file f
       WHERE $1::text IS NOT NULL AND ${inActive('f', active)} AND ${key} LIKE $2::text LIMIT $3) s`,
    [catalog, params[3], FIND_DENSE_MATCHES],
  );
  const many = (dense.rows[0]?.n ?? 0) >= FIND_DENSE_MATCHES;
  return many ? findDenseHits(db, active, params.slice(0, 3), saved) : findHits(db, active, match, params);
}

/**
 * Matches of a prefix from which on `find` walks the jobs newest first instead of sorting every
 * match: counting this many is one short range of the find index.
 */
export const FIND_DENSE_MATCHES = 5_000;

/** SQL: the columns of a {@link FileHit} over `f` (a file record) and `j` (its job). */
const HIT_COLUMNS = `f.job_id AS "jobId", ${utcText('j.start_time')} AS "startTime", f.path, f.name,
            ${DELETED} AS deleted, f.size::text AS size, ${utcText('f.mtime')} AS mtime`;

/** The matches of `match` (over `f`; `$1` catalog, `$2` limit), sorted whole: few of them (the find index finds them). */
async function findHits(db: Queryable, active: ActiveSegments, match: string, params: unknown[]): Promise<FileHit[]> {
  const { rows } = await db.query<FileHit>(
    `SELECT ${HIT_COLUMNS}
     FROM file f
     LEFT JOIN job j ON j.job_id = f.job_id AND ${inActive('j', active)}
     WHERE $1::text IS NOT NULL AND ${inActive('f', active)} AND ${match}
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
 * the jobs of the version (one sort of them), not with the matches. `saved` is '' or the
 * ` AND <saved>` condition over `f`. Records of a quarantined job
 * (not among the version's jobs) are not found this way.
 */
async function findDenseHits(
  db: Queryable,
  active: ActiveSegments,
  params: unknown[],
  saved: string,
): Promise<FileHit[]> {
  const { rows } = await db.query<FileHit>(
    `SELECT ${HIT_COLUMNS}
     FROM (SELECT j.job_id, j.start_time FROM job j WHERE $1::text IS NOT NULL AND ${inActive('j', active)}) j
     CROSS JOIN LATERAL (
       SELECT f.* FROM file f
       WHERE ${inActive('f', active)} AND f.job_id = j.job_id AND f.path || f.name LIKE $3::text${saved}
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
