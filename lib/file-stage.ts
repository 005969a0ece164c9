/**
 * The columns of the catalog's page stage for file records (`pg_temp.file_stage`): the COPY
 * contract between the sources and the catalog, defined once. A director catalog fills the
 * columns up to `problem` (its records carry an LStat); a restic or borg listing fills all but
 * `path_id`, `lstat` and `md5` (its records carry their listed values). `problem` is a reason found
 * at the source (a dangling PathId, a NUL byte in a name), NULL otherwise. No dependencies: the
 * listing's worker thread loads it.
 */

/** Every stage column with its type, in stage order. */
const FILE_STAGE = [
  ['job_key', 'bigint'],
  ['job_id', 'text'],
  ['bucket', 'date'],
  ['file_id', 'bigint'],
  ['path_id', 'bigint'],
  ['path', 'text'],
  ['name', 'text'],
  ['path_bytes', 'bytea'],
  ['name_bytes', 'bytea'],
  ['file_index', 'integer'],
  ['delta_seq', 'integer'],
  ['lstat', 'text'],
  ['md5', 'text'],
  ['problem', 'text'],
  ['size', 'numeric'],
  ['mode', 'integer'],
  ['uid', 'bigint'],
  ['gid', 'bigint'],
  ['mtime', 'text'],
  ['raw', 'text'],
] as const;

/** Columns only a listing fills. */
const LISTED_ONLY = new Set<string>(['size', 'mode', 'uid', 'gid', 'mtime', 'raw']);
/** Columns only a director catalog fills. */
const DIRECTOR_ONLY = new Set<string>(['path_id', 'lstat', 'md5']);

/** The stage's column definitions (`name type, …`), for CREATE TEMP TABLE. */
export const FILE_STAGE_COLUMNS = FILE_STAGE.map(([n, t]) => `${n} ${t}`).join(', ');

/** The stage columns a director catalog's COPY fills, in its order (the listing columns stay NULL). */
export const DIRECTOR_STAGE_COLUMNS: readonly string[] = FILE_STAGE.map(([n]) => n).filter((n) => !LISTED_ONLY.has(n));

/** The stage columns a listing's COPY text fills, in its order (lib/sources/file-listing.ts). */
export const LISTING_STAGE_COLUMNS: readonly string[] = FILE_STAGE.map(([n]) => n).filter((n) => !DIRECTOR_ONLY.has(n));
