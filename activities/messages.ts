/**
 * The wording of the activities' events, reports and failures: one line each, for the operator
 * (`catalog-rebuild events`, `status`, the Web UI). Pure functions of counts and names.
 */
import { NotPublishableError } from '../lib/errors';
import type { RenumberedJob, RejectSampleRow, ShrunkBucket, UnknownCodeCount } from '../lib/catalog';
import { goneJobsSentence } from '../lib/catalog';
import { describeRejects } from '../lib/page/messages';
import type { DstReport } from '../lib/sources/types';

/** What a plan fixed, for the `planned` event. Counts and keys as stored (keys decimal text). */
export interface PlannedFacts {
  versionId: string;
  pagesTotal: number;
  pageSize: number;
  /** Highest paging key at plan; null for an empty source. */
  maxKey: string | null;
  /** Source rows at or below the watermark, decimal text. */
  rows: string;
  /** Source clock at plan (ISO 8601 UTC). */
  time: string;
  /** sha256 of a staged listing; null for database sources. */
  snapshot: string | null;
  /** Listing records dropped as repeats of an id. */
  duplicates: number;
  /** For pages sized `auto`, why this size (e.g. `16 MiB of row text at 212 bytes a row`); absent when fixed. */
  autoSizing?: string;
  /** Listing values that were not UTF-8, decoded from `encoding`, by field name. */
  decoded?: { encoding: string; values: Record<string, number> };
}

/** The `planned` event's message: pages, page size and the watermark (a listing's sha256 or the highest job id). */
export function plannedMessage(p: PlannedFacts): string {
  const decoded = Object.entries(p.decoded?.values ?? {});
  const n = decoded.reduce((a, [, c]) => a + c, 0);
  const decodedText = n
    ? `, ${n} values that were not UTF-8 decoded from ${p.decoded!.encoding} (${decoded.map(([f, c]) => `${f} ${c}`).join(', ')})`
    : '';
  const watermark = p.snapshot
    ? `listing sha256 ${p.snapshot} (${p.rows} records staged${p.duplicates ? `, ${p.duplicates} repeated ids dropped, the last listed kept` : ''}${decodedText})`
    : `job ${p.maxKey ?? 'none'}`;
  const sizing = p.autoSizing ? ` (auto: ${p.autoSizing})` : '';
  return `planned version ${p.versionId}: ${p.pagesTotal} pages of ${p.pageSize} jobs${sizing}, watermark ${watermark} at ${p.time}`;
}

/** The `abandoned` event of a version superseded when a new rebuild of its catalog is planned. */
export function supersededMessage(versionId: string): string {
  return `version ${versionId} abandoned: a new rebuild started (the previous one was terminated or lost)`;
}

/**
 * The `page_retry` event: who ran the previous attempt and how it failed. A worker that died within
 * milliseconds of starting the attempt left neither a heartbeat nor a claim row: it is unknown.
 */
export function pageRetryMessage(pageNo: number, attempt: number, worker: string | null, failure: string): string {
  const by = worker ?? 'an unknown worker (it died before its first heartbeat and claim row)';
  return `page ${pageNo} attempt ${attempt}: previous attempt by ${by} failed: ${failure}`;
}

/** The `zombie_ended` event: sessions of an earlier attempt of a page ended after waiting `waitedMs`. */
export function zombieEndedMessage(pageNo: number, pids: number[], waitedMs: number): string {
  return `page ${pageNo}: an earlier attempt's transaction was still open after ${Math.round(waitedMs / 1000)} s (worker not responding); ended catalog session${pids.length === 1 ? '' : 's'} ${pids.join(', ')}`;
}

/** What reconciliation found besides mismatches: reported, never blocking. */
export interface ReconcileWarnings {
  /** Jobs with codes the product does not know, per field and code. */
  unknownCodes: UnknownCodeCount[];
  /** DST-affected start times; `{ error }` when they could not be counted; null when the source has no naive times. */
  dst: DstReport | { error: string } | null;
  /** Source records dropped as repeats of a job id. */
  duplicateRecords: number;
}

