/**
 * The `sealVersion` and `endVersion` activities: a version's status changes outside publish, each
 * under `FOR UPDATE` on the version row, so page transactions in flight finish first and later
 * writes are refused by the fence.
 */
import {
  createFileIndexes,
  createReaderIndex,
  findPlan,
  lockCatalogForPublish,
  lockVersion,
  lockVersionRow,
  markEnded,
  markVerifying,
  missingLedgerPages,
  recordEndedPlan,
  versionHasFiles,
} from '../lib/catalog';
import { settleAll, withLongSession, withTransaction } from '../lib/db';
import type {
  EndVersionInput,
  IndexVersionInput,
  SealVersionInput,
  SealVersionResult,
} from '../workflows/activity-types';
import type { ActivityContext } from './context';
import { guard } from './failures';
import {
  baseVersionOf,
  storeBucketCounts,
  storeBucketCountsFromFigures,
  storeRefreshBucketCounts,
  storeRefreshVersionCells,
  storeVersionCellsFromPages,
  storeVersionCellsFromTable,
  readRanges,
  storeRanges,
  storeRangesFromLedger,
  refreshRangeCounts,
} from '../lib/catalog';
import { withHeartbeat } from './heartbeat';

/**
 * Ends the copy phase: under `FOR UPDATE` on the version row (waiting for page transactions in
 * flight), proves that every planned page has its committed ledger row; if some have not, returns
 * them and leaves the version `building` (the workflow re-runs them and seals again). Otherwise the
 * version becomes `verifying` (later page writes are refused); `indexVersion` then builds its
 * indexes. Heartbeats from a timer throughout (a long step: its activity is found dead by heartbeat
 * timeout). Idempotent.
 * @throws VERSION_FENCED when the version is neither building nor verifying.
 */
export async function sealVersion(ctx: ActivityContext, input: SealVersionInput): Promise<SealVersionResult> {
  return withHeartbeat(
    () => ({ stage: 'sealing' }),
    () =>
      guard(async () => {
        const missingPages = await withTransaction(ctx.pool, async (c) => {
          const status = await lockVersion(c, input.versionId, { mode: 'update', allowed: ['building', 'verifying'] });
          if (status !== 'building') return [];
          const missing = await missingLedgerPages(c, input.versionId, 1_000);
          if (!missing.length) await markVerifying(c, input.versionId);
          return missing;
        });
        // Before the reconciliation reads them (a refresh's are recounted on its segments: O(changes)).
        if (!missingPages.length) await storeVersionRanges(ctx, input.versionId);
        return { missingPages };
      }),
  );
}

/**
 * Builds the sealed version's reader index (client, start time), and its file indexes when it has
 * file records, and ANALYZEs them, on a session
 * without statement timeout, heartbeating from a timer; the workflow runs it beside the
 * reconciliation (both read the sealed table), before the publish. Idempotent.
 */
export async function indexVersion(ctx: ActivityContext, input: IndexVersionInput): Promise<void> {
  return withHeartbeat(
    () => ({ stage: 'indexing' }),
    () => guard(() => createIndexes(ctx, input.versionId)),
  );
}

/**
 * The sealed version's indexes: the jobs' reader and paging-key indexes, then for a rebuild with
 * file records the file table's unique `file_id`, per-job and path (`find`) indexes; beside them,
 * on a session of its own, its figures per bucket and cell. At most three catalog sessions at
 * once (the worker's pool also serves the reconciliation and other catalogs' pages). Each
 * idempotent.
 */
async function createIndexes(ctx: ActivityContext, versionId: string): Promise<void> {
  const indexes = async () => {
    await createReaderIndex(ctx.pool, versionId);
    if (await versionHasFiles(ctx.pool, versionId)) await createFileIndexes(ctx.pool, versionId);
  };
  await settleAll([indexes(), storeBucketFigures(ctx, versionId)]);
}

/**
 * The sealed version's jobs per dated bucket, for the shrink guard, and per cell of job keys, for
 * the next refresh (lib/catalog/key-cells.ts): a full rebuild's summed from its pages' stored
 * figures (`fromPages`, the default) or else counted in one scan of its table (beside the
 * reconciliation), a refresh's from its base's and its changes (its cells counted on the table when
 * the base stored none). Counted again by the publish when a repair rewrote rows since
 * (activities/publish-version.ts passes `fromPages: false`).
 */
