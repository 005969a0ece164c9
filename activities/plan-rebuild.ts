/**
 * The `planRebuild` activity: the version, its table and its fixed page plan (design.md, "Plan").
 */
import type { PoolClient } from 'pg';
import {
  abandonSupersededVersions,
  createVersionPartition,
  findPlan,
  insertPlanPages,
  insertVersion,
  lockCatalogForPublish,
  planExists,
  setPartitionTable,
  setSourceSnapshot,
  unpublishableVersionIds,
} from '../lib/catalog';
import { withTransaction } from '../lib/db';
import type { PreparedSource } from '../lib/sources';
import type { PlanRebuildInput } from '../workflows/activity-types';
import type { PlanResult } from '../workflows/definitions';
import type { ActivityContext } from './context';
import { dropVersions } from './drop-versions';
import { guard } from './failures';
import { withHeartbeat } from './heartbeat';
import { plannedMessage, supersededMessage } from './messages';

/**
 * Plans a rebuild: takes the source watermark, creates a `building` version with its own
 * partition, and stores the fixed page plan. Idempotent by (workflow id, first run id): a retry
 * after commit returns the same version. Earlier unfinished versions of the catalog become
 * `abandoned`, and abandoned or failed versions lose their rows. Heartbeats from a timer (reading a
 * listing command or a large source's page boundaries can take longer than the heartbeat timeout).
 * @throws SOURCE_UNKNOWN (non-retryable) for an undefined source; SOURCE_DATA_INVALID for a bad listing.
 */
export async function planRebuild(ctx: ActivityContext, input: PlanRebuildInput): Promise<PlanResult> {
  let stage = 'planning';
  return withHeartbeat(
    () => ({ stage }),
    () =>
      guard(async () => {
        const found = await findPlan(ctx.pool, input.workflowId, input.firstRunId);
        if (found) return found;
        stage = 'reading the source';
        const prepared = await ctx.sources.prepare(input.source);
        stage = 'storing the plan';
        const maxKey = prepared.watermark.maxKey;
        const firstKeys = maxKey ? await prepared.pageFirstKeys(maxKey, input.pageSize) : [];
        const result = await withTransaction(ctx.pool, (c) => storePlan(ctx, c, input, prepared, firstKeys));
        if (!result) {
          const raced = await findPlan(ctx.pool, input.workflowId, input.firstRunId);
          if (!raced) throw new Error('plan: version vanished after a concurrent plan');
          return raced;
        }
        // Rows of versions that can never be published are dropped now (outside the plan transaction).
        await dropVersions(ctx, input.catalog, await unpublishableVersionIds(ctx.pool, input.catalog));
        return result;
      }),
  );
}

/**
 * The last key of each page: one less than the next page's first key; the watermark for the last
 * page. Keys are decimal text (64-bit).
 */
export function pageLastKeys(firstKeys: string[], maxKey: string | null): string[] {
  return firstKeys.map((_, i) => (i + 1 < firstKeys.length ? (BigInt(firstKeys[i + 1]) - 1n).toString() : maxKey!));
}

/**
 * The plan transaction, under the catalog's publish lock: abandons superseded versions, inserts the
 * version, stages a listing, creates and attaches its table, stores the pages, records `planned`.
 * @returns null when a concurrent attempt stored the plan first.
 */
async function storePlan(
  ctx: ActivityContext,
  c: PoolClient,
  input: PlanRebuildInput,
  prepared: PreparedSource,
  firstKeys: string[],
): Promise<PlanResult | null> {
  const { watermark: wm, timezone } = prepared;
  await lockCatalogForPublish(c, input.catalog);
  if (await planExists(c, input.workflowId, input.firstRunId)) return null;
  for (const stale of await abandonSupersededVersions(c, input.catalog)) {
    await ctx.events.record(c, {
      catalog: input.catalog,
      versionId: stale,
      kind: 'abandoned',
      message: supersededMessage(stale),
    });
  }
  const versionId = await insertVersion(c, {
    catalog: input.catalog,
    source: input.source,
    workflowId: input.workflowId,
    firstRunId: input.firstRunId,
    pageSize: input.pageSize,
    pagesTotal: firstKeys.length,
    sourceRows: wm.rows,
    watermarkKey: wm.maxKey,
    watermarkTime: wm.time,
    timezone,
  });
  if (prepared.stage) {
    await prepared.stage(c, versionId);
    await setSourceSnapshot(c, versionId, prepared.snapshot, prepared.duplicates);
  }
  await setPartitionTable(c, versionId, await createVersionPartition(c, versionId));
  await insertPlanPages(c, versionId, firstKeys, pageLastKeys(firstKeys, wm.maxKey));
  await ctx.events.record(c, {
    catalog: input.catalog,
    versionId,
    kind: 'planned',
    message: plannedMessage({
      versionId,
      pagesTotal: firstKeys.length,
      pageSize: input.pageSize,
      maxKey: wm.maxKey,
      rows: wm.rows,
      time: wm.time,
      snapshot: prepared.snapshot,
      duplicates: prepared.duplicates,
      decoded: prepared.decoded,
    }),
    details: {
      pagesTotal: firstKeys.length,
      pageSize: input.pageSize,
      watermarkKey: wm.maxKey,
      watermarkTime: wm.time,
      sourceRows: wm.rows,
      ...(prepared.snapshot ? { snapshotSha256: prepared.snapshot, duplicateRecords: prepared.duplicates } : {}),
      ...(prepared.decoded
        ? { legacyEncoding: prepared.decoded.encoding, decodedValues: prepared.decoded.values }
        : {}),
    },
  });
  return {
    versionId,
    pagesTotal: firstKeys.length,
    sourceRows: wm.rows,
    watermark: { jobKey: wm.maxKey, time: wm.time },
    timezone,
  };
}
