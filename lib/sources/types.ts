import type { Readable } from 'node:stream';
import type { PoolClient } from 'pg';
import type { BucketDigestKind, RowHashKind } from '../fingerprint';
import type { GoneJob, PageRejectRecord, ReadRow } from '../rows';

export type { RangeKeySource, RefreshCandidates, RefreshSource, SourceJobHash } from './refresh-types';

export { JOB_COLUMNS } from '../rows';
export type { GoneJob, JobColumn, PageRejectRecord, ReadRow, SourceRow } from '../rows';

/**
 * The source side of a rebuild: where job records come from.
 * Every value crosses from source to catalog as text (or NULL), so 64-bit counters and
 * timestamps never pass through a JS number or Node's local time zone.
 */

/** Counts of naive start times that a DST change makes nonexistent or ambiguous, and the rule applied. */
export interface DstReport {
  /** IANA zone the naive times were read in. */
  zone: string;
  /** Start times that do not exist in the zone (skipped by a spring-forward change). */
  nonexistent: number;
  /** Start times that occur twice in the zone (repeated by a fall-back change). */
  ambiguous: number;
  /** The documented rule, in words. */
  rule: string;
}

/** How naive times at a DST change are read (PostgreSQL's `AT TIME ZONE`), stated in reports. */
export const DST_RULE =
  'a nonexistent wall-clock time is read with the UTC offset in force before the change (02:30 on a spring-forward day in Europe/Berlin is 01:30 UTC, shown as 03:30 local); ' +
  'an ambiguous one is read as standard time, the later of its two instants (02:30 on a fall-back day in Europe/Berlin is 01:30 UTC); the bucket is the wall-clock date as written';

/**
 * Count, digest and id span of one bucket (source-local day of the start time; `null` = no start
 * time), computed in one pass per side (lib/fingerprint.ts `bucketDigestSql`).
 */
export interface BucketStat {
  /** `YYYY-MM-DD`, or null for jobs without a start time. */
  bucket: string | null;
  /** Jobs in the bucket at or below the watermark. */
  count: number;
  /**
   * Digest of the bucket's jobs (id, status, end time, files, bytes): the sum modulo 2^64 of each
   * job's 64-bit hash, decimal text; order-independent.
   */
  fingerprint: string;
  /** Sum of the bucket's job bytes (decimal text, summed in SQL; values that are not whole numbers are left out). */
  bytes: string;
  /** Lowest paging key of the bucket (decimal text). */
  minKey: string;
  /** Highest paging key of the bucket (decimal text). */
  maxKey: string;
}

/** A bucket statistics row as the SQL of every side returns it (text columns). */
export interface StatRow {
  bucket: string | null;
  count: string;
  fingerprint: string;
  bytes: string;
  min_key: string;
  max_key: string;
}

/** A {@link StatRow} as a {@link BucketStat}. */
export function toBucketStat(r: StatRow): BucketStat {
  return {
    bucket: r.bucket,
    count: Number(r.count),
    fingerprint: r.fingerprint,
    bytes: r.bytes,
    minKey: r.min_key,
    maxKey: r.max_key,
  };
}

/** An inclusive range of paging keys (decimal text): a bucket's id span. */
export interface KeySpan {
  min: string;
  max: string;
}

/**
 * One page's read of a source, opened before the page transaction, the one input of the page write
 * (activities/page-stream.ts) for every source kind: its quarantined records, counts and gone jobs
 * are known when it opens; its good rows are then streamed once in the catalog's COPY text form
 * (`copyOut`) or read as rows (`readRows`, the per-row fallback); with file records, `openFiles`
 * gives the file stream of the same jobs. Director catalogs read one source snapshot; staged
 * listings read the catalog database, their `filesCommand` runs while the read opens.
 */
