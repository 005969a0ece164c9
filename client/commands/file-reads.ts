/**
 * The catalog reads behind `catalog-rebuild files` and `find`, as one interface the commands are
 * written against, and the one place its implementation is chosen ({@link catalogFileReads}).
 * The reads run on `active_files` (migrations/008_files.sql) in lib/catalog.
 */
import { activeFileVersion, findFiles, findFilesByBytes, listJobFiles, matchActiveJobIds } from '../../lib/catalog';
import type { Queryable } from '../../lib/db';

/** One file record as `files` and `find` print it (a row of `active_files` with its job's start time). */
export interface FileHit {
  /** Job id, text as in `active_jobs`. */
  jobId: string;
  /** The job's start time, ISO 8601; null when the job has none. */
  startTime: string | null;
  /** The directory, with its trailing `/` (as in the source). */
  path: string | null;
  /** The last component; '' for a directory's own entry. */
  name: string | null;
  /** Size in bytes, decimal text; null when unknown. */
  size: string | null;
  /** Modification time, ISO 8601; null when unknown. */
  mtime: string | null;
  /**
   * The job did not save this record (FileIndex ≤ 0: deleted since the previous accurate job);
   * such records are only read with `--deleted`.
   */
  deleted: boolean;
}

/** The active version of a catalog, as far as `files` and `find` need it. */
export interface ActiveFileVersion {
  /** Version id, decimal text. */
  versionId: string;
  /** The version was rebuilt with `--files` (`version.files`). */
  files: boolean;
}

/** What `files` and `find` read from the catalog database. */
export interface FileReads {
  /** The catalog's active version and whether it holds file records; null when none is active. */
  activeFileVersion(db: Queryable, catalog: string): Promise<ActiveFileVersion | null>;
  /**
   * The ids of the active version's jobs that `job` names (exactly, or a listing source's hex
   * prefix of 8+ digits); at most `limit`, sorted.
   */
  matchJobIds(db: Queryable, catalog: string, job: string, limit: number): Promise<string[]>;
  /**
   * The files of one job of the catalog's active version, in FileId order; at most `limit` when
   * given; the saved ones only unless `includeDeleted`.
   */
  listJobFiles(
    db: Queryable,
    catalog: string,
    jobId: string,
    limit: number | undefined,
    includeDeleted: boolean,
  ): Promise<FileHit[]>;
  /**
   * The file records whose path+name equals `pattern`, or starts with it when it ends in `*`,
   * newest job first; at most `limit`; the saved ones only unless `includeDeleted`.
   */
  findFiles(
    db: Queryable,
    catalog: string,
    pattern: string,
    limit: number,
    includeDeleted: boolean,
  ): Promise<FileHit[]>;
  /**
   * The file records whose path+name is exactly `bytes` (or starts with them when `prefix`), as the
   * source wrote them (a name that is not UTF-8); order and limit as `findFiles`.
   */
  findFilesByBytes(
    db: Queryable,
    catalog: string,
    bytes: Buffer,
    prefix: boolean,
    limit: number,
    includeDeleted: boolean,
  ): Promise<FileHit[]>;
}

/** A record of `files` or a hit of `find`, in the one shape both print. */
const hitOf = (r: FileHit): FileHit => ({
  jobId: r.jobId,
  startTime: r.startTime,
  path: r.path,
  name: r.name,
  size: r.size,
  mtime: r.mtime,
  deleted: r.deleted === true,
});

/**
 * The reads of this build (lib/catalog), used by the CLI; tests pass their own {@link FileReads}.
 * `files` and `find` give the same fields: the job's start time, the directory and the name apart.
 */
export const catalogFileReads: FileReads = {
  activeFileVersion,
  matchJobIds: matchActiveJobIds,
  listJobFiles: async (db, catalog, jobId, limit, includeDeleted) =>
    (await listJobFiles(db, catalog, jobId, limit, includeDeleted)).map((r) => hitOf({ ...r, deleted: !!r.deleted })),
  findFiles: async (db, catalog, pattern, limit, includeDeleted) =>
    (await findFiles(db, catalog, pattern, limit, includeDeleted)).map(hitOf),
  findFilesByBytes: async (db, catalog, bytes, prefix, limit, includeDeleted) =>
    (await findFilesByBytes(db, catalog, bytes, prefix, limit, includeDeleted)).map(hitOf),
};
