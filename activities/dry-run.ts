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
import type { PageRange, PreparedSource } from '../lib/sources';

/** Rows per second of one page in flight assumed for the estimate when the catalog has no rebuild to measure. */
const DEFAULT_ROWS_PER_SECOND_PER_PAGE = 12_500;

/**
 * What a page costs outside its transaction (ms): the workflow's round trip per page (activity
 * scheduled to completed minus its own time, then the next workflow task), 70–104 ms in the
 * benchmark's runs (`temporal round trip per page`, docs/performance.md).
 */
export const PAGE_ROUND_TRIP_MS = 100;

/**
 * Seconds to copy `rows` (with `--files`: jobs plus file records) in `pages` pages, `concurrency` of
 * them in flight, at `perPage` rows per second of one page in flight (lib/catalog
 * `readPageCopyRate`), plus {@link PAGE_ROUND_TRIP_MS} per page in each slot; whole seconds, 0 for
 * no rows.
 */
export function estimateCopySeconds(rows: number, pages: number, concurrency: number, perPage: number): number {
  const inFlight = Math.max(1, Math.min(concurrency, pages));
  return rows > 0 ? Math.ceil(rows / (perPage * inFlight) + ((pages / inFlight) * PAGE_ROUND_TRIP_MS) / 1000) : 0;
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
  const estimate = (weight: number, pages: number) => estimateCopySeconds(weight, pages, concurrency, perPage);
  const common = {
    dryRun: true as const,
    catalog: input.catalog,
    source: input.source,
    watermark: { jobKey: maxKey, time: prepared.watermark.time },
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
      const rows = c.newKeys.length + c.changedKeys.length;
      const copied = [...c.newKeys, ...c.changedKeys];
      // The file records that leave: a director's by job id (its key), a listing's by snapshot id.
      const leaving = (found as { leavingJobIds?: string[] }).leavingJobIds ?? [...c.changedKeys, ...c.deletedKeys];
      const pages = refreshPlanPages(workKeys(c), REFRESH_PAGE_KEYS, !!input.files, prepared).length;
      const fileRecords = await fileFigures(ctx, input, leaving, () =>
        changeSource ? changeSource.fileRecordsOf(copied) : (prepared.listedFileRecords?.(copied) ?? 0),
      );
      return {
        ...common,
        refresh: true,
        pages,
        rows,
        jobs: { new: c.newKeys.length, changed: c.changedKeys.length, gone: c.deletedKeys.length },
        fileRecords,
        estimateSeconds: estimate(rows + fileRecords.copy, pages),
        detectionMs: found.detectionMs,
      };
    }
    fullRebuildBecause = found.fullRebuild;
  } else if (input.refresh) {
    fullRebuildBecause = 'the source has no jobs';
  }
  const full = await fullPlan(ctx, input, prepared, concurrency);
  return {
    ...common,
    refresh: false,
    ...(fullRebuildBecause ? { fullRebuildBecause } : {}),
    pages: full.pages,
    rows: full.rows,
    jobs: { new: full.rows, changed: 0, gone: 0 },
    fileRecords: await fileFigures(ctx, input, null, () =>
      !maxKey ? 0 : changeSource ? changeSource.fileRecordsUpTo(maxKey) : (prepared.listedFileRecords?.(null) ?? 0),
    ),
    estimateSeconds: estimate(full.weight, full.pages),
  };
}

/**
 * With `--files`, the file records the dry run's plan would copy (`copy()`) and the active
 * version's it would replace: those of the jobs `leaving` (job ids; null: all of them); else none.
 */
async function fileFigures(
  ctx: ActivityContext,
  input: DryRunInput,
  leaving: string[] | null,
  copy: () => Promise<number> | number,
): Promise<{ copy: number; drop: number }> {
  if (!input.files) return { copy: 0, drop: 0 };
  return { copy: await copy(), drop: await countActiveFiles(ctx.pool, input.catalog, leaving) };
}

/**
 * A full rebuild's pages, jobs and weight (rows it writes: with `--files` each job's 1 + its
 * expected file records), sized as its plan sizes them; with `--files` by the plan's own key walk
 * (O(jobs) of the source in bounded statements), so the pages are the plan's.
 */
async function fullPlan(
  ctx: ActivityContext,
  input: DryRunInput,
  prepared: PreparedSource,
  concurrency: number,
): Promise<{ pages: number; rows: number; weight: number }> {
  const maxKey = prepared.watermark.maxKey;
  if (!maxKey) return { pages: 0, rows: 0, weight: 0 };
  const sizing = await sizePages(prepared, {
    catalog: input.catalog,
    source: input.source,
    pageSize: input.pageSize,
    concurrency,
    files: input.files,
    workflowId: '',
    firstRunId: '',
  });
  if (input.files && prepared.planFilePages) {
    const pages = await prepared.planFilePages(maxKey, sizing.pageSize);
    const sum = (f: (p: PageRange) => number) => pages.reduce((n, p) => n + f(p), 0);
    return { pages: pages.length, rows: sum((p) => p.rows), weight: sum((p) => p.weight ?? p.rows) };
  }
  const rows = await prepared.countRowsUpTo(maxKey, Number.MAX_SAFE_INTEGER);
  return { pages: Math.ceil(rows / sizing.pageSize), rows, weight: rows };
}
