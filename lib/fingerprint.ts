/**
 * The fingerprint of a job record, defined side by side for every place that computes it, so that
 * they cannot drift apart: `test/fingerprint.test.ts` evaluates all four on the same rows.
 *
 * The fingerprint input of one job is the text `job id|status|end time|files|bytes`, each field in
 * its catalog text form (end time as UTC `YYYY-MM-DDTHH:MI:SS.USZ`), `\N` for NULL. A bucket's
 * fingerprint is the md5 of its jobs' inputs joined by newlines in key order.
 */
import { bareosUtcText } from './sources/bareos-columns';
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

/** SQL over a Bareos/Bacula `job` row aliased `j`; `$1` is the source's IANA zone (naive times). */
export const BAREOS_FINGERPRINT_ROW = `j.jobid::text || '|' || coalesce(NULLIF(j.jobstatus::text, ''), '\\N') || '|' || coalesce(${bareosUtcText(
  'j.endtime',
)}, '\\N') || '|' || coalesce(j.jobfiles::text, '\\N') || '|' || coalesce(j.jobbytes::text, '\\N')`;

/** SQL over a staged listing record aliased `x` (its fields already in text form). */
export const STAGED_FINGERPRINT_ROW = `coalesce(x.job_id, '\\N') || '|' || coalesce(x.status, '\\N') || '|' || coalesce(x.end_time, '\\N') || '|' || coalesce(x.files, '\\N') || '|' || coalesce(x.bytes, '\\N')`;
