/**
 * File listings of the listing sources (`restic ls --json <id>`, `borg list --json-lines
 * <archive>`), one JSON record per line, each read by the source kind's format
 * (lib/sources/listing-formats/) and mapped to the catalog's page stage (lib/catalog/files.ts
 * FILE_STAGE_COLUMNS, the listing columns included): `path` = the directory with a trailing '/',
 * `name` = the last component ('' for a directory's own entry), `mode` = the POSIX st_mode,
 * `size`, `uid`, `gid` and `mtime` as listed, `file_index` = position in the listing (1-based),
 * `delta_seq` 0, `md5` and `lstat` NULL. A record that cannot be used keeps its position and is
 * quarantined with its reason and the line as listed (`raw`); it never fails the listing.
 *
 * Shapes read (real output in test/fixtures/file-listings):
 * - restic 0.14–0.16: a first line `{"struct_type":"snapshot", "id", …}`, then one
 *   `{"struct_type":"node", "name", "type", "path", "uid", "gid", "size"?, "mode"?, "mtime", …}`
 *   per node (0.16 adds `inode`); restic 0.17 and later add `"message_type"` beside `struct_type`.
 *   `mode` is Go's `os.FileMode` (type bits 1<<31 … 1<<19, permissions in the low 9 bits,
 *   setuid 1<<23, setgid 1<<22, sticky 1<<20) and is left out when zero; `size` only for files.
 *   Go's JSON encoder writes a name that is not UTF-8 with U+FFFD in place of each bad byte.
 * - borg 1.2 (`borg list --json-lines`): `{"type": "-", "mode": "-rw-r--r--", "uid", "gid",
 *   "path": "data/x", "size", "mtime": "2026-12-01T21:52:33.691138"}`: a path relative to the
 *   archive root, a naive mtime (local time of the host that ran borg: read in the source's
 *   zone); a name that is not UTF-8 has `?` in place of each bad byte.
 * - borg 2: the same with an offset in `mtime`, and `path_b64` (the exact bytes of a path that is
 *   not UTF-8), which this mapping uses: such a path is staged as bytes (decoded by the catalog
 *   from the source's `legacyEncoding`).
 */
import { isLosslessNumber, parse } from 'lossless-json';
import { copyValue } from '../text-form';
import type { ListingFormat } from './listing-formats/types';
import { normalizeTime } from './listing-records';

/** The job a listing belongs to, as the page stage records it. */
export interface ListedJob {
  /** Paging key of the job (decimal text). */
  jobKey: string;
  /** Job id (restic snapshot id, borg archive id). */
  jobId: string;
  /** Bucket of the job (`YYYY-MM-DD`), null for a job without start time. */
  bucket: string | null;
}

/** Columns of the page stage a listing fills, in the order of {@link listingRecordCopyLine}. */
export { LISTING_STAGE_COLUMNS } from '../file-stage';

/**
 * Records one job's listing may hold: a listed file's `file_id` is `job key × 10^10 + position`
 * (unique in a version, as the catalog's `(file_id)` index and the quarantine's record key need;
 * the position alone is the `file_index`).
 */
export const LISTING_POSITIONS_PER_JOB = 10_000_000_000n;

/** POSIX file type bits of st_mode, by file type (formats map their tools' types to them). */
export const S_IFMT = {
  socket: 0o140000,
  symlink: 0o120000,
  file: 0o100000,
  block: 0o060000,
  dir: 0o040000,
  char: 0o020000,
  fifo: 0o010000,
} as const;

/** A listing record's directory and name: the path split at its last '/'. */
function splitPath(p: string, isDir: boolean): { path: string; name: string } {
  if (isDir) return { path: p.endsWith('/') ? p : `${p}/`, name: '' };
  const at = p.lastIndexOf('/');
  return { path: p.slice(0, at + 1), name: p.slice(at + 1) };
}

