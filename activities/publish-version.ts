/**
 * The `publishVersion` activity: the fenced flip of a catalog's active pointer (design.md G7), with
 * the shrink guard and the report of renumbered jobs.
 */
import { log } from '@temporalio/activity';
import type { PoolClient } from 'pg';
import type { BucketJobCount, RenumberedJob } from '../lib/catalog';
import {
  activeVersionId,
  baseVersionOf,
  bucketJobCounts,
  flipActive,
  storedBucketJobCounts,
  goneJobs,
  latestReconciliationPassed,
  latestRetiredVersionId,
  lockCatalogForPublish,
  lockVersionRow,
  renumberedJobs,
  requireVersionStatus,
  retireVersion,
  shrunkBuckets,
  shrunkCatalog,
  versionWasRepaired,
} from '../lib/catalog';
import { withLongSession, withTransaction } from '../lib/db';
import { NotPublishableError } from '../lib/errors';
import type { PublishVersionInput, PublishVersionResult } from '../workflows/activity-types';
import type { ActivityContext } from './context';
import { guard } from './failures';
import { withHeartbeat } from './heartbeat';
import { publishedMessage, renumberedNote, shrinkGuardMessage } from './messages';
import type { FileShrinkFigures } from './publish-files';
import { fileShrinkFigures, fileShrinkProblem, prunedFilesSentence } from './publish-files';
import { storeBucketFigures } from './version-lifecycle';

/** Default share (0..1) of a bucket's jobs it may lose before the shrink guard refuses. */
const SHRINK_SHARE = 0.1;
/** Default jobs a bucket must lose at least before the shrink guard refuses. */
const SHRINK_MIN_JOBS = 5;

/** The shrink guard's figures, counted before the publish transaction. */
interface ShrinkFigures {
  /** The active version they were counted for. */
  previous: string;
  before: BucketJobCount[];
  after: BucketJobCount[];
  /** File records per bucket of both (rebuilds with `--files`). */
  files: FileShrinkFigures;
}

/** Job names whose job id changed from the active version, or why they were not compared. */
interface Renumbering {
  renumbered: { jobs: RenumberedJob[]; truncated: boolean } | null;
  error: string | null;
}

/**
 * Publishes a version in one transaction under the catalog's publish lock: requires it to be
 * `verifying` with a passing reconciliation, applies the shrink guard (its per-bucket counts taken
 * beforehand, heartbeating, on a session without statement timeout), flips `active`, marks the
 * previous active version `retired`, and records `published` (naming the jobs its pages found gone
 * from the source after the plan, when any). A retry after commit returns the version it replaced.
 * @throws NOT_PUBLISHABLE (non-retryable) naming the reason and buckets; VERSION_FENCED when the
 *   version was abandoned, failed or dropped.
 */
export async function publishVersion(ctx: ActivityContext, input: PublishVersionInput): Promise<PublishVersionResult> {
  return withHeartbeat(
    () => ({ stage: 'publishing' }),
    () =>
      guard(async () => {
        // Read before the publish transaction (both versions are immutable by now) so it stays short:
        // the scans run on sessions without statement timeout, the transaction only compares figures.
        // A repair rewrote rows after the seal counted the buckets: count them again, for this
        // guard and for the next publish's (when this version is the one replaced).
        if (await versionWasRepaired(ctx.pool, input.catalog, input.versionId))
          await storeBucketFigures(ctx, input.versionId, { fromPages: false });
        const activeBefore = await activeVersionId(ctx.pool, input.catalog);
        const renumbering = await compareJobIds(ctx, input, activeBefore);
        const shrink = await shrinkFigures(ctx, input, activeBefore);
        return withTransaction(ctx.pool, (c) => publishInTransaction(ctx, c, input, activeBefore, renumbering, shrink));
      }),
  );
}

/**
 * Jobs per dated bucket of the active version and the new one, and their file figures (the shrink
 * guard's figures and the report of the director's prunes), or null for a first publish.
 */
async function shrinkFigures(
  ctx: ActivityContext,
  input: PublishVersionInput,
  activeBefore: string | null,
): Promise<ShrinkFigures | null> {
  if (!activeBefore || activeBefore === input.versionId) return null;
  // With --allow-shrink nothing refuses, but the director's prunes are still counted and reported.
  // The counts stored at seal when there are (a refresh always has them), else one scan of each table.
  const counts = async (c: PoolClient, v: string) =>
    (await storedBucketJobCounts(c, v)) ?? (await bucketJobCounts(c, v));
  return withLongSession(ctx.pool, async (c) => ({
    previous: activeBefore,
    before: input.allowShrink ? [] : await counts(c, activeBefore),
    after: input.allowShrink ? [] : await counts(c, input.versionId),
    files: await fileShrinkFigures(c, ctx.sources, activeBefore, input.versionId),
  }));
}

