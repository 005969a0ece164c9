/**
 * The shrink guard's file part (rebuilds with `--files`): a version without file records may not
 * replace an active version that has them. Then, for a director source, a **per-job** rule: a job's
 * file records may shrink against the active version only when the director purged them
 * (`PurgedFiles` now set: retention, `purge files`) or the job is gone; those prunes are published
 * and reported. Any other loss (a catalog restored from an old dump, a half-finished bscan) refuses,
 * naming the jobs. Listing sources (restic, borg) keep the bucket rule: no dated bucket may lose more
 * than half of its file records. `--allow-shrink` lifts the refusals; prunes are reported anyway.
 */
import type { PoolClient } from 'pg';
import type { JobFileLosses } from '../lib/catalog';
import { fileCountsByBucket, jobFileLosses, loadVersion, versionHasFiles } from '../lib/catalog';
import type { SourceRegistry } from '../lib/sources';

export { prunedFilesSentence } from '../lib/catalog';

/** Share (0..1) of a bucket's file records it may lose before the bucket rule refuses (listing sources). */
export const FILE_SHRINK_SHARE = 0.5;

/** Source kinds whose file records are guarded per job (a director's `PurgedFiles` tells a prune from a loss). */
const PER_JOB_KINDS = new Set(['bareos', 'bacula']);

/** The file figures of the active version and the new one, counted before the publish transaction. */
export interface FileShrinkFigures {
  /** The active version has file records. */
  beforeHasFiles: boolean;
  /** The new version rebuilds file records. */
  afterHasFiles: boolean;
  /** `job`: the per-job rule of a director source; `bucket`: the bucket rule of a listing source. */
  rule: 'job' | 'bucket';
  /** Per-job losses (rule `job`, both versions with file records); else null. */
  losses: JobFileLosses | null;
  /** File records per bucket (`none` for jobs without a start time) of each (rule `bucket`). */
  before: Map<string, number>;
  after: Map<string, number>;
}

/** Which rule guards the new version's files: per job for a director source, else per bucket. */
async function ruleOf(c: PoolClient, sources: SourceRegistry, versionId: string): Promise<'job' | 'bucket'> {
  const { source_name: name } = await loadVersion(c, versionId);
  try {
    return PER_JOB_KINDS.has(sources.config(name).kind) ? 'job' : 'bucket';
  } catch {
    return 'bucket'; // a source this worker does not serve: the stricter-by-volume rule
  }
}

/**
 * Counts the file figures of both versions (scans on the caller's session, without statement
 * timeout): per job for a director source, per bucket otherwise.
 */
export async function fileShrinkFigures(
  c: PoolClient,
  sources: SourceRegistry,
  previous: string,
  versionId: string,
): Promise<FileShrinkFigures> {
  const [beforeHasFiles, afterHasFiles] = [await versionHasFiles(c, previous), await versionHasFiles(c, versionId)];
  const rule = await ruleOf(c, sources, versionId);
  const both = beforeHasFiles && afterHasFiles;
  const named = (m: Map<string | null, number>) => new Map([...m].map(([b, n]) => [b ?? 'none', n]));
  const bucketRule = rule === 'bucket' && both;
  return {
    beforeHasFiles,
    afterHasFiles,
    rule,
    losses: rule === 'job' && both ? await jobFileLosses(c, previous, versionId) : null,
    before: bucketRule ? named(await fileCountsByBucket(c, previous)) : new Map(),
    after: bucketRule ? named(await fileCountsByBucket(c, versionId)) : new Map(),
  };
}

/** `2,930` */
const n = (x: number) => x.toLocaleString('en-US');

/**
 * Why the file figures refuse the publish, or null when they allow it. Per job: any job whose file
 * records shrank while its `PurgedFiles` is 0. Per bucket: buckets the new version has no job in are
 * left to the jobs' shrink guard (pruned history is not shrinkage).
 * @param jobBucketsAfter the buckets the new version has jobs in.
 */
export function fileShrinkProblem(f: FileShrinkFigures, previous: string, jobBucketsAfter: Set<string>): string | null {
  if (f.beforeHasFiles && !f.afterHasFiles)
    return (
      `shrink guard: the active version ${previous} has file records and this rebuild has none (started without --files); ` +
      `not published. Start the rebuild with --files, or pass --allow-shrink to publish a catalog without file records`
    );
  if (!f.beforeHasFiles) return null;
  if (f.rule === 'job') {
    const lost = f.losses?.lost;
    if (!lost?.jobs) return null;
    const shown =
      lost.first.map((j) => `job ${j.jobId} (${n(j.before)} → ${n(j.after)})`).join(', ') +
      (lost.jobs > lost.first.length ? `, … (${n(lost.jobs)} jobs)` : '');
    return (
      `shrink guard: ${n(lost.jobs)} job${lost.jobs === 1 ? '' : 's'} lost ${n(lost.records)} file record${lost.records === 1 ? '' : 's'} ` +
      `against the active version ${previous} although the director did not purge them (PurgedFiles = 0): ${shown}. ` +
      `A catalog restored from an old dump or a half-finished bscan does this; not published (--allow-shrink publishes anyway)`
    );
  }
  const shrunk: string[] = [];
  for (const [bucket, before] of f.before) {
    if (!jobBucketsAfter.has(bucket)) continue;
    const after = f.after.get(bucket) ?? 0;
    if (before > 0 && after < before * (1 - FILE_SHRINK_SHARE)) shrunk.push(`${bucket} (${before} → ${after})`);
  }
  if (!shrunk.length) return null;
  const shown = shrunk.slice(0, 10).join(', ') + (shrunk.length > 10 ? `, … (${shrunk.length} buckets)` : '');
  return (
    `shrink guard: ${shrunk.length} bucket${shrunk.length === 1 ? '' : 's'} lost more than half of ${shrunk.length === 1 ? 'its' : 'their'} ` +
    `file records against the active version ${previous}: ${shown}; not published (--allow-shrink publishes anyway)`
  );
}
