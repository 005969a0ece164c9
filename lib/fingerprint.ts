/**
 * The fingerprint of a job record, defined side by side for every place that computes it, so that
 * they cannot drift apart: `test/fingerprint.test.ts` evaluates all four on the same rows.
 *
 * The fingerprint input of one job is the text `job id|status|end time|files|bytes`, each field in
 * its catalog text form (end time as UTC `YYYY-MM-DDTHH:MI:SS.USZ`), `\N` for NULL. A bucket's
 * digest is order-independent: the sum modulo 2^64 of each job's 64-bit hash (the first 16 hex
 * digits of the md5 of its input, read as a signed 64-bit integer), so PostgreSQL can compute it
 * in parallel in one pass and two identical jobs add up instead of cancelling (unlike XOR).
 */
import { createHash } from 'node:crypto';
import { bareosUtcText, sourceText, UTF8_MODE } from './sources/bareos-columns';
import type { SourceTextMode } from './sources/bareos-columns';
import type { SourceRow } from './sources/types';
import { utcText } from './text-form';

/** Node: the fingerprint input of a row in SourceRow text form (quarantined records keep it in `reject`). */
export function fingerprintRow(r: Pick<SourceRow, 'job_id' | 'status' | 'end_time' | 'files' | 'bytes'>): string {
  const v = (x: string | null) => x ?? '\\N';
  return `${v(r.job_id)}|${v(r.status)}|${v(r.end_time)}|${v(r.files)}|${v(r.bytes)}`;
}

/** SQL over a catalog version table aliased `t`. */
export const CATALOG_FINGERPRINT_ROW = `t.job_id || '|' || coalesce(t.status, '\\N') || '|' || coalesce(${utcText(
  't.end_time',
)}, '\\N') || '|' || coalesce(t.files::text, '\\N') || '|' || coalesce(t.bytes::text, '\\N')`;

/**
 * SQL over a Bareos/Bacula `job` row aliased `j`; `zone` is the `AT TIME ZONE` operand of the
 * naive times (default `$1`, the source's IANA zone as a parameter). The status is read as the page
 * path reads it (`mode`: decoded from the legacy encoding when it is not UTF-8), so both sides hash
 * the same text.
 */
export const bareosFingerprintRow = (mode: SourceTextMode, zone = '$1'): string =>
  `j.jobid::text || '|' || coalesce(NULLIF(${sourceText('j.jobstatus::text', mode)}, ''), '\\N') || '|' || coalesce(${bareosUtcText(
    'j.endtime',
    zone,
  )}, '\\N') || '|' || coalesce(j.jobfiles::text, '\\N') || '|' || coalesce(j.jobbytes::text, '\\N')`;

/** {@link bareosFingerprintRow} of a source database that checks its encoding. */
export const BAREOS_FINGERPRINT_ROW = bareosFingerprintRow(UTF8_MODE);

/** SQL over a staged listing record aliased `x` (its fields already in text form). */
export const STAGED_FINGERPRINT_ROW = `coalesce(x.job_id, '\\N') || '|' || coalesce(x.status, '\\N') || '|' || coalesce(x.end_time, '\\N') || '|' || coalesce(x.files, '\\N') || '|' || coalesce(x.bytes, '\\N')`;

/** 2^64: bucket digests are sums modulo this. */
const TWO_64 = 1n << 64n;

/**
 * The 64-bit row hash of a reconciliation: `hashtextextended` (PostgreSQL's own 64-bit text hash:
 * about 6 × cheaper per row than md5, measured at 0.06 against 2.4 CPU s per million rows), used
 * when the source and the catalog servers hash a probe text alike (see {@link HASH_PROBE_SQL});
 * else `md5` (the first 16 hex digits of the md5), which every server computes alike.
 */
export type RowHashKind = 'hashtext64' | 'md5';

/**
 * How a reconciliation round digests a bucket: the fingerprint inputs hashed with a
 * {@link RowHashKind}, or `row`: the sum of the jobs' row hashes as the source computes them for a
 * page's COPY (`job.row_hash`: every column the catalog holds), whose catalog side the pages stored
 * per bucket as they wrote (`page_bucket`), so the catalog is not scanned.
 */
export type BucketDigestKind = RowHashKind | 'row';

/** SQL returning (as `h`) the `hashtextextended` of a fixed text: equal on two servers means their row hashes agree. */
export const HASH_PROBE_SQL = `SELECT hashtextextended('catalog-rebuild fingerprint probe: ü', 0)::text AS h`;

/** SQL: a job's 64-bit hash (signed bigint) from its fingerprint input `text` (an SQL expression). */
export const rowHashSql = (text: string, kind: RowHashKind = 'md5'): string =>
  kind === 'hashtext64' ? `hashtextextended(${text}, 0)` : `('x' || substr(md5(${text}), 1, 16))::bit(64)::bigint`;

