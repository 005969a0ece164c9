/**
 * The `planRebuild` activity: the version, its table and its fixed page plan (design.md, "Plan").
 */
import type { PoolClient } from 'pg';
import { Context } from '@temporalio/activity';
import {
  abandonSupersededVersions,
  insertVersionSegments,
  setSourceReadFacts,
  createVersionPartition,
  findPlan,
  insertPlanPages,
  insertVersion,
  openPlanStore,
  createFilePartition,
  setPartitionTable,
  setSourceSnapshot,
  setVersionFiles,
  unpublishableVersionIds,
} from '../lib/catalog';
import { withTransaction } from '../lib/db';
import type { PageSizeLimit, PageSizingInput } from '../lib/page-sizing';
import { autoPageSize, describePageSize, PAGE_SIZING, sizingRowsThatMatter } from '../lib/page-sizing';
import type { PageRange, PageWalkProgress, PreparedSource } from '../lib/sources';
import { rowMappingOf } from '../lib/sources/row-mapping';
import { SourceDataInvalidError } from '../lib/errors';
import type { PlanRebuildInput } from '../workflows/activity-types';
import type { PageSizing, PlanResult } from '../workflows/definitions';
import { LIMITS } from '../workflows/policies';
import type { ActivityContext } from './context';
import { dropVersions } from './drop-versions';
import { guard } from './failures';
import { untilCancelled, withHeartbeat } from './heartbeat';
import { plannedMessage, supersededMessage } from './messages';
import { planRefresh } from './plan-refresh-run';
import { VERIFY_FULL_REASON } from './plan-refresh';

/** What the plan activity reports in its heartbeat details while it runs. */
export interface PlanProgress {
  /** What it does now: `planning`, `reading the source`, `sizing the pages`, `walking the keys`, `storing the plan`. */
  stage: string;
  /** Pages found by the key walk so far. */
  pagesPlanned?: number;
  /** Source rows in those pages. */
  rowsPlanned?: number;
  /** Last key of the last page found (decimal text). */
  lastKey?: string;
}

/**
 * Plans a rebuild: takes the source watermark, sizes the pages (`auto` from measured cost unless
 * `pageSize` fixes them), walks the source's keys into pages in bounded statements, creates a
 * `building` version with its own partition, and stores the fixed page plan with each page's row
 * count. Idempotent by (workflow id, first run id): a retry after commit returns the same version.
 * Earlier unfinished versions of the catalog become `abandoned`, and abandoned or failed versions
 * lose their rows. Heartbeats from a timer and after each statement of the key walk, with
 * {@link PlanProgress} as details. Temporal's cancellation ends it at once ({@link untilCancelled}).
 * @throws SOURCE_UNKNOWN (non-retryable) for an undefined source; SOURCE_DATA_INVALID for a bad listing.
 */
export async function planRebuild(ctx: ActivityContext, input: PlanRebuildInput): Promise<PlanResult> {
  const progress: PlanProgress = { stage: 'planning' };
  // A cancel ends the attempt at once, even in a source statement that waits on a lock: a version
  // it would still commit is refused, or abandoned, by the rebuild's end (`endVersion`).
  return withHeartbeat(
    () => ({ ...progress }),
    () =>
      untilCancelled(
        guard(async () => {
          const found = await findPlan(ctx.pool, input.workflowId, input.firstRunId);
          if (found) return found;
          progress.stage = 'reading the source';
          const changeSource = ctx.sources.refreshSource(input.source);
          // Before the watermark: a row written after it is surely after the horizon too.
          const horizon = changeSource ? await changeSource.horizon() : null;
          const prepared = await ctx.sources.prepare(input.source);
          if (input.files) await requireFileRecords(prepared, input);
          let fullRebuildBecause: string | undefined;
          if (input.refresh && input.verify === 'full') fullRebuildBecause = VERIFY_FULL_REASON;
          else if (input.refresh) {
            progress.stage = 'finding what changed';
            const refreshed = await planRefresh(ctx, input, { prepared, changeSource, horizon: horizon ?? '' });
            if ('fullRebuild' in refreshed) fullRebuildBecause = refreshed.fullRebuild;
            else return refreshed;
          }
          progress.stage = 'sizing the pages';
          const sizing = await sizePages(prepared, input);
          progress.stage = 'walking the keys';
          const maxKey = prepared.watermark.maxKey;
          const walked = (p: PageWalkProgress) => {
            Object.assign(progress, { pagesPlanned: p.pages, rowsPlanned: p.rows, lastKey: p.lastKey });
            Context.current().heartbeat({ ...progress });
          };
          const pages = !maxKey
            ? []
            : input.files && sizing.pageSizing === 'auto'
              ? await prepared.planFilePages!(maxKey, sizing.pageSize, walked)
              : await prepared.planPages(maxKey, sizing.pageSize, walked);
          progress.stage = 'storing the plan';
          const plan = { prepared, pages, sizing, horizon, fullRebuildBecause };
          const result = await withTransaction(ctx.pool, (c) => storePlan(ctx, c, input, plan));
          if (!result) {
            const raced = await findPlan(ctx.pool, input.workflowId, input.firstRunId);
            if (!raced) throw new Error('plan: version vanished after a concurrent plan');
            return raced;
          }
          // Rows of versions that can never be published are dropped now (outside the plan transaction).
          await dropVersions(ctx, input.catalog, await unpublishableVersionIds(ctx.pool, input.catalog));
          return result;
        }),
      ),
  );
}

