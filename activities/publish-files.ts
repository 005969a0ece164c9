/**
 * The shrink guard's file part (rebuilds with `--files`): a version without file records may not
 * replace an active version that has them, and no dated bucket may lose more than half of its file
 * records against the active version; `--allow-shrink` lifts both.
 */
import type { PoolClient } from 'pg';
import { fileCountsByBucket, versionHasFiles } from '../lib/catalog';

/** Share (0..1) of a bucket's file records it may lose before the guard refuses. */
export const FILE_SHRINK_SHARE = 0.5;

/** The file figures of the active version and the new one, counted before the publish transaction. */
export interface FileShrinkFigures {
  /** The active version has file records. */
  beforeHasFiles: boolean;
  /** The new version rebuilds file records. */
  afterHasFiles: boolean;
  /** File records per bucket (`none` for jobs without a start time) of each. */
  before: Map<string, number>;
  after: Map<string, number>;
}

/** Counts the file figures of both versions (scans on the caller's session, without statement timeout). */
export async function fileShrinkFigures(
  c: PoolClient,
  previous: string,
  versionId: string,
): Promise<FileShrinkFigures> {
  const [beforeHasFiles, afterHasFiles] = [await versionHasFiles(c, previous), await versionHasFiles(c, versionId)];
  const named = (m: Map<string | null, number>) => new Map([...m].map(([b, n]) => [b ?? 'none', n]));
  return {
    beforeHasFiles,
    afterHasFiles,
    before: beforeHasFiles ? named(await fileCountsByBucket(c, previous)) : new Map(),
    after: beforeHasFiles && afterHasFiles ? named(await fileCountsByBucket(c, versionId)) : new Map(),
  };
}

/**
 * Why the file figures refuse the publish, or null when they allow it. Buckets the new version has
 * no job in are left to the jobs' shrink guard (pruned history is not shrinkage).
 * @param jobBucketsAfter the buckets the new version has jobs in.
 */
export function fileShrinkProblem(f: FileShrinkFigures, previous: string, jobBucketsAfter: Set<string>): string | null {
  if (f.beforeHasFiles && !f.afterHasFiles)
    return (
      `shrink guard: the active version ${previous} has file records and this rebuild has none (started without --files); ` +
      `not published. Start the rebuild with --files, or pass --allow-shrink to publish a catalog without file records`
    );
  if (!f.beforeHasFiles) return null;
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
