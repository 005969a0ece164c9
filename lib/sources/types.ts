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
] as const;

/** Name of one catalog column carried by a source row. */
export type JobColumn = (typeof JOB_COLUMNS)[number];

/**
 * One job as read from a source: every field as text or NULL.
 * Times are UTC instants `YYYY-MM-DDTHH:MM:SS.ffffffZ`; `bucket` is the source-local date
 * (`YYYY-MM-DD`) of the start time, NULL for jobs that never started; `job_key` is the
 * decimal paging key (Bareos `jobid`).
 */
export type SourceRow = Record<JobColumn, string | null>;

/** Count and fingerprint of one bucket (source-local day of the start time; `null` = no start time). */
export interface BucketStat {
  /** `YYYY-MM-DD`, or null for jobs without a start time. */
  bucket: string | null;
  /** Jobs in the bucket at or below the watermark. */
  count: number;
  /** md5 over the bucket's job ids in key order with status, end time, files and bytes. */
  fingerprint: string;
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
  /** Source kind from the configuration (`bareos`, `bacula`). */
  readonly kind: string;
  /** IANA zone of the source's naive times (configured, or the source database's TimeZone). */
  timezone(): Promise<string>;
  /** Takes the watermark: max key, row count, source time. */
  watermark(): Promise<SourceWatermark>;
  /** First keys of the fixed pages of `pageSize` jobs at or below `maxKey`, ascending (decimal text). */
  pageFirstKeys(maxKey: string, pageSize: number): Promise<string[]>;
  /** Rows with `firstKey <= key <= lastKey`, ascending by key. */
  readRange(firstKey: string, lastKey: string): Promise<SourceRow[]>;
  /** Rows with the given keys (decimal text), ascending by key. */
  readKeys(keys: string[]): Promise<SourceRow[]>;
  /** Rows of one bucket at or below `maxKey`, ascending by key. */
  readBucket(bucket: string | null, maxKey: string): Promise<SourceRow[]>;
  /** Job ids at or below `maxKey` among `jobIds` (to tell deleted jobs from moved ones). */
  existingJobIds(jobIds: string[], maxKey: string): Promise<Set<string>>;
  /** Per-bucket counts and fingerprints at or below `maxKey`. */
  bucketStats(maxKey: string): Promise<BucketStat[]>;
  /** Jobs above the watermark now (the follow-up delta), as a count. */
  deltaCount(maxKey: string | null): Promise<number>;
  /** Closes the source's connections. */
  close(): Promise<void>;
}
