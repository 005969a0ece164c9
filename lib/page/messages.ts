/**
 * The wording of a page's events (`rejected`, `gone`, `duplicates`): one line each, for the operator
 * (`catalog-rebuild events`, `status`, the Web UI). Pure functions of counts and names.
 */
import type { GoneJobRecord } from '../catalog';
import { goneJobsSentence } from '../catalog';
import type { RejectRecord } from '../validate';

/** The first `limit` (default 3) quarantined records of a list, for messages: `record key (id): reason`, `; …` when there are more. */
export function describeRejects(rejects: Pick<RejectRecord, 'jobKey' | 'jobId' | 'reason'>[], limit = 3): string {
  return (
    rejects
      .slice(0, limit)
      .map(
        (r) =>
          `record ${r.jobKey}${r.jobId && r.jobId !== r.jobKey ? ` (${r.jobId.length > 16 ? `${r.jobId.slice(0, 12)}…` : r.jobId})` : ''}: ${r.reason}`,
      )
      .join('; ') + (rejects.length > limit ? '; …' : '')
  );
}

/** The `rejected` event of a page: how many records were quarantined and the first reasons. */
export function pageRejectsMessage(
  pageNo: number,
  rejects: Pick<RejectRecord, 'jobKey' | 'jobId' | 'reason'>[],
): string {
  return `page ${pageNo}: ${rejects.length} source records quarantined: ${describeRejects(rejects)}`;
}

/** The `rejected` event of a page's file records: how many, and the first few with their reasons. */
export function pageFileRejectsMessage(
  pageNo: number,
  rejects: number,
  first: { jobId: string; fileId: string; reason: string }[],
): string {
  const shown = first.map((r) => `job ${r.jobId} file ${r.fileId}: ${r.reason}`).join('; ');
  return `page ${pageNo}: ${rejects} file record${rejects === 1 ? '' : 's'} quarantined (their jobs and other files are written): ${shown}${rejects > first.length ? '; …' : ''}`;
}

/**
 * The `gone` event of a page: the jobs it left out because they are no longer in the source (the
 * first 3, their id shortened to 12 characters, and why).
 */
export function pageGoneMessage(pageNo: number, gone: Pick<GoneJobRecord, 'jobId' | 'reason'>[]): string {
  const shown = gone
    .slice(0, 3)
    .map((g) => `job ${g.jobId.length > 16 ? `${g.jobId.slice(0, 12)}…` : g.jobId}: ${g.reason}`)
    .join('; ');
  return `page ${pageNo}: ${goneJobsSentence(gone.length)}, left out of the version (a follow-up delta): ${shown}${gone.length > 3 ? '; …' : ''}`;
}

/** The `duplicates` event of a page. */
export function pageDuplicatesMessage(pageNo: number, duplicates: number): string {
  return `page ${pageNo}: ${duplicates} rows repeated a job id of the page; the last row read was kept`;
}