/**
 * SQL aggregate: the digest of a group of fingerprint inputs `text` (an SQL expression), as decimal
 * text in [0, 2^64). `sum(bigint)` is exact (numeric result) and parallel-safe; no ORDER BY, no
 * string_agg. The one definition every side uses.
 */
export const bucketDigestSql = (text: string, kind: RowHashKind = 'md5'): string =>
  digestOfSumSql(`sum(${rowHashSql(text, kind)})`);

/**
 * SQL: a digest from a sum of row hashes `sum` (an SQL numeric expression, NULL for none), as
 * decimal text in [0, 2^64): what {@link bucketDigestSql} computes, for a digest summed in two
 * steps (per job, then per bucket).
 */
export const digestOfSumSql = (sum: string): string =>
  `((coalesce(${sum}, 0) % ${TWO_64} + ${TWO_64}) % ${TWO_64})::text`;

/** Node: a job's 64-bit `md5` row hash (unsigned, as BigInt) from its fingerprint input. */
export function rowHash(fingerprintInput: string): bigint {
  return BigInt(`0x${createHash('md5').update(fingerprintInput, 'utf8').digest('hex').slice(0, 16)}`);
}

/** Node: the digest of fingerprint inputs (any order), decimal text in [0, 2^64); same as {@link bucketDigestSql} with `md5`. */
export function bucketDigest(fingerprintInputs: Iterable<string>): string {
  let sum = 0n;
  for (const f of fingerprintInputs) sum = (sum + rowHash(f)) % TWO_64;
  return sum.toString();
}

/**
 * The columns a file record's fingerprint input is made of, as SQL expressions of one side. `path`
 * and `name` are text; `pathBytes` / `nameBytes` are bytea expressions, NULL when the text is the
 * exact source bytes (valid UTF-8), else those bytes.
 */
export interface FileFingerprintColumns {
  fileId: string;
  jobId: string;
  path: string;
  pathBytes: string;
  name: string;
  nameBytes: string;
  fileIndex: string;
  deltaSeq: string;
  lstat: string;
  md5: string;
  /**
   * The values a listing record (restic, borg) carries instead of an LStat, as SQL expressions:
   * size (numeric), mode (integer), uid, gid (bigint) and mtime (timestamptz). Absent for a side
   * that only ever holds LStat records (a director catalog).
   */
  listed?: { size: string; mode: string; uid: string; gid: string; mtime: string };
}

/**
 * SQL: the LStat field of a fingerprint input: the LStat, else for a listing record (no LStat, some
 * listed value) the text `listed size mode uid gid mtime` (`\N` for NULL, mtime as a UTC instant).
 * A record with an LStat, or with nothing listed, hashes the same with and without `listed`.
 */
const lstatForm = (lstat: string, listed: FileFingerprintColumns['listed']): string => {
  if (!listed) return `(${lstat})::text`;
  const n = (x: string) => `coalesce((${x})::text, '\\N')`;
  const { size, mode, uid, gid, mtime } = listed;
  return `coalesce((${lstat})::text, CASE WHEN num_nonnulls(${size}, ${mode}, ${uid}, ${gid}, ${mtime}) > 0 THEN
    'listed ' || ${n(size)} || ' ' || ${n(mode)} || ' ' || ${n(uid)} || ' ' || ${n(gid)} || ' ' || ${n(utcText(mtime))} END)`;
};

/** SQL: a path or name in its fingerprint form: the text when exact, else `\x` and its bytes in hex. */
const fileTextForm = (text: string, bytes: string): string =>
  `coalesce('\\x' || encode(${bytes}, 'hex'), ${text}, '\\N')`;

/**
 * SQL: the fingerprint input of one file record, the text
 * `file id|job id|path|name|file index|delta seq|lstat|md5` (`\N` for NULL; a listing record's
 * listed values in place of its LStat, see `lstatForm`; a path or name that is
 * not valid UTF-8 as `\x` and the hex of its bytes, so the fingerprint hashes the source's bytes).
 * The one definition of the source side, the catalog side and quarantined file records.
 */
export function fileFingerprintRow(c: FileFingerprintColumns): string {
  const v = (x: string) => `coalesce((${x})::text, '\\N')`;
  return [
    v(c.fileId),
    v(c.jobId),
    fileTextForm(c.path, c.pathBytes),
    fileTextForm(c.name, c.nameBytes),
    v(c.fileIndex),
    v(c.deltaSeq),
    v(lstatForm(c.lstat, c.listed)),
    v(c.md5),
  ].join(` || '|' || `);
}