export interface PageRead {
  /** Records of the page quarantined by the source's checks (with reasons). */
  readonly rejects: PageRejectRecord[];
  /** Values decoded from the source's legacyEncoding (not valid UTF-8), per catalog column; empty when none. */
  readonly decoded: Record<string, number>;
  /**
   * Rows with a type, level or status code the product does not know (kept verbatim); 0 for
   * director catalogs, whose unknown codes the reconciliation counts per bucket.
   */
  readonly warnings: number;
  /** Rows left out as repeats of a job id of the page (the last read wins). */
  readonly duplicates: number;
  /** Jobs of the page found gone from the source after the plan: neither their row nor their files are streamed. */
  readonly gone: GoneJob[];
  /**
   * The good rows as COPY text, fields in lib/rows.ts PAGE_COPY_COLUMNS order (`row_hash`: the
   * source's 64-bit hash of the row, lib/sources/bareos-columns.ts; `\N` when it gives none; times
   * as timestamptz text). Once per read.
   */
  copyOut(versionId: string, pageNo: number): Readable;
  /** The good rows in SourceRow text form, ascending by key (not after `copyOut`). */
  readRows(): Promise<ReadRow[]>;
  /**
   * The file records of the page's jobs (quarantined jobs included for director catalogs), on the
   * same snapshot as the rows, after `copyOut` has ended; once per read, and only for a read
   * opened with `files`. Closed with the page read.
   */
  openFiles(): Promise<FileRead>;
  /** Ends the snapshot and returns the connection (discarded when `err` is given or the COPY broke off). */
  close(err?: Error): Promise<void>;
}

/** How a page read is opened. */
export interface PageReadOptions {
  /** statement_timeout of its statements (ms), sized from the page's planned rows. */
  statementTimeoutMs: number;
  /** The rebuild copies file records: the read gives the page's file stream (`openFiles`). */
  files: boolean;
  /** The attempt's cancellation: ends a command the read runs. */
  signal?: AbortSignal;
}

/** The page phase of a source: the one read a page (and its per-row fallback) writes from. */
export interface PageSource {
  /**
   * Opens the read of the page `[firstKey, lastKey]`. Waits for one of the source's
   * `maxConcurrentReads` connections (database sources).
   * @throws NotPublishableError when `files` is asked of a source without file records; the
   *   source's errors (connection, statement timeout, a failed `filesCommand`).
   */
  openPageRead(range: PageKeys, options: PageReadOptions): Promise<PageRead>;
}

/** The keys a page reads: a range, and for a refresh's page the only jobs of it to read (`keys`). */
export interface PageKeys {
  /** First key (decimal text). */
  firstKey: string;
  /** Last key (decimal text). */
  lastKey: string;
  /** A refresh's page: its jobs (decimal text, ascending, within the range); absent: every key of the range. */
  keys?: string[];
}

/**
 * The watermark taken when a rebuild is planned. The rows at or below it are counted by the page
 * walk ({@link JobSource.planPages}), not here: one count over a table of 10^8 rows would outlast a
 * statement timeout.
 */
export interface SourceWatermark {
  /** Highest paging key (decimal text), null for an empty source. */
  maxKey: string | null;
  /** Source clock when the watermark was taken (ISO 8601 UTC). */
  time: string;
}

/** One page of a plan: keys that exist in the source, and the rows between them. */
export interface PageRange {
  /** Lowest key of the page (decimal text); a key that exists. */
  firstKey: string;
  /** Highest key of the page (decimal text); a key that exists. */
  lastKey: string;
  /** Source rows (jobs) with `firstKey <= key <= lastKey` when the plan was made. */
  rows: number;
  /**
   * Rows the page writes, estimated, when more than `rows` (plans with file records: each job's
   * 1 + `JobFiles`); its statement timeout follows this. Absent: `rows`.
   */
  weight?: number;
}

/** Progress of a page walk, reported after each of its statements. */
export interface PageWalkProgress {
  /** Pages found so far. */
  pages: number;
  /** Rows in those pages. */
  rows: number;
  /** Last key of the last page found (decimal text). */
  lastKey: string;
}

/** Rows sampled at most to measure the average width of a row (averageRowBytes). */
export const ROW_WIDTH_SAMPLE = 10_000;

/**
 * The plan phase of a source: its zone, the watermark, the page walk and the plan's checks; and,
 * after the publish, the jobs above the watermark.
 */
