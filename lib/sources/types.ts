import type { Readable } from 'node:stream';

/**
 * The source side of a rebuild: where job records come from.
 * Every value crosses from source to catalog as text (or NULL), so 64-bit counters and
 * timestamps never pass through a JS number or Node's local time zone.
 */

/** Catalog columns a source row carries, in the order of the page write. */
export const JOB_COLUMNS = [
  'job_key',
  'job_id',
  'job',
  'job_name',
  'client',
  'type',
  'level',
  'status',
  'sched_time',
  'start_time',
  'end_time',
  'real_end_time',
  'files',
  'bytes',
  'read_bytes',
  'job_errors',
  'pool',
  'fileset',
  'prior_job_id',
  'job_tdate',
  'vol_session_id',
  'vol_session_time',
  'comment',
  'bucket',
  'extra',
] as const;

/** Name of one catalog column carried by a source row. */
export type JobColumn = (typeof JOB_COLUMNS)[number];

/**
 * One job as read from a source: every field as text or NULL.
 * Times are UTC instants `YYYY-MM-DDTHH:MM:SS.ffffffZ`; `bucket` is the source-local date
 * (`YYYY-MM-DD`) of the start time, NULL for jobs that never started; `job_key` is the
 * decimal paging key (Bareos `jobid`, a staged listing's record number); `extra` is a JSON object
 * in PostgreSQL's jsonb text form (source extras), NULL for database sources.
 */
export type SourceRow = Record<JobColumn, string | null>;

/**
 * A record as a source read it: the job's fields, and for a record that already failed validation
 * when its listing was staged, why (`reject_reason`) and the record as the source wrote it (`raw`).
 */
export type ReadRow = SourceRow & { reject_reason?: string | null; raw?: string | null };

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

/** Count and fingerprint of one bucket (source-local day of the start time; `null` = no start time). */
export interface BucketStat {
  /** `YYYY-MM-DD`, or null for jobs without a start time. */
  bucket: string | null;
  /** Jobs in the bucket at or below the watermark. */
  count: number;
  /** md5 over the bucket's job ids in key order with status, end time, files and bytes. */
  fingerprint: string;
  /** Sum of the bucket's job bytes (decimal text, summed in SQL; values that are not whole numbers are left out). */
  bytes: string;
}

/** A record a page quarantines: where it was, why, and the record as read. */
export interface PageRejectRecord {
  /** Paging key (decimal text). */
  jobKey: string;
  /** Job id when the record had one. */
  jobId: string | null;
  /** Bucket the source assigns the record (NULL when its time is unusable). */
  bucket: string | null;
  /** The record's fingerprint input, the same text the source's bucket fingerprint uses. */
  fingerprintRow: string;
  /** Why it was quarantined: `field: problem (value)`, joined with `; `. */
  reason: string;
  /** The record as read (JSON of its SourceRow text form) or as the source wrote it (listings). */
  raw: string;
}

/**
 * One page's read of a database source, inside one source snapshot: its quarantined records and
 * unknown-code count are known when it opens; its good rows are then either streamed once in the
 * catalog's COPY text form (`copyOut`) or read as rows (`readRows`, the per-row fallback).
 */
export interface PageRead {
  /** Records of the page quarantined by the source's checks (with reasons). */
  readonly rejects: PageRejectRecord[];
  /** Good rows whose type, level or status code is unknown (kept verbatim). */
  readonly warnings: number;
  /** Values decoded from the source's legacyEncoding (not valid UTF-8), per catalog column; empty when none. */
  readonly decoded: Record<string, number>;
  /**
   * The good rows as COPY text, columns `version_id, page_no`, then JOB_COLUMNS (times as
   * timestamptz text). Once per read.
   */
  copyOut(versionId: string, pageNo: number): Readable;
  /** The good rows in SourceRow text form, ascending by key (not after `copyOut`). */
  readRows(): Promise<ReadRow[]>;
  /** Ends the snapshot and returns the connection (discarded when `err` is given or the COPY broke off). */
  close(err?: Error): Promise<void>;
}

/** A source whose pages can be streamed (database sources). */
export interface StreamingSource {
  /**
   * Opens the read of the page `[firstKey, lastKey]`; its statements run under `statementTimeoutMs`.
   * Waits for one of the source's `maxConcurrentReads` connections.
   */
  openPageRead(range: { firstKey: string; lastKey: string }, statementTimeoutMs: number): Promise<PageRead>;
}

/** True when `s` can stream its pages. */
export function isStreamingSource(s: object): s is StreamingSource {
  return typeof (s as Partial<StreamingSource>).openPageRead === 'function';
}

/** The watermark taken when a rebuild is planned. */
export interface SourceWatermark {
  /** Highest paging key (decimal text), null for an empty source. */
  maxKey: string | null;
  /** Source rows at or below maxKey (decimal text). */
  rows: string;
  /** Source clock when the watermark was taken (ISO 8601 UTC). */
  time: string;
}

/** A readable source of job records, keyed by a numeric paging key. */
export interface JobSource {
  /** Source kind from the configuration (`bareos`, `bacula`, `restic-json`, `borg-json`). */
  readonly kind: string;
  /** IANA zone of the source's naive times (configured, or the source database's TimeZone). */
  timezone(): Promise<string>;
  /** Takes the watermark: max key, row count, source time. */
  watermark(): Promise<SourceWatermark>;
  /** First keys of the fixed pages of `pageSize` jobs at or below `maxKey`, ascending (decimal text). */
  pageFirstKeys(maxKey: string, pageSize: number): Promise<string[]>;
  /** Rows with `firstKey <= key <= lastKey`, ascending by key. */
  readRange(firstKey: string, lastKey: string): Promise<ReadRow[]>;
  /** Rows with the given keys (decimal text), ascending by key. */
  readKeys(keys: string[]): Promise<ReadRow[]>;
  /** Rows of one bucket at or below `maxKey`, ascending by key. */
  readBucket(bucket: string | null, maxKey: string): Promise<ReadRow[]>;
  /** Naive start times at or below `maxKey` made nonexistent or ambiguous by DST; null when the source has no naive times. */
  dstReport(maxKey: string): Promise<DstReport | null>;
  /** Job ids at or below `maxKey` among `jobIds` (to tell deleted jobs from moved ones). */
  existingJobIds(jobIds: string[], maxKey: string): Promise<Set<string>>;
  /** Per-bucket counts and fingerprints at or below `maxKey`. */
  bucketStats(maxKey: string): Promise<BucketStat[]>;
  /** Jobs above the watermark now (the follow-up delta), as a count. */
  deltaCount(maxKey: string | null): Promise<number>;
  /** Closes the source's connections. */
  close(): Promise<void>;
}
