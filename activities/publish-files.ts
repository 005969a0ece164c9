/**
 * The shrink guard's file part (rebuilds with `--files`): a version without file records may not
 * replace an active version that has them. Then, for a director source, a **per-job** rule: a job's
 * file records may shrink against the active version only when the director purged them
 * (`PurgedFiles` set in the source when the version is published: retention, `purge files`) or the
 * job is gone; those prunes are published and reported. Any other loss (a catalog restored from an
 * old dump, a half-finished bscan) refuses, naming the jobs. Listing sources (restic, borg) keep the
 * bucket rule: no dated bucket may lose more than half of its file records. `--allow-shrink` lifts
 * the refusals; prunes are reported anyway.
 */
import type { PoolClient } from 'pg';
import type { JobFileLoss } from '../lib/catalog';
import {
  baseVersionOf,
  fileCountsByBucket,
  loadVersion,
  refreshShrunkJobFiles,
  shrunkJobFiles,
  versionHasFiles,
} from '../lib/catalog';
import type { SourceConfig } from '../lib/config';
import { isFileSource } from '../lib/config';
import type { SourceRegistry } from '../lib/sources';
import { BareosSource } from '../lib/sources';

export { prunedFilesSentence } from '../lib/catalog';

/** Share (0..1) of a bucket's file records it may lose before the bucket rule refuses (listing sources). */
export const FILE_SHRINK_SHARE = 0.5;

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

/** What the per-job rule found: the director's prunes, and the losses it did not make. */
export interface JobFileLosses {
  /** Jobs whose file records shrank and whose `PurgedFiles` is set, and the records they lost. */
  pruned: { jobs: number; records: number };
  /** Jobs whose file records shrank with `PurgedFiles` 0: count, records lost, and the first 10 by job id. */
  lost: { jobs: number; records: number; first: JobFileLoss[] };
}

/** The director source of the new version, when it is one (its files are guarded per job). */
async function directorOf(c: PoolClient, sources: SourceRegistry, versionId: string): Promise<BareosSource | null> {
  const { source_name: name } = await loadVersion(c, versionId);
  let config: SourceConfig;
  try {
    config = sources.config(name);
  } catch {
    return null; // a source this worker does not serve: the bucket rule
  }
  if (isFileSource(config)) return null; // a listing: staged per version, the bucket rule
  const s = sources.get(name);
  return s instanceof BareosSource ? s : null;
}

/** Splits the shrunk jobs into the director's prunes and the other losses, asking it of `PurgedFiles` now. */
async function judgeLosses(source: BareosSource, shrunk: JobFileLoss[]): Promise<JobFileLosses> {
  const purged = await source.purgedFileJobs(shrunk.map((j) => j.jobId));
  const out: JobFileLosses = { pruned: { jobs: 0, records: 0 }, lost: { jobs: 0, records: 0, first: [] } };
  for (const j of shrunk) {
    const part = purged.has(j.jobId) ? out.pruned : out.lost;
    part.jobs++;
    part.records += j.before - j.after;
    if (part === out.lost && out.lost.first.length < 10) out.lost.first.push(j);
  }
  return out;
}

/** The jobs whose file records shrank: a refresh's among the jobs it wrote again, else by comparing both versions. */
async function jobFileLosses(c: PoolClient, previous: string, versionId: string): Promise<JobFileLoss[]> {
  if (await baseVersionOf(c, versionId)) return refreshShrunkJobFiles(c, versionId);
  return shrunkJobFiles(c, previous, versionId);
}

/**
 * Counts the file figures of both versions (scans on the caller's session, without statement
 * timeout): per job for a director source (asking it, now, which of the jobs whose files shrank it
 * purged), per bucket otherwise.
 */
export async function fileShrinkFigures(
  c: PoolClient,
  sources: SourceRegistry,
  previous: string,
  versionId: string,
): Promise<FileShrinkFigures> {
  const [beforeHasFiles, afterHasFiles] = [await versionHasFiles(c, previous), await versionHasFiles(c, versionId)];
  const director = await directorOf(c, sources, versionId);
  const rule = director ? 'job' : 'bucket';
  const both = beforeHasFiles && afterHasFiles;
  const named = (m: Map<string | null, number>) => new Map([...m].map(([b, n]) => [b ?? 'none', n]));
  const bucketRule = rule === 'bucket' && both;
  return {
    beforeHasFiles,
    afterHasFiles,
    rule,
    losses: director && both ? await judgeLosses(director, await jobFileLosses(c, previous, versionId)) : null,
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
