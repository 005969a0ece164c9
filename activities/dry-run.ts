/**
 * The `dryRunPlan` activity (`start --dry-run`): what a rebuild, or a refresh, of a catalog would do
 * now, read from the source and the catalog database without writing either: no version row, no
 * staged listing, no event. A refresh's figures are those of its change detection
 * (plan-refresh.ts); a full rebuild's count every job at the watermark.
 */
import { activeVersionId, countActiveFiles, readPageCopyRate } from '../lib/catalog';
import type { DryRunInput, DryRunResult } from '../workflows/definitions';
import { LIMITS } from '../workflows/policies';
import type { ActivityContext } from './context';
import { guard } from './failures';
import { withHeartbeat } from './heartbeat';
import type { RefreshSettings } from './plan-refresh';
import {
  detectListingRefresh,
  detectRefresh,
  REFRESH_PAGE_KEYS,
  refreshPlanPages,
  VERIFY_FULL_REASON,
} from './plan-refresh';
import { requireFileRecords, sizePages } from './plan-rebuild';
import { workKeys } from '../lib/refresh';

/** Rows per second of one page in flight assumed for the estimate when the catalog has no rebuild to measure. */
const DEFAULT_ROWS_PER_SECOND_PER_PAGE = 12_500;

/**
 * Seconds to copy `rows` in `pages` pages, `concurrency` of them in flight, at `perPage` rows per
 * second of one page in flight (lib/catalog `readPageCopyRate`); whole seconds, 0 for no rows.
 */
export function estimateCopySeconds(rows: number, pages: number, concurrency: number, perPage: number): number {
  const inFlight = Math.max(1, Math.min(concurrency, pages));
  return rows > 0 ? Math.ceil(rows / (perPage * inFlight)) : 0;
}

/**
 * Plans `input` without making it. Heartbeats from a timer (the detection reads O(jobs) of the source).
 * @throws SOURCE_UNKNOWN for an undefined source; the source's errors.
 */
export async function dryRunPlan(ctx: ActivityContext, input: DryRunInput): Promise<DryRunResult> {
  return withHeartbeat(
    () => ({ stage: 'planning a dry run' }),
    () => guard(() => dryRun(ctx, input)),
  );
}

async function dryRun(ctx: ActivityContext, input: DryRunInput): Promise<DryRunResult> {
  // A dry run changes nothing: a listing's new snapshots get their job keys computed, not recorded.
  const prepared = await ctx.sources.prepare(input.source, { reserveKeys: false });
  const maxKey = prepared.watermark.maxKey;
  const active = await activeVersionId(ctx.pool, input.catalog);
  if (input.files) await requireFileRecords(prepared, input);
  const perPage = (await readPageCopyRate(ctx.pool, input.catalog, !!input.files)) ?? DEFAULT_ROWS_PER_SECOND_PER_PAGE;
  const concurrency = input.concurrency ?? LIMITS.concurrency.default;
  const estimate = (rows: number, pages: number) => estimateCopySeconds(rows, pages, concurrency, perPage);
  const watermark = { jobKey: maxKey, time: prepared.watermark.time };
  const common = {
    dryRun: true as const,
    catalog: input.catalog,
    source: input.source,
    watermark,
    activeVersionId: active,
  };
  let fullRebuildBecause: string | undefined;
  const changeSource = ctx.sources.refreshSource(input.source);
  if (input.refresh && input.verify === 'full') {
    fullRebuildBecause = VERIFY_FULL_REASON;
  } else if (input.refresh && maxKey && (changeSource || prepared.compareListing)) {
    const settings: RefreshSettings = {
      source: input.source,
      files: !!input.files,
      timezone: prepared.timezone,
      config: ctx.sources.config(input.source),
    };
    const found = changeSource
      ? await detectRefresh(ctx.pool, changeSource, input.catalog, settings, maxKey)
      : await detectListingRefresh(ctx.pool, prepared, input.catalog, settings);
    if (!('fullRebuild' in found)) {
      const c = found.changes;
      const keys = workKeys(c);
      const rows = c.newKeys.length + c.changedKeys.length;
      const copied = [...c.newKeys, ...c.changedKeys];
      // The file records that leave: a director's by job id (its key), a listing's by snapshot id.
      const leaving = (found as { leavingJobIds?: string[] }).leavingJobIds ?? [...c.changedKeys, ...c.deletedKeys];
      const pages = refreshPlanPages(keys, REFRESH_PAGE_KEYS, !!input.files, prepared).length;
      return {
        ...common,
        refresh: true,
        pages,
        rows,
        jobs: { new: c.newKeys.length, changed: c.changedKeys.length, gone: c.deletedKeys.length },
        fileRecords: input.files
          ? {
              copy: changeSource
                ? await changeSource.fileRecordsOf(copied)
                : (prepared.listedFileRecords?.(copied) ?? 0),
              drop: await countActiveFiles(ctx.pool, input.catalog, leaving),
            }
          : { copy: 0, drop: 0 },
        estimateSeconds: estimate(rows, pages),
        detectionMs: found.detectionMs,
      };
    }
    fullRebuildBecause = found.fullRebuild;
  } else if (input.refresh) {
    fullRebuildBecause = 'the source has no jobs';
  }
  const rows = maxKey ? await prepared.countRowsUpTo(maxKey, Number.MAX_SAFE_INTEGER) : 0;
  const sizing = await sizePages(prepared, {
    catalog: input.catalog,
    source: input.source,
    pageSize: input.pageSize,
    concurrency,
    files: input.files,
    workflowId: '',
    firstRunId: '',
  });
  const pages = Math.ceil(rows / sizing.pageSize);
  return {
    ...common,
    refresh: false,
    ...(fullRebuildBecause ? { fullRebuildBecause } : {}),
    pages,
    rows,
    jobs: { new: rows, changed: 0, gone: 0 },
    fileRecords: input.files
      ? {
          copy: !maxKey
            ? 0
            : changeSource
              ? await changeSource.fileRecordsUpTo(maxKey)
              : (prepared.listedFileRecords?.(null) ?? 0),
          drop: await countActiveFiles(ctx.pool, input.catalog, null),
        }
      : { copy: 0, drop: 0 },
    estimateSeconds: estimate(rows, pages),
  };
}
