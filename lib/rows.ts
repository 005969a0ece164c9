/**
 * The row model every source, page write and check shares: a job as read from a source (every
 * field as text or NULL, so 64-bit counters and timestamps never pass through a JS number or
 * Node's local time zone), a record a page quarantines, and a job gone from the source.
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
 * The job columns a page's figures read from its COPY lines (lib/page/digest.ts): the paging key,
 * the three codes, bytes and the bucket.
 */
export const FIGURE_COLUMNS = ['job_key', 'type', 'level', 'status', 'bytes', 'bucket'] as const;

/** A field of a page's COPY line. */
export type PageCopyColumn = 'version_id' | 'page_no' | 'row_hash' | JobColumn;

/**
 * The fields of a page's COPY line, in order (a page read's `COPY (SELECT …) TO STDOUT`, the page
 * write's `COPY … FROM STDIN`): `version_id`, `page_no`, the {@link FIGURE_COLUMNS}, `row_hash`,
 * then the other JOB_COLUMNS in their order. The stream that adds up the page's figures reads a
 * line only as far as `row_hash` (about 60 bytes) and passes the names, times and comments after
 * it on unread: with `row_hash` last, it scanned about 200 bytes of each line (docs/performance.md).
 */
export const PAGE_COPY_COLUMNS: readonly PageCopyColumn[] = [
  'version_id',
  'page_no',
  ...FIGURE_COLUMNS,
  'row_hash',
  ...JOB_COLUMNS.filter((c) => !(FIGURE_COLUMNS as readonly string[]).includes(c)),
];

/**
 * The SELECT list of a page's COPY line ({@link PAGE_COPY_COLUMNS} order), shared by every page
 * read: `version_id` and `page_no` as literals (COPY takes no parameters), `row_hash` the source's
 * expression `rowHash`, each job column the expression `column` gives it; joined by `separator`.
 * @throws Error when `versionId` is not decimal digits or `pageNo` not an integer.
 */
export function pageCopySelectList(
  page: { versionId: string; pageNo: number },
  rowHash: string,
  column: (c: JobColumn) => string,
  separator = ', ',
): string {
  if (!/^\d+$/.test(page.versionId) || !Number.isInteger(page.pageNo)) throw new Error('bad version or page number');
  const field = (c: PageCopyColumn): string =>
    c === 'version_id'
      ? page.versionId
      : c === 'page_no'
        ? String(page.pageNo)
        : c === 'row_hash'
          ? rowHash
          : column(c);
  return PAGE_COPY_COLUMNS.map(field).join(separator);
}

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
 * A job of a page gone from the source after the plan (a snapshot forgotten or an archive pruned
 * before its page listed it): left out of the page, which records it (`gone_job`).
 */
export interface GoneJob {
  /** Paging key (decimal text). */
  jobKey: string;
  jobId: string;
  /** `YYYY-MM-DD`, or null for a job without start time. */
  bucket: string | null;
  /** Why, e.g. `the snapshot is no longer in the repository: …`. */
  reason: string;
}