/** The warnings part of a `reconciled` message: `; warnings: …`, or empty when there are none. */
export function warningsNote(w: ReconcileWarnings): string {
  const parts: string[] = [];
  const warnings = w.unknownCodes.reduce((n, c) => n + c.jobs, 0);
  if (warnings) {
    const codes = w.unknownCodes.slice(0, 5).map((c) => `${c.field} ${JSON.stringify(c.code)} × ${c.jobs}`);
    parts.push(`${warnings} jobs with unknown codes kept verbatim (${codes.join(', ')})`);
  }
  const dst = w.dst;
  if (dst && 'error' in dst) parts.push(`DST counts unavailable: ${dst.error}`);
  else if (dst && (dst.nonexistent || dst.ambiguous))
    parts.push(
      `${dst.nonexistent} nonexistent and ${dst.ambiguous} ambiguous start times at DST changes in ${dst.zone}`,
    );
  if (w.duplicateRecords) parts.push(`${w.duplicateRecords} repeated job ids dropped`);
  return parts.length ? `; warnings: ${parts.join('; ')}` : '';
}

/** The outcome of one reconciliation round, as the `reconciled` message states it. */
export interface ReconcileOutcome {
  round: number;
  /** Source buckets compared. */
  buckets: number;
  sourceRows: number;
  catalogRows: number;
  rejects: number;
  /** Source jobs above the watermark. */
  delta: number;
  /** Jobs gone from the source after the plan (left out by their pages). */
  gone?: number;
  /** Names of the buckets that differ, sorted. */
  mismatched: string[];
  sampleMismatches: number;
  /** Every bucket and sampled record matched, but the quarantined records exceed `maxRejects`. */
  overThreshold: boolean;
  maxRejects: number;
}

/**
 * The `reconciled` event's message: every bucket matches (with counts and delta), or they match
 * but too many records are quarantined, or which buckets differ (first 10) and how many sampled
 * jobs differ. Warnings are appended unless buckets differ.
 */
export function reconciledMessage(o: ReconcileOutcome, w: ReconcileWarnings): string {
  if (!o.mismatched.length && !o.sampleMismatches && !o.overThreshold) {
    return `round ${o.round}: ${o.buckets} buckets match (${o.sourceRows} jobs = ${o.catalogRows} in the catalog + ${o.rejects} quarantined; delta ${o.delta} jobs after the watermark${o.gone ? `, ${goneJobsSentence(o.gone)}` : ''})${warningsNote(w)}`;
  }
  if (o.overThreshold) {
    return `round ${o.round}: ${o.buckets} buckets match, but ${o.rejects} source records are quarantined (threshold ${o.maxRejects})${warningsNote(w)}`;
  }
  const first = o.mismatched.slice(0, 10).join(', ');
  return `round ${o.round}: ${o.mismatched.length} buckets differ (${first}${o.mismatched.length > 10 ? ', …' : ''}), ${o.sampleMismatches} sampled jobs differ`;
}

/** The `unreadable` message of a round whose source could not be read: every catalog bucket is named unreadable, none counted as empty. */
export function sourceUnreadableMessage(
  round: number,
  source: string,
  catalogBuckets: (string | null)[],
  detail: string,
): string {
  const dated = catalogBuckets.filter((b): b is string => b !== null);
  const span = dated.length ? `${dated[0]} … ${dated[dated.length - 1]}` : 'none';
  return (
    `round ${round}: source ${source} could not be read for reconciliation, so every bucket is unreadable ` +
    `(${catalogBuckets.length} buckets in the catalog, ${span}) and none is counted as empty: ${detail}`
  );
}

/**
 * The failure of a rebuild whose quarantined records exceed the source's `maxRejects`: the first
 * reasons, where every record is kept, and the two ways out. {@link rejectThresholdError} wraps it.
 */
export function rejectThresholdMessage(f: {
  source: string;
  versionId: string;
  rejects: number;
  maxRejects: number;
  sample: RejectSampleRow[];
}): string {
  const reasons = describeRejects(f.sample.map((r) => ({ jobKey: r.job_key, jobId: r.job_id, reason: r.reason })));
  return (
    `${f.rejects} source records of ${f.source} are quarantined, more than the threshold of ${f.maxRejects}: ${reasons}. ` +
    `Version ${f.versionId} is not published. The reject table holds every reason and raw record ` +
    `(SELECT * FROM reject WHERE version_id = ${f.versionId}); fix the source, or raise maxRejects of source ${f.source} in the workers' configuration file and restart the workers (they read it at start) to publish with them.`
  );
}

