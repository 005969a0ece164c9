/**
 * The reconciliation's sample (design.md G6): records of a version compared field by field with the
 * source, for full rebuilds and refreshes alike.
 */
import { sampleCatalogRows } from '../lib/catalog';
import { withLongSession } from '../lib/db';
import { NotPublishableError } from '../lib/errors';
import type { JobSource } from '../lib/sources/types';
import type { ReconcileInput } from '../workflows/activity-types';
import type { ActivityContext } from './context';
import { readSource, SourceUnreadable } from './failures';
import type { SampleComparison } from './reconcile-compare';
import { compareSample } from './reconcile-compare';

/** Records compared field by field per round unless the input says otherwise. */
export const DEFAULT_SAMPLE_SIZE = 1000;

/**
 * Samples rows of the version's own table (seeded by version and round; a refresh's: the jobs it
 * wrote) and compares them with the source's rows of the same keys. Nothing is compared for a
 * version without rows or an empty source.
 * @throws NotPublishableError when the source cannot read the sampled keys.
 */
export async function compareSampleWithSource(
  ctx: ActivityContext,
  input: ReconcileInput,
  source: JobSource,
  maxKey: string | null,
): Promise<SampleComparison & { sampled: number }> {
  const sample = await withLongSession(ctx.pool, (c) =>
    sampleCatalogRows(c, input.versionId, `${input.versionId}:${input.round}`, input.sampleSize ?? DEFAULT_SAMPLE_SIZE),
  );
  if (!sample.length || !maxKey) return { mismatches: 0, diffs: [], buckets: new Set(), sampled: sample.length };
  const keys = sample.map((r) => r.job_key!).sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
  const srcRows = await readSource(`${keys.length} sampled jobs of source ${input.source}`, () =>
    source.readKeys(keys),
  ).catch((err: unknown) => {
    throw err instanceof SourceUnreadable ? new NotPublishableError(`round ${input.round}: ${err.message}`) : err;
  });
  return { ...compareSample(sample, srcRows), sampled: sample.length };
}