export async function storeBucketFigures(
  ctx: Pick<ActivityContext, 'pool'>,
  versionId: string,
  { fromPages = true }: { fromPages?: boolean } = {},
): Promise<void> {
  const base = await baseVersionOf(ctx.pool, versionId);
  if (base) await storeRefreshBucketCounts(ctx.pool, versionId, base);
  else if (!fromPages || !(await storeBucketCountsFromFigures(ctx.pool, versionId)))
    await withLongSession(ctx.pool, (c) => storeBucketCounts(c, versionId));
  const cellsStored = base
    ? await storeRefreshVersionCells(ctx.pool, versionId, base)
    : fromPages && (await storeVersionCellsFromPages(ctx.pool, versionId));
  if (!cellsStored) await withLongSession(ctx.pool, (c) => storeVersionCellsFromTable(c, versionId));
}

/**
 * The sealed version's key ranges (`version_range`) for the next refresh: a full rebuild's are its
 * ledger's pages (their rows and digests); a refresh's are its base's, with its own rows added and
 * the rows it superseded taken away per range (O(changes): 0.1 % of jobs changed spread over the
 * whole history touch every range, and counting each on the table cost seconds at 10^7 jobs).
 */
async function storeVersionRanges(ctx: ActivityContext, versionId: string): Promise<void> {
  const base = await baseVersionOf(ctx.pool, versionId);
  if (!base) {
    await storeRangesFromLedger(ctx.pool, versionId);
    return;
  }
  const [ranges, baseRanges] = await Promise.all([readRanges(ctx.pool, versionId), readRanges(ctx.pool, base)]);
  await storeRanges(ctx.pool, versionId, await refreshRangeCounts(ctx.pool, versionId, ranges, baseRanges));
}

/**
 * Ends an unpublished version: `abandoned` (cancelled) or `failed` (not publishable), under
 * `FOR UPDATE` so page transactions in flight finish first and later writes are refused, and
 * records an event of that kind. The active version is untouched. Idempotent: a version that is
 * no longer building or verifying is left as it is. Without `versionId`, the version `plannedBy`
 * the rebuild's plan, if it committed one (a plan cancelled or failed in flight); if it did not,
 * the rebuild's ids are recorded as ended, so that a plan attempt of it that runs late (its worker
 * frozen or cut off) stores nothing (`ended_plan`, migration 18), and an event of the catalog
 * (kind `cancelled` or `failed`, no version) says the rebuild ended before a version was planned.
 * @returns the version's id (decimal text), null when there is none (no plan committed one).
 */
export async function endVersion(ctx: ActivityContext, input: EndVersionInput): Promise<string | null> {
  return guard(() =>
    withTransaction(ctx.pool, async (c) => {
      let versionId = input.versionId;
      const by = input.plannedBy;
      if (!versionId && by) {
        // The plan transaction's lock: a plan attempt still running has committed (found here) or
        // will find the rebuild ended and store nothing.
        await lockCatalogForPublish(c, input.catalog);
        versionId = (await findPlan(c, by.workflowId, by.firstRunId))?.versionId;
        if (!versionId) {
          // The catalog's event log keeps the end of a rebuild that left no version (`events`), once.
          const cancelled = input.status === 'abandoned';
          if (await recordEndedPlan(c, { ...by, catalog: input.catalog }))
            await ctx.events.record(c, {
              catalog: input.catalog,
              versionId: null,
              kind: cancelled ? 'cancelled' : 'failed',
              message: `rebuild ${by.workflowId} ${cancelled ? 'was cancelled' : 'failed'} before a version was planned: ${input.reason}`,
            });
          return null;
        }
      }
      if (!versionId) return null;
      const status = (await lockVersionRow(c, versionId, 'update'))?.status;
      if (status !== 'building' && status !== 'verifying') return versionId;
      await markEnded(c, versionId, input.status, input.reason);
      await ctx.events.record(c, {
        catalog: input.catalog,
        versionId,
        kind: input.status,
        message: `version ${versionId} ${input.status}: ${input.reason}`,
      });
      return versionId;
    }),
  );
}