/** The `unreadable` message of a bucket whose repair could not read it (`what is unreadable: why`). */
export function bucketUnreadableMessage(unreadable: string, versionId: string): string {
  return `${unreadable}; it is never counted as empty, so version ${versionId} is not published`;
}

/** What a bucket's repair did. */
export interface RepairFacts {
  bucket: string | null;
  upserted: number;
  deleted: number;
  /** Records that belong to this bucket now and were read by key. */
  moved: number;
  rejects: number;
  /** The bucket's catalog rows plus rejects equal the source's records afterwards. */
  ok: boolean;
}

/** The `repaired` event's message. */
export function repairedMessage(r: RepairFacts): string {
  return `bucket ${r.bucket ?? 'none'}: ${r.upserted} rows upserted, ${r.deleted} deleted, ${r.moved} moved, ${r.rejects} quarantined; ${r.ok ? 'verified' : 'still differs'}`;
}

/**
 * The note on job names whose job id changed from the active version (a source re-created from
 * volumes renumbers jobs): `; N job names have a new job id (source renumbered?): name (old → new), …`
 * (first 10; `N+` when the list was truncated), or empty.
 */
export function renumberedNote(renumbered: { jobs: RenumberedJob[]; truncated: boolean } | null): string {
  if (!renumbered?.jobs.length) return '';
  const names = renumbered.jobs.slice(0, 10).map((j) => `${j.job} (${j.previousJobId} → ${j.jobId})`);
  return `; ${renumbered.jobs.length}${renumbered.truncated ? '+' : ''} job names have a new job id (source renumbered?): ${names.join(', ')}${renumbered.jobs.length > 10 ? ', …' : ''}`;
}

/** The shrink guard's refusal: which buckets lost how many jobs (first 62), the catalog as a whole when it did, and how to publish anyway. */
export function shrinkGuardMessage(f: {
  shrunk: ShrunkBucket[];
  /** The catalog as a whole, when it lost too many jobs (lib/catalog/publish.ts `shrunkCatalog`). */
  whole?: { before: string; after: string } | null;
  share: number;
  minJobs: number;
  previousVersionId: string;
  renumberedNote: string;
}): string {
  const names = f.shrunk.map((r) => `${r.bucket} (${r.before} → ${r.after})`);
  const limits = `more than ${Math.round(f.share * 100)}% and at least ${f.minJobs} jobs compared with active version ${f.previousVersionId}`;
  const whole = f.whole
    ? `the catalog as a whole (${f.whole.before} → ${f.whole.after} jobs on the days it still covers)`
    : '';
  const what = f.shrunk.length
    ? `${f.shrunk.length} buckets lost ${limits}: ${names.slice(0, 62).join(', ')}${names.length > 62 ? ', …' : ''}${whole ? `; so did ${whole}` : ''}`
    : `${whole} lost ${limits}`;
  return `shrink guard: ${what}${f.renumberedNote}; rerun with --allow-shrink if this is intended`;
}

/** The `published` event's message; `gone`: jobs gone from the source after the plan, left out (named when any). */
export function publishedMessage(
  versionId: string,
  previousVersionId: string | null,
  allowShrink: boolean,
  note: string,
  gone = 0,
): string {
  return `version ${versionId} published${previousVersionId ? `, replacing version ${previousVersionId}` : ''}${allowShrink ? ' (shrink allowed)' : ''}${note}${gone ? `; ${goneJobsSentence(gone)}, left out (a follow-up delta)` : ''}`;
}

/** The NOT_PUBLISHABLE error of {@link rejectThresholdMessage}, which a reconciliation throws. */
export function rejectThresholdError(f: Parameters<typeof rejectThresholdMessage>[0]): NotPublishableError {
  return new NotPublishableError(rejectThresholdMessage(f));
}
