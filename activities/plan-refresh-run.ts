/**
 * The refresh branch of `planRebuild` (`start --refresh`): detect what changed since the catalog's
 * active version (plan-refresh.ts), then either say the catalog is up to date (no version is made;
 * a `refresh_up_to_date` event), store the refresh's plan, or hand back why a full rebuild is
 * needed instead.
 */
import {
  abandonSupersededVersions,
  findPlan,
  openPlanStore,
  readRefreshBase,
  unpublishableVersionIds,
} from '../lib/catalog';
import { withTransaction } from '../lib/db';
import { workKeys } from '../lib/refresh';
import type { PreparedSource, RefreshSource } from '../lib/sources';
import type { PlanRebuildInput } from '../workflows/activity-types';
import type { PlanResult } from '../workflows/definitions';
import type { ActivityContext } from './context';
import { dropVersions } from './drop-versions';
import { supersededMessage } from './messages';
import type { RefreshFallback, RefreshSettings } from './plan-refresh';
import {
  detectListingRefresh,
  detectRefresh,
  REFRESH_PAGE_KEYS,
  refreshObstacle,
  storeRefreshPlan,
} from './plan-refresh';

/** What the refresh branch has of the plan so far. */
export interface RefreshInputs {
  prepared: PreparedSource;
  /** The source's change detection; null for listings (they compare their records: `prepared.compareListing`). */
  changeSource: RefreshSource | null;
  /** The source's horizon, taken before the watermark. */
  horizon: string;
}

/**
 * Plans a refresh. @returns the plan (or an up-to-date result without a version), or why a full
 * rebuild is planned instead.
 */
export async function planRefresh(
  ctx: ActivityContext,
  input: PlanRebuildInput,
  r: RefreshInputs,
): Promise<PlanResult | RefreshFallback> {
  const { prepared } = r;
  const settings: RefreshSettings = {
    source: input.source,
    files: !!input.files,
    timezone: prepared.timezone,
    config: ctx.sources.config(input.source),
  };
  const maxKey = prepared.watermark.maxKey;
  if (!maxKey) {
    const empty = await emptyUpToDate(ctx, input, prepared);
    if (empty) return empty;
  }
  if (!maxKey || (!r.changeSource && !prepared.compareListing))
    return {
      fullRebuild:
        refreshObstacle(await readRefreshBase(ctx.pool, input.catalog), settings) ?? 'the source has no jobs',
    };
  const found = r.changeSource
    ? await detectRefresh(ctx.pool, r.changeSource, input.catalog, settings, maxKey)
    : await detectListingRefresh(ctx.pool, prepared, input.catalog, settings);
  if ('fullRebuild' in found) return found;
  const watermark = { jobKey: maxKey, time: prepared.watermark.time };
  const counts = {
    baseVersionId: found.base.versionId,
    newJobs: found.changes.newKeys.length,
    changedJobs: found.changes.changedKeys.length,
    deletedJobs: found.changes.deletedKeys.length,
  };
  const common = { pageSize: REFRESH_PAGE_KEYS, pageSizing: 'fixed' as const, watermark, timezone: prepared.timezone };
  if (!workKeys(found.changes).length)
    return upToDate(ctx, input, {
      refresh: counts,
      message: `nothing changed in source ${input.source} since version ${found.base.versionId} (${
        r.changeSource
          ? `watermark job ${maxKey}; ${found.unchanged} jobs rewritten unchanged`
          : `the listing's ${found.unchanged} jobs as the version holds them`
      })`,
      details: { activeVersion: found.base.versionId, watermarkKey: maxKey, unchangedCandidates: found.unchanged },
      ...common,
    });
  const stored = await withTransaction(ctx.pool, async (c) => {
    if (!(await openPlanStore(c, input))) return null;
    for (const stale of await abandonSupersededVersions(c, input.catalog))
      await ctx.events.record(c, {
        catalog: input.catalog,
        versionId: stale,
        kind: 'abandoned',
        message: supersededMessage(stale),
      });
    return storeRefreshPlan(ctx, c, input, {
      detection: found,
      watermark: { maxKey, time: prepared.watermark.time },
      timezone: prepared.timezone,
      horizon: r.horizon,
      legacyEncoding: settings.config.legacyEncoding ?? 'LATIN1',
      pageKeys: REFRESH_PAGE_KEYS,
      prepared,
    });
  });
  if (!stored) {
    const raced = await findPlan(ctx.pool, input.workflowId, input.firstRunId);
    if (!raced) throw new Error('plan: version vanished after a concurrent plan');
    return raced;
  }
  await dropVersions(ctx, input.catalog, await unpublishableVersionIds(ctx.pool, input.catalog));
  const maxRows = Math.max(...stored.pages.map((p) => p.weight));
  return {
    versionId: stored.versionId,
    pagesTotal: stored.pages.length,
    sourceRows: String(counts.newJobs + counts.changedJobs),
    refresh: counts,
    ...common,
    ...(maxRows > 100_000 ? { maxPageRows: maxRows } : {}),
  };
}

/**
 * An empty source over an empty active version of it: nothing to do, as for any unchanged source.
 * @returns the up-to-date result, or null when the catalog has no such version.
 */
async function emptyUpToDate(
  ctx: ActivityContext,
  input: PlanRebuildInput,
  prepared: PreparedSource,
): Promise<PlanResult | null> {
  const base = await readRefreshBase(ctx.pool, input.catalog);
  if (!base || base.watermarkKey !== null || base.sourceName !== input.source || base.files !== !!input.files)
    return null;
  return upToDate(ctx, input, {
    refresh: { baseVersionId: base.versionId, newJobs: 0, changedJobs: 0, deletedJobs: 0 },
    message: `source ${input.source} has no jobs, as version ${base.versionId} has none`,
    details: { activeVersion: base.versionId, watermarkKey: null },
    pageSize: REFRESH_PAGE_KEYS,
    pageSizing: 'fixed',
    watermark: { jobKey: null, time: prepared.watermark.time },
    timezone: prepared.timezone,
  });
}

/**
 * A refresh that finds nothing to do: records `refresh_up_to_date` (`refresh: up to date: <message>`)
 * and returns the plan result without a version.
 */
async function upToDate(
  ctx: ActivityContext,
  input: PlanRebuildInput,
  o: Pick<PlanResult, 'pageSize' | 'pageSizing' | 'watermark' | 'timezone'> & {
    refresh: NonNullable<PlanResult['refresh']>;
    message: string;
    details: Record<string, unknown>;
  },
): Promise<PlanResult> {
  const { message, details, ...result } = o;
  await ctx.events.record(ctx.pool, {
    catalog: input.catalog,
    versionId: null,
    kind: 'refresh_up_to_date',
    message: `refresh: up to date: ${message}`,
    details,
  });
  return { versionId: '', pagesTotal: 0, sourceRows: '0', upToDate: true, ...result };
}