/**
 * Job names whose job id changed between the active version and the new one (a source re-created
 * from volumes renumbers jobs). A report only: a failure never blocks the publish.
 */
async function compareJobIds(
  ctx: ActivityContext,
  input: PublishVersionInput,
  activeBefore: string | null,
): Promise<Renumbering> {
  if (!activeBefore || activeBefore === input.versionId) return { renumbered: null, error: null };
  // A refresh writes only what changed: a renumbered job is a deleted and a new one there.
  if (await baseVersionOf(ctx.pool, input.versionId)) return { renumbered: null, error: null };
  try {
    const renumbered = await withLongSession(ctx.pool, (c) => renumberedJobs(c, activeBefore, input.versionId));
    return { renumbered, error: null };
  } catch (err) {
    const error = (err as Error).message;
    log.warn('could not compare job ids with the active version', { versionId: input.versionId, error });
    return { renumbered: null, error };
  }
}

async function publishInTransaction(
  ctx: ActivityContext,
  c: PoolClient,
  input: PublishVersionInput,
  activeBefore: string | null,
  renumbering: Renumbering,
  shrink: ShrinkFigures | null,
): Promise<PublishVersionResult> {
  await lockCatalogForPublish(c, input.catalog);
  const row = await lockVersionRow(c, input.versionId, 'update');
  if (row?.catalog !== input.catalog)
    throw new NotPublishableError(`version ${input.versionId} is not a version of catalog ${input.catalog}`);
  if (row.status === 'active') return { previousVersionId: await latestRetiredVersionId(c, input.catalog) }; // a retry after commit
  requireVersionStatus(input.versionId, row.status, ['verifying', 'building']);
  if (!(await latestReconciliationPassed(c, input.versionId)))
    throw new NotPublishableError(`version ${input.versionId} has no passing reconciliation`);
  const previous = await activeVersionId(c, input.catalog, { forUpdate: true });
  let { renumbered, error } = renumbering;
  if (previous !== activeBefore) {
    renumbered = null; // the pointer moved meanwhile: the comparison was with another version
    error = `active version changed to ${previous} during the publish; job ids not compared`;
  }
  const note = renumberedNote(renumbered);
  if (previous && !input.allowShrink) {
    const share = input.shrinkShare ?? SHRINK_SHARE;
    const minJobs = input.shrinkMinJobs ?? SHRINK_MIN_JOBS;
    // The figures were counted before the transaction; the active version is immutable, so they
    // hold unless the pointer moved meanwhile (then the attempt fails and a retry counts again).
    if (shrink?.previous !== previous)
      throw new Error(`active version of ${input.catalog} changed to ${previous} during the publish; retrying`);
    const shrunk = shrunkBuckets(shrink.before, shrink.after, { minJobs, share });
    const whole = shrunkCatalog(shrink.before, shrink.after, { minJobs, share });
    if (shrunk.length || whole)
      throw new NotPublishableError(
        shrinkGuardMessage({ shrunk, whole, share, minJobs, previousVersionId: previous, renumberedNote: note }),
      );
    const jobBuckets = new Set(shrink.after.map((b) => String(b.bucket ?? 'none')));
    const fileProblem = fileShrinkProblem(shrink.files, previous, jobBuckets);
    if (fileProblem) throw new NotPublishableError(fileProblem);
  }
  await flipActive(c, input.catalog, input.versionId);
  if (previous) await retireVersion(c, previous);
  const pruned = previous && shrink?.previous === previous ? (shrink.files.losses?.pruned ?? null) : null;
  // Jobs its pages found gone from the source after the plan: left out, reported as a follow-up delta.
  const gone = await goneJobs(c, input.versionId);
  const prunedNote = previous ? prunedFilesSentence(pruned, previous) : null;
  await ctx.events.record(c, {
    catalog: input.catalog,
    versionId: input.versionId,
    kind: 'published',
    message:
      publishedMessage(input.versionId, previous, input.allowShrink, note, gone.count) +
      (prunedNote ? `; ${prunedNote}` : ''),
    details: {
      previousVersionId: previous,
      allowShrink: input.allowShrink,
      ...(pruned?.jobs ? { prunedFiles: { ...pruned, since: previous } } : {}),
      ...(gone.count ? { goneJobs: gone.count, goneJobsFirst: gone.first } : {}),
      renumberedJobs: renumbered?.jobs ?? [],
      renumberedJobsTruncated: renumbered?.truncated ?? false,
      ...(error ? { renumberedJobsError: error } : {}),
    },
  });
  return { previousVersionId: previous };
}