export interface PlanSource {
  /** Source kind from the configuration (`bareos`, `bacula`, `restic-json`, `borg-json`). */
  readonly kind: string;
  /** IANA zone of the source's naive times (configured, or the source database's TimeZone). */
  timezone(): Promise<string>;
  /** Takes the watermark: max key and source time. */
  watermark(): Promise<SourceWatermark>;
  /**
   * The pages of `pageSize` rows at or below `maxKey`, ascending, from keys that exist (the last page
   * may hold fewer rows). Walks the keys in bounded statements and calls `onProgress` after each.
   */
  planPages(maxKey: string, pageSize: number, onProgress?: (p: PageWalkProgress) => void): Promise<PageRange[]>;
  /**
   * Average bytes of the text of one row at or below `maxKey` as a page reads it, over a bounded
   * sample (at most {@link ROW_WIDTH_SAMPLE} rows); null when the source has no rows.
   */
  averageRowBytes(maxKey: string): Promise<number | null>;
  /** Rows at or below `maxKey`, counting at most `limit` (a bounded statement). */
  countRowsUpTo(maxKey: string, limit: number): Promise<number>;
  /** Naive start times at or below `maxKey` made nonexistent or ambiguous by DST; null when the source has no naive times. */
  dstReport(maxKey: string): Promise<DstReport | null>;
  /** Jobs above the watermark now (the follow-up delta), as a count. */
  deltaCount(maxKey: string | null): Promise<number>;
}

/**
 * The reconcile phase of a source: the facts a reconciliation compares (per bucket), and the
 * reads of a bucket's repair.
 */
export interface ReconcileSource {
  /**
   * Per-bucket counts, digests, bytes and id spans at or below `maxKey`, in one statement on a
   * session without statement timeout. `digest` (lib/fingerprint.ts): the fingerprint inputs' hash
   * (default `md5`), or `row`, the sum of the row hashes a page's COPY stores (a round uses it
   * only for a version without quarantined records).
   */
  bucketStats(maxKey: string, digest?: BucketDigestKind): Promise<BucketStat[]>;
  /**
   * The source server's answer to lib/fingerprint.ts HASH_PROBE_SQL; absent for sources read from
   * the catalog database (staged listings), which hash alike by definition.
   */
  hashProbe?(): Promise<string>;
  /** Rows with the given keys (decimal text), ascending by key. */
  readKeys(keys: string[]): Promise<ReadRow[]>;
  /** Rows of one bucket at or below `maxKey`, ascending by key. */
  readBucket(bucket: string | null, maxKey: string): Promise<ReadRow[]>;
  /**
   * Rows of one bucket with `span.min <= key <= span.max` and key at or below `maxKey`, ascending
   * by key, read by key range (no index on start time is needed) on a session without statement timeout.
   */
  readBucketInSpan(bucket: string | null, maxKey: string, span: KeySpan): Promise<ReadRow[]>;
  /** Job ids at or below `maxKey` among `jobIds` (to tell deleted jobs from moved ones). */
  existingJobIds(jobIds: string[], maxKey: string): Promise<Set<string>>;
}

/** A readable source of job records, keyed by a numeric paging key: its three phases, and `close`. */
export interface JobSource extends PlanSource, PageSource, ReconcileSource {
  /** Closes the source's connections. */
  close(): Promise<void>;
}

/** One bucket's file records: a source's at the watermark, or a version's with its quarantined file records. */
export interface FileBucketStat {
  /** `YYYY-MM-DD` (the job's start date), or null for jobs without a start time. */
  bucket: string | null;
  /** File records plus quarantined file records. */
  files: number;
  /** Their digest (lib/fingerprint.ts `bucketDigestSql`), decimal text in [0, 2^64). */
  fingerprint: string;
}

/** One job's file records: a source's, or a version's with its quarantined file records. */
export interface FileJobStat {
  jobId: string;
  /** File records plus quarantined file records (0 for a job without any). */
  files: number;
  /** Their digest, decimal text in [0, 2^64) (`0` for a job without any). */
  fingerprint: string;
}