/** The same split on a path's bytes (0x2f is '/' in UTF-8 and in every legacy encoding). */
function splitBytes(b: Buffer, isDir: boolean): { path: Buffer; name: Buffer } {
  if (isDir)
    return { path: b[b.length - 1] === 0x2f ? b : Buffer.concat([b, Buffer.from('/')]), name: Buffer.alloc(0) };
  const at = b.lastIndexOf(0x2f);
  return { path: b.subarray(0, at + 1), name: b.subarray(at + 1) };
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A text as itself when its bytes are UTF-8, else null and the bytes as `\x` hex (bytea text). */
function exactText(b: Buffer): { text: string | null; bytes: string | null } {
  try {
    return { text: UTF8.decode(b), bytes: null };
  } catch {
    return { text: null, bytes: `\\x${b.toString('hex')}` };
  }
}

/** A JSON number kept exact (lossless-json), as decimal text; null when absent; undefined when not a whole number. */
function wholeNumber(v: unknown): string | null | undefined {
  if (v === undefined || v === null) return null;
  if (isLosslessNumber(v)) return /^\d+$/.test(v.value) ? v.value : undefined;
  // A line without a number of 16 or more digits is parsed by JSON.parse: its numbers are exact.
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 && !Object.is(v, -0) ? String(v) : undefined;
  return undefined;
}

/** A number of 16 or more digits (it may exceed 2^53): its line is parsed with lossless-json. */
const LONG_NUMBER = /\d{16,}/;

/**
 * One listing line as JSON: with JSON.parse (fast, little garbage) unless the line holds a long run
 * of digits, then with lossless-json, which keeps every number exact.
 * @throws SyntaxError when the line is not JSON.
 */
function parseLine(line: string): unknown {
  return LONG_NUMBER.test(line) ? parse(line) : JSON.parse(line);
}

/** Go's zero time.Time (restic's "not recorded"). */
const GO_ZERO_TIME = /^0001-01-01T00:00:00(\.0+)?(Z|[+-]00:00)$/;
/** Largest uid or gid the catalog stores (bigint). */
const MAX_ID = (1n << 63n) - 1n;

/** One mapped listing record: the stage's values (text or NULL) in LISTING_STAGE_COLUMNS order. */
export type StagedListingRecord = (string | null)[];

/**
 * Maps one line of a file listing to the stage's values, the line read by `format` (its
 * `fileEntry`). A header line (restic's snapshot line) is not a record: the caller checks it (see
 * {@link ListingFormat.fileListingHeader}). A line that cannot be used is quarantined: its
 * `problem` says why and `raw` holds the line (its first 8,192 characters).
 * @param position 1-based position of the record in the job's listing.
 */
export function listingRecord(
  format: ListingFormat,
  job: ListedJob,
  position: number,
  line: string,
): StagedListingRecord {
  const fileId = (BigInt(job.jobKey) * LISTING_POSITIONS_PER_JOB + BigInt(position)).toString();
  const out = (
    f: {
      path?: string | null;
      name?: string | null;
      pathBytes?: string | null;
      nameBytes?: string | null;
      size?: string | null;
      mode?: number | null;
      uid?: string | null;
      gid?: string | null;
      mtime?: string | null;
    },
    problem: string | null,
  ): StagedListingRecord => [
    job.jobKey,
    job.jobId,
    job.bucket,
    fileId,
    f.path ?? null,
    f.name ?? null,
    f.pathBytes ?? null,
    f.nameBytes ?? null,
    String(position),
    '0',
    problem,
    f.size ?? null,
    f.mode === undefined || f.mode === null ? null : String(f.mode),
    f.uid ?? null,
    f.gid ?? null,
    f.mtime ?? null,
    problem ? line.slice(0, 8192) : null,
  ];
  let rec: Record<string, unknown>;
  try {
    const v = parseLine(line);
    if (!v || typeof v !== 'object' || Array.isArray(v)) return out({}, 'record: not a JSON object');
    rec = v as Record<string, unknown>;
  } catch (err) {
    return out({}, `record: not valid JSON: ${(err as Error).message}`);
  }
  const entry = format.fileEntry(rec);
  const p = entry.path;
  if (typeof p !== 'string' || !p) return out({}, 'path: is missing');
  const { mode, isDir } = entry;
  let names: { path: string | null; name: string | null; pathBytes: string | null; nameBytes: string | null };
  if (entry.pathBytes) {
    const s = splitBytes(entry.pathBytes, isDir);
    const dir = exactText(s.path);
    const name = exactText(s.name);
    names = { path: dir.text, name: name.text, pathBytes: dir.bytes, nameBytes: name.bytes };
  } else {
    const s = splitPath(p, isDir);
    names = { path: s.path, name: s.name, pathBytes: null, nameBytes: null };
  }
  const size = wholeNumber(entry.size);
  const uid = wholeNumber(entry.uid);
  const gid = wholeNumber(entry.gid);
  const { mtime, problem: timeProblem } = listedMtime(entry.mtime);
  const problems = [
    typeof mode === 'object' ? mode.error : null,
    size === undefined ? `size: not a whole number (${String(entry.size)})` : null,
    size && BigInt(size) >= 1n << 64n ? `size: exceeds 64 bits (${size})` : null,
    idProblem('uid', uid, entry.uid),
    idProblem('gid', gid, entry.gid),
    timeProblem,
    `${names.path ?? ''}${names.name ?? ''}`.includes('\u0000')
      ? 'name: contains a NUL character (\\u0000), which PostgreSQL text cannot store'
      : null,
  ].filter((x): x is string => x !== null);
  const ok = !problems.length;
  return out(
    {
      ...names,
      size: size ?? null,
      mode: typeof mode === 'number' ? mode : null,
      uid: uid && BigInt(uid) <= MAX_ID ? uid : null,
      gid: gid && BigInt(gid) <= MAX_ID ? gid : null,
      mtime: ok ? mtime : null,
    },
    ok ? null : problems.join('; '),
  );
}

/**
 * A listed mtime checked as job times are (a real date and clock time, an offset PostgreSQL can
 * hold, year 1 or later), its fraction truncated to microseconds (restic writes nanoseconds; never
 * rounded); null for none or Go's zero time.
 */
function listedMtime(t: unknown): { mtime: string | null; problem: string | null } {
  if (t === undefined || t === null) return { mtime: null, problem: null };
  if (typeof t !== 'string') return { mtime: null, problem: `mtime: not an RFC 3339 time (${String(t)})` };
  if (GO_ZERO_TIME.test(t)) return { mtime: null, problem: null };
  const time = normalizeTime(t);
  return 'text' in time
    ? { mtime: time.text, problem: null }
    : { mtime: null, problem: `mtime: ${time.error.replace(/^is /, '')} (${t})` };
}

/** Why a listed uid or gid cannot be stored (`v` undefined: not a whole number), else null. */
function idProblem(field: string, v: string | null | undefined, raw: unknown): string | null {
  if (v === undefined) return `${field}: not a whole number (${String(raw)})`;
  return v !== null && BigInt(v) > MAX_ID ? `${field}: exceeds 63 bits (${v})` : null;
}

/** One mapped record as a line of `COPY pg_temp.file_stage (LISTING_STAGE_COLUMNS) FROM STDIN` text. */
export function listingRecordCopyLine(r: StagedListingRecord): string {
  return `${r.map((v) => (v === null ? '\\N' : copyValue(v.includes('\u0000') ? v.replace(/\u0000/g, '') : v))).join('\t')}\n`;
}
