/**
 * The SQL of a staged listing's records as catalog rows (staged.ts, staged-page.ts): times
 * converted in SQL (offset times as instants, naive ones in the source's zone), never through
 * Node's local zone.
 */
import { JOB_COLUMNS } from '../rows';

const FMT = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;
/** A staged time as an instant: offset times as written, naive ones in the source's zone (`zone`, SQL). */
const instant = (col: string, zone: string) =>
  `(CASE s.time_kind WHEN 'naive' THEN s.${col}::timestamp AT TIME ZONE ${zone} ELSE s.${col}::timestamptz END)`;
const utcText = (col: string, zone: string) =>
  `CASE WHEN s.reject_reason IS NULL THEN to_char(${instant(col, zone)} AT TIME ZONE 'UTC', ${FMT}) END`;

/**
 * SQL: the staged record (alias `s`) is not a job a page found gone from the source after the plan
 * (`gone_job`, migration 013): such a job is no longer in the source, for every later read.
 */
export const NOT_GONE = `NOT EXISTS (SELECT 1 FROM gone_job g WHERE g.version_id = s.version_id AND g.job_key = s.seq)`;

/**
 * Staged records of a version as catalog rows (text), with `reject_reason`, `raw` and `seq`; jobs a
 * page found gone from the source are left out. `zone` and `version` are SQL (a parameter or a
 * literal); `table` is where the records are: `staged_record`, or the plan's transaction-local
 * `pg_temp.staged_listing` (lib/sources/staged.ts `copyListingToTemp`) that a refresh compares.
 */
export function stagedSelect(zone: string, version: string, table = 'staged_record'): string {
  return `
SELECT s.seq::text AS job_key, s.job_id, s.job, s.job_name, s.client, s.type, s.level, s.status,
       NULL::text AS sched_time,
       ${utcText('start_text', zone)} AS start_time,
       ${utcText('end_text', zone)} AS end_time,
       ${utcText('end_text', zone)} AS real_end_time,
       s.files, s.bytes, NULL::text AS read_bytes, NULL::text AS job_errors, NULL::text AS pool, NULL::text AS fileset,
       NULL::text AS prior_job_id, NULL::text AS job_tdate, NULL::text AS vol_session_id, NULL::text AS vol_session_time,
       s.comment,
       CASE WHEN s.reject_reason IS NULL THEN
         (CASE s.time_kind WHEN 'naive' THEN s.start_text::timestamp::date ELSE (s.start_text::timestamptz AT TIME ZONE ${zone})::date END)::text
       END AS bucket,
       s.extra::text AS extra,
       s.reject_reason, s.raw, s.seq
FROM ${table} s WHERE s.version_id = ${version} AND ${NOT_GONE}`;
}

/**
 * SQL (over a {@link stagedSelect} row `x`): the 64-bit row hash of the job as the catalog holds it,
 * `hashtextextended` of every JOB_COLUMNS value in text form (NULL as `\\N`), the counterpart of a
 * director's (lib/sources/bareos-columns.ts `bareosRowHash`): the page's COPY stores it
 * (`job.row_hash`), a listing refresh compares the next listing's records against it.
 */
export const STAGED_ROW_HASH = `hashtextextended(concat_ws(E'\\x1f', ${JOB_COLUMNS.map(
  (c) => `coalesce(x.${c}, E'\\\\N')`,
).join(', ')}), 0)`;