/**
 * A rebuild with file records needs a source that has them, in a schema version the product knows.
 * @throws SOURCE_DATA_INVALID (non-retryable) for a source without file records; the source's
 *   schema error (non-retryable) for an unknown catalog schema version.
 */
export async function requireFileRecords(prepared: PreparedSource, input: { source: string }): Promise<void> {
  if (!prepared.planFilePages || !prepared.checkFileSchema)
    throw new SourceDataInvalidError(
      `source ${input.source} has no file records this release can read: --files needs a Bareos or Bacula catalog database, or a restic or borg listing source with a filesCommand`,
    );
  await prepared.checkFileSchema();
}

/** The page size a plan uses and how it was chosen. */
export interface PlanSizing {
  /** Rows per page. */
  pageSize: number;
  pageSizing: PageSizing;
  /** `auto`: the measurements and why this size (see lib/page-sizing.ts). */
  auto?: { measured: PageSizingInput; limitedBy: PageSizeLimit; why: string };
}

/**
 * The plan's page size: `input.pageSize` when given (`fixed`), else {@link autoPageSize} over the
 * source's rows at the watermark (counted up to {@link sizingRowsThatMatter}) and its sampled
 * average row width (`auto`).
 */
export async function sizePages(prepared: PreparedSource, input: PlanRebuildInput): Promise<PlanSizing> {
  if (input.pageSize !== undefined) return { pageSize: input.pageSize, pageSizing: 'fixed' };
  if (input.files) return fileRecordSizing();
  const concurrency = input.concurrency ?? LIMITS.concurrency.default;
  const maxKey = prepared.watermark.maxKey;
  const [rows, avgRowBytes] = maxKey
    ? await Promise.all([
        prepared.countRowsUpTo(maxKey, sizingRowsThatMatter(concurrency)),
        prepared.averageRowBytes(maxKey),
      ])
    : [0, null];
  const measured = { rows, avgRowBytes: avgRowBytes === null ? null : Math.round(avgRowBytes), concurrency };
  const choice = autoPageSize(measured);
  return {
    pageSize: choice.rowsPerPage,
    pageSizing: 'auto',
    auto: { measured, limitedBy: choice.limitedBy, why: describePageSize(choice, measured) },
  };
}

/**
 * Page sizing of a rebuild with file records: pages of about {@link PAGE_SIZING}.maxRows rows where a
 * job weighs one row plus its `JobFiles` (an estimate: `File` is not scanned to plan), about 16 MiB
 * of file rows at 150 bytes a row; a job with more files is a page of its own.
 */
function fileRecordSizing(): PlanSizing {
  const measured = { rows: 0, avgRowBytes: null, concurrency: 0 };
  return {
    pageSize: PAGE_SIZING.maxRows,
    pageSizing: 'auto',
    auto: {
      measured,
      limitedBy: 'maximum',
      why: `about ${PAGE_SIZING.maxRows.toLocaleString('en-US')} job and file rows per page, a job weighing 1 + its JobFiles; a job with more files is a page of its own`,
    },
  };
}

/**
 * The last key of each page as stored: one less than the next page's first key, the watermark for
 * the last page, so the pages cover every key from the first page's first key to the watermark (a
 * key that appears in a gap after the plan still belongs to a page). Keys are decimal text (64-bit).
 */
export function pageLastKeys(firstKeys: string[], maxKey: string | null): string[] {
  return firstKeys.map((_, i) => (i + 1 < firstKeys.length ? (BigInt(firstKeys[i + 1]) - 1n).toString() : maxKey!));
}