/**
 * The file-record schema of a director catalog, chosen by its `Version` table: Bareos 2171–2250
 * keep the name in `File.Name`, Bacula 1021 and later (11.0+) in `File.Filename`, older Bacula
 * (catalog versions 12–16) in a `Filename` table joined by `FilenameId`.
 */
export interface FileSchema {
  /** `Version.VersionId` of the source catalog. */
  version: number;
  /** Where a file record's name is (`listing`: a restic or borg listing source's `filesCommand`, version 0). */
  name: 'file.name' | 'file.filename' | 'filename table' | 'listing';
}

/** The file records of a set of jobs read on one source snapshot, streamed once. */
export interface FileRead {
  /**
   * The jobs' file records in the COPY text form of the catalog's page stage
   * (lib/catalog/files.ts FILE_STAGE_COLUMNS, `stageColumns` of them). Once per read.
   */
  copyFilesOut(): Promise<Readable>;
  /**
   * The encoding a path or name that is not valid UTF-8 is decoded from (by the catalog, see
   * `insertStagedFiles`): the source's `legacyEncoding`.
   */
  readonly legacyEncoding: string;
  /** The stage columns the COPY text holds, in order; absent: a director catalog's (lib/catalog/files.ts DIRECTOR_STAGE_COLUMNS). */
  readonly stageColumns?: readonly string[];
  /** IANA zone of naive listed mtimes (listing sources); absent: UTC. */
  readonly timezone?: string;
  /**
   * Runs in the write's transaction once the records are in the stage, before they are inserted:
   * what the source records of its own beside them (a listing's per-job figures, lib/catalog/listing-files.ts).
   */
  beforeInsert?(c: PoolClient, versionId: string): Promise<void>;
  /** Ends the snapshot and returns the connection (discarded when `err` is given or the COPY broke off). */
  close(err?: Error): Promise<void>;
}

/** What the file records of a source look like at the watermark, in one pass over `File`. */
export interface SourceFileReconciliation {
  /** Per bucket of the jobs (their start date), the count and digest of their file records. */
  buckets: FileBucketStat[];
  /** `File` rows at or below the watermark whose `JobId` has no `Job` row (never copied). */
  orphanFiles: number;
  /** Jobs whose `File` rows differ in number from `Job.JobFiles` (pruned files): count and the first 5. */
  jobFilesMismatch: {
    jobs: number;
    /** `files` = all its records; `saved` (FileIndex > 0) and `deleted` (FileIndex <= 0) apart. */
    examples: { jobId: string; jobFiles: string | null; files: number; saved?: number; deleted?: number }[];
  };
}

/** A source with file records (director catalogs): what `start --files` reads. */
export interface FileSource {
  /**
   * The catalog's file-record schema.
   * @throws SourceDataInvalidError (non-retryable) for a schema version this release does not know.
   */
  fileSchema(): Promise<FileSchema>;
  /**
   * Pages of jobs at or below `maxKey` of about `targetRows` rows each, where a job weighs 1 + its
   * `JobFiles` (an estimate: `File` is not scanned); a job heavier than the target is a page of its
   * own. Keys that exist, ascending; walked in bounded statements, `onProgress` after each.
   */
  planFilePages(maxKey: string, targetRows: number, onProgress?: (p: PageWalkProgress) => void): Promise<PageRange[]>;
  /** The file records' figures at the watermark, in one statement on a session without statement timeout. */
  fileReconciliation(maxKey: string, hash: RowHashKind): Promise<SourceFileReconciliation>;
  /** Per job of `jobIds` (distinct, ascending), the count and digest of its file records (0 and `0` for none). */
  fileJobStats(jobIds: string[], hash: RowHashKind): Promise<FileJobStat[]>;
  /** Opens a read of the file records of `jobIds` (one snapshot); the caller must `close` it. */
  openFileRead(jobIds: string[], statementTimeoutMs: number): Promise<FileRead>;
}

/** True when `s` has file records. */
export function isFileSource(s: object): s is FileSource {
  return typeof (s as Partial<FileSource>).planFilePages === 'function';
}
