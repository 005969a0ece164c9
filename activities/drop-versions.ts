/**
 * Removal of versions' rows, shared by `planRebuild` (abandoned and failed versions) and
 * `retireVersions` (retired versions beyond retention).
 */
import type { VersionStatus } from '../lib/catalog';
import {
  deleteGoneJobs,
  deleteStoredFigures,
  deleteStagedRecords,
  deleteUnreachableRows,
  deleteVersionRejects,
  detachAndDropFilePartition,
  detachAndDropPartition,
  forgetVersionSegments,
  lockCatalogForPublish,
  lockVersionRow,
  markDropped,
  releaseSuperseded,
  versionSegments,
} from '../lib/catalog';
import { withTransaction } from '../lib/db';
import type { ActivityContext } from './context';

/** Statuses whose rows may be dropped (`dropped`: an interrupted drop whose table is still there). */
const DROPPABLE: readonly VersionStatus[] = ['retired', 'abandoned', 'failed', 'dropped'];

/**
 * Drops the rows of versions of `catalog` (retired beyond retention, abandoned, failed, or marked
 * dropped by an interrupted attempt whose table is still there). Each version is first claimed
 * under the publish lock by marking it `dropped`, so a rollback (same lock, re-activates only
 * `retired` versions) can never re-activate a version whose table is being detached or dropped;
 * then its partitions (jobs, and files of a rebuild with `--files`) are detached (CONCURRENTLY, with lock_timeout) and dropped outside any
 * transaction, and its staged records, rejects, gone jobs and stored page and cell figures are deleted. A version that became active again
 * before the claim is skipped. Records a `dropped` event per version.
 * @returns the version ids whose rows were dropped now.
 */
export async function dropVersions(ctx: ActivityContext, catalog: string, versionIds: string[]): Promise<string[]> {
  const dropped: string[] = [];
  for (const id of versionIds) {
    const claim = await withTransaction(ctx.pool, async (c) => {
      await lockCatalogForPublish(c, catalog);
      const row = await lockVersionRow(c, id, 'update');
      const status = row?.catalog === catalog ? row.status : undefined;
      if (!status || !DROPPABLE.includes(status)) return null;
      if (status !== 'dropped') await markDropped(c, id);
      return { from: status };
    });
    if (!claim) continue;
    if (!(await dropSegments(ctx, id, claim.from))) continue;
    await deleteStagedRecords(ctx.pool, id);
    await deleteVersionRejects(ctx.pool, id);
    await deleteGoneJobs(ctx.pool, id);
    await deleteStoredFigures(ctx.pool, id);
    await ctx.events.record(ctx.pool, {
      catalog,
      versionId: id,
      kind: 'dropped',
      message: `version ${id} rows dropped (was ${claim.from})`,
      details: { was: claim.from },
    });
    dropped.push(id);
  }
  return dropped;
}

/**
 * The rows of dropped version `id` (migration 014): an unpublished refresh gives back the rows it
 * superseded; each of its segments no other version uses is dropped (files first, so a retry after
 * the job table went still finds them), and from those still used the rows only it needed are
 * deleted.
 * @returns false when nothing was left to drop (a retried attempt finished before).
 */
async function dropSegments(ctx: ActivityContext, id: string, from: VersionStatus): Promise<boolean> {
  if (from === 'abandoned' || from === 'failed') await releaseSuperseded(ctx.pool, id, true);
  const segments = await versionSegments(ctx.pool, id);
  const unused = new Set(await forgetVersionSegments(ctx.pool, id));
  // A version dropped before segments were recorded (or by an interrupted drop) is its own segment.
  if (!segments.length) unused.add(id);
  let dropped = false;
  for (const s of unused) {
    const files = await detachAndDropFilePartition(ctx.pool, s);
    dropped = (await detachAndDropPartition(ctx.pool, s)) || files || dropped;
  }
  for (const s of segments)
    if (!unused.has(s)) dropped = (await deleteUnreachableRows(ctx.pool, s, true)) > 0 || dropped;
  return dropped || segments.length > 0;
}
