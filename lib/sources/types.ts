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
  /**
   * Per-bucket counts, digests, bytes and id spans at or below `maxKey`, in one statement on a
   * session without statement timeout.
   */
  bucketStats(maxKey: string): Promise<BucketStat[]>;
  /**
   * Rows of one bucket with `span.min <= key <= span.max` and key at or below `maxKey`, ascending
   * by key, read by key range (no index on start time is needed) on a session without statement timeout.
   */
  readBucketInSpan(bucket: string | null, maxKey: string, span: KeySpan): Promise<ReadRow[]>;
  /** Jobs above the watermark now (the follow-up delta), as a count. */
  deltaCount(maxKey: string | null): Promise<number>;
  /** Closes the source's connections. */
  close(): Promise<void>;
}