/** What the plan transaction stores: the source's watermark, its pages and their sizing. */
interface PlanToStore {
  prepared: PreparedSource;
  pages: PageRange[];
  sizing: PlanSizing;
  /** The source's transaction horizon before the watermark (director catalogs), else null. */
  horizon: string | null;
  /** A refresh asked for and planned as a full rebuild: why. */
  fullRebuildBecause?: string;
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
  plan: PlanToStore,
): Promise<PlanResult | null> {
  const { prepared, pages, sizing } = plan;
  const { watermark: wm, timezone } = prepared;
  const rows = pages.reduce((n, p) => n + p.rows, 0).toString();
  const maxWeight = pages.reduce((m, p) => Math.max(m, p.weight ?? p.rows), 0);
  const firstKeys = pages.map((p) => p.firstKey);
  if (!(await openPlanStore(c, input))) return null;
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
    pageSize: sizing.pageSize,
    pageSizing: sizing.pageSizing,
    pagesTotal: pages.length,
    sourceRows: rows,
    watermarkKey: wm.maxKey,
    watermarkTime: wm.time,
    timezone,
    verifyFull: input.verify === 'full',
  });
  if (prepared.stage) {
    await prepared.stage(c, versionId);
    await setSourceSnapshot(c, versionId, prepared.snapshot, prepared.duplicates);
  }
  await setPartitionTable(c, versionId, await createVersionPartition(c, versionId));
  if (input.files) {
    await setVersionFiles(c, versionId);
    await createFilePartition(c, versionId);
  }
  await insertVersionSegments(c, versionId, null);
  const config = ctx.sources.config(input.source);
  await setSourceReadFacts(c, versionId, {
    baseVersionId: null,
    horizon: plan.horizon,
    legacyEncoding: config.legacyEncoding ?? 'LATIN1',
    rowMapping: rowMappingOf(config),
  });
  const lastKeys = pageLastKeys(firstKeys, wm.maxKey);
  await insertPlanPages(
    c,
    versionId,
    pages.map((p, i) => ({ firstKey: p.firstKey, lastKey: lastKeys[i], plannedRows: p.weight ?? p.rows })),
  );
  await recordPlanned(ctx, c, input, versionId, plan, rows);
  return {
    versionId,
    pagesTotal: pages.length,
    pageSize: sizing.pageSize,
    pageSizing: sizing.pageSizing,
    sourceRows: rows,
    watermark: { jobKey: wm.maxKey, time: wm.time },
    timezone,
    // Only where a page outweighs the largest page size: the plan result of a rebuild without files is as before.
    ...(maxWeight > PAGE_SIZING.maxRows ? { maxPageRows: maxWeight } : {}),
    ...(plan.fullRebuildBecause ? { fullRebuildBecause: plan.fullRebuildBecause } : {}),
  };
}

/** The `planned` event of a full rebuild's plan (and why a refresh asked for became one). */
async function recordPlanned(
  ctx: ActivityContext,
  c: PoolClient,
  input: PlanRebuildInput,
  versionId: string,
  plan: PlanToStore,
  rows: string,
): Promise<void> {
  const { prepared, pages, sizing } = plan;
  const wm = prepared.watermark;
  await ctx.events.record(c, {
    catalog: input.catalog,
    versionId,
    kind: 'planned',
    message:
      (plan.fullRebuildBecause ? `refresh planned as a full rebuild: ${plan.fullRebuildBecause}; ` : '') +
      plannedMessage({
        versionId,
        pagesTotal: pages.length,
        pageSize: sizing.pageSize,
        maxKey: wm.maxKey,
        rows,
        time: wm.time,
        snapshot: prepared.snapshot,
        duplicates: prepared.duplicates,
        autoSizing: sizing.auto?.why,
        decoded: prepared.decoded,
      }),
    details: {
      pagesTotal: pages.length,
      pageSize: sizing.pageSize,
      pageSizing: sizing.pageSizing,
      ...(sizing.auto ? { sizingLimitedBy: sizing.auto.limitedBy, avgRowBytes: sizing.auto.measured.avgRowBytes } : {}),
      watermarkKey: wm.maxKey,
      watermarkTime: wm.time,
      sourceRows: rows,
      ...(prepared.snapshot ? { snapshotSha256: prepared.snapshot, duplicateRecords: prepared.duplicates } : {}),
      ...(prepared.decoded
        ? { legacyEncoding: prepared.decoded.encoding, decodedValues: prepared.decoded.values }
        : {}),
      ...(plan.fullRebuildBecause ? { refreshAsFullRebuild: plan.fullRebuildBecause } : {}),
    },
  });
}
