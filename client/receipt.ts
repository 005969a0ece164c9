/**
 * The receipt `catalog-rebuild start` prints once the rebuild is planned: version, pages and their
 * sizing, source rows at the watermark, and the watermark, as text lines or one JSON object. The
 * plan is read from the catalog database's version row or from the workflow's `progress` query,
 * whichever answers first.
 */
import type { Pool } from 'pg';
import { baseVersionOf, findPlan, refreshPlanFacts } from '../lib/catalog';
import { refreshPlanText } from '../lib/refresh';
import type { PageSizing, PlanResult, RebuildProgress, Watermark } from '../workflows/definitions';

export type { PageSizing } from '../workflows/definitions';

/** A plan as the receipt shows it. */
export interface SeenPlan {
  /** Version being built (decimal text). */
  versionId: string;
  pagesTotal: number;
  /** Source rows at or below the watermark (decimal text); null when only the workflow answered. */
  sourceRows: string | null;
  watermark: Watermark | null;
  /** Rows per page the plan chose; absent when not known. */
  pageSize?: number | null;
  /** How the plan sized its pages; absent when not known. */
  pageSizing?: PageSizing;
  /**
   * The active version a refresh plan builds on; null for a full plan; absent when not known (the
   * `progress` query does not say).
   */
  baseVersionId?: string | null;
  /**
   * What the plan's `planned` event records of a refresh (lib/catalog `refreshPlanFacts`), in words:
   * its changes or why it runs as a full rebuild; null or absent otherwise.
   */
  refreshNote?: string | null;
  /** `database`: the version row; `workflow`: the `progress` query. */
  answeredBy: 'database' | 'workflow';
}

/** Where {@link awaitPlan} looks for the plan. */
export interface PlanReaders {
  /**
   * The version row of this rebuild (null while it is not planned).
   * @throws when the catalog database cannot be read; the `progress` query is asked instead.
   */
  readPlan(): Promise<(PlanResult & Pick<SeenPlan, 'baseVersionId' | 'refreshNote'>) | null>;
  /** The `progress` query, rejecting after `timeoutMs` (ms) when no worker answers. */
  queryProgress(timeoutMs: number): Promise<RebuildProgress>;
  /** Whether the rebuild has closed (failed at its plan, say): its plan will not come. */
  closed?(): Promise<boolean>;
}

/** A refresh plan's facts (lib/catalog `refreshPlanFacts`) as the receipt's line; null for none. */
function refreshNoteOf(f: Awaited<ReturnType<typeof refreshPlanFacts>>): string | null {
  if (!f) return null;
  return 'fullRebuildBecause' in f ? `refresh planned as a full rebuild: ${f.fullRebuildBecause}` : refreshPlanText(f);
}

/**
 * {@link PlanReaders.readPlan} from the catalog database: the plan stored for (workflow id, first run
 * id) and, for a refresh plan, the version it builds on.
 * @param pool the catalog database (opened on first use).
 */
export function planOfVersionRow(pool: () => Pool, workflowId: string, firstRunId: string): PlanReaders['readPlan'] {
  return async () => {
    const p = await findPlan(pool(), workflowId, firstRunId);
    return (
      p && {
        ...p,
        baseVersionId: await baseVersionOf(pool(), p.versionId),
        refreshNote: refreshNoteOf(await refreshPlanFacts(pool(), p.versionId)),
      }
    );
  };
}

/**
 * Waits until the rebuild is planned: reads the version row every `intervalMs` (default 250 ms)
 * and asks the `progress` query about once a second (every round when the database read fails).
 * Never throws: read errors count as "not yet". Stops early when the rebuild has closed (`closed`,
 * asked with the query).
 * @param timeoutMs how long to wait (ms).
 * @returns the plan, or null when neither answered with a plan within `timeoutMs` or the rebuild closed.
 */
export async function awaitPlan(readers: PlanReaders, timeoutMs: number, intervalMs = 250): Promise<SeenPlan | null> {
  const deadline = Date.now() + timeoutMs;
  for (let round = 0; ; round++) {
    let databaseFailed = false;
    try {
      const p = await readers.readPlan();
      if (p) return { ...p, answeredBy: 'database' };
    } catch {
      databaseFailed = true;
    }
    const left = deadline - Date.now();
    if (databaseFailed || round % 4 === 3) {
      try {
        const p = await readers.queryProgress(Math.max(500, Math.min(2_000, left)));
        if (p.versionId) {
          return {
            versionId: p.versionId,
            pagesTotal: p.pagesTotal,
            sourceRows: null,
            watermark: p.watermark,
            pageSize: p.pageSize,
            pageSizing: p.pageSizing,
            answeredBy: 'workflow',
          };
        }
      } catch {
        /* no worker answered yet */
      }
      if (await readers.closed?.().catch(() => false)) return null;
    }
    if (Date.now() >= deadline) return null;
    await new Promise((r) => setTimeout(r, Math.min(intervalMs, Math.max(0, deadline - Date.now()))));
  }
}

/** The receipt of one `start` (the fields of `start --json`). */
export interface Receipt {
  catalog: string;
  workflowId: string;
  taskQueue: string;
  /** True when `start` attached to a running rebuild of the catalog. */
  attached: boolean;
  /** The rebuild includes file records (`start --files`). */
  files: boolean;
  /** False when the rebuild was not planned within the wait (it runs on). */
  planned: boolean;
  /** Version being built (decimal text); null when not planned. */
  versionId: string | null;
  /** Pages of the plan; null when not planned. */
  pagesTotal: number | null;
  /** Jobs per page: as planned; before the plan, `--page-size` (null when the plan sizes them). */
  pageSize: number | null;
  /** `fixed` by `--page-size` or by a refresh, else `auto` (sized by the plan from measured cost). */
  pageSizing: PageSizing;
  /**
   * The start asked for a refresh (`--refresh`). A refresh plan's pages are `fixed` at its own
   * size (at most that many changed jobs a page), whatever `--page-size` says; a refresh that
   * falls back to a full rebuild sizes them as a rebuild does.
   */
  refresh: boolean;
  /** `--page-size` as given; null without it. */
  requestedPageSize: number | null;
  /**
   * The active version the plan refreshes; null for a full plan, or when only the `progress` query
   * answered (then a refresh plan is told by its page size differing from `--page-size`).
   */
  baseVersionId: string | null;
  /**
   * A refresh's changes as its `planned` event gives them (`a refresh of version B: x new, y changed
   * and z deleted jobs in p pages`), or why it runs as a full rebuild; null otherwise or not known.
   */
  refreshNote: string | null;
  /** Source rows at or below the watermark (a refresh plan: the new and changed jobs it reads); null when not planned or not known. */
  sourceRows: number | null;
  /** Highest job key (decimal text, null for an empty source) and source time at plan; null when not planned. */
  watermark: Watermark | null;
  /** Who answered: `database` (version row), `workflow` (`progress` query); null when not planned. */
  answeredBy: 'database' | 'workflow' | null;
}

/** The receipt of a rebuild from what `start` knows and the plan seen (null: not planned in time). */
export function buildReceipt(
  known: Pick<Receipt, 'catalog' | 'workflowId' | 'taskQueue' | 'attached' | 'pageSize' | 'pageSizing'> &
    Partial<Pick<Receipt, 'files' | 'refresh'>>,
  plan: SeenPlan | null,
): Receipt {
  return {
    ...known,
    files: !!known.files,
    refresh: !!known.refresh,
    requestedPageSize: known.pageSize,
    baseVersionId: plan?.baseVersionId ?? null,
    refreshNote: plan?.refreshNote ?? null,
    pageSize: plan?.pageSize ?? known.pageSize,
    pageSizing: plan?.pageSizing ?? known.pageSizing,
    planned: !!plan,
    versionId: plan?.versionId ?? null,
    pagesTotal: plan?.pagesTotal ?? null,
    sourceRows: plan?.sourceRows == null ? null : Number(plan.sourceRows),
    watermark: plan?.watermark ?? null,
    answeredBy: plan?.answeredBy ?? null,
  };
}

/**
 * What a page holds: `500 jobs per page`; a plan with files that sized its pages weighs each job as
 * 1 + its file records: `about 100000 rows (jobs and their files) per page`; a refresh plan holds
 * `at most 2000 changed jobs per page`.
 */
function pagesText(r: Receipt): string {
  if (refreshPages(r)) return `at most ${r.pageSize} changed jobs per page`;
  return r.files && r.pageSizing !== 'fixed'
    ? `about ${r.pageSize} rows (jobs and their files) per page`
    : `${r.pageSize} jobs per page`;
}

/**
 * A refresh plan's pages: fixed at the refresh's own size, whatever `--page-size` said. The version
 * row says so (its base version); from the `progress` query alone, a `--refresh` whose page size is
 * not the one asked for.
 */
function refreshPages(r: Receipt): boolean {
  if (r.pageSizing !== 'fixed') return false;
  if (r.answeredBy === 'database') return r.baseVersionId !== null;
  return r.refresh && r.requestedPageSize !== r.pageSize;
}

/**
 * The receipt as text lines, e.g.
 * `planned version 12 of catalog main:` (`… main with files:` with `--files`), `  pages: 40 (500 jobs per page, fixed by --page-size)` (or
 * `sized by the plan from measured cost`),
 * `  rows: 20000 source rows at the watermark`, `  watermark: job 20000 at 2026-11-01T20:00:00.000000Z`;
 * a refresh adds what its `planned` event says of it after the first line, and a refresh plan's rows
 * are `N new and changed jobs read from the source`;
 * when not planned, one line saying so after `waitedMs` (ms).
 */
export function formatReceipt(r: Receipt, waitedMs: number): string[] {
  if (!r.planned) {
    return [
      `rebuild of ${r.catalog} not planned within ${Math.round(waitedMs / 1000)} s; it runs on: follow it with catalog-rebuild status --catalog ${r.catalog}`,
    ];
  }
  const sizing =
    r.pageSizing !== 'fixed'
      ? 'sized by the plan from measured cost'
      : refreshPages(r)
        ? "a refresh's fixed size"
        : 'fixed by --page-size';
  const w = r.watermark;
  const watermark = !w ? 'unknown' : `${w.jobKey === null ? 'no jobs (empty source)' : `job ${w.jobKey}`} at ${w.time}`;
  const rows = r.sourceRows === null ? 'unknown (the catalog database did not answer)' : r.sourceRows;
  return [
    `planned version ${r.versionId} of catalog ${r.catalog}${r.files ? ' with files' : ''}:`,
    ...(r.refreshNote ? [`  ${r.refreshNote}`] : []),
    `  pages: ${r.pagesTotal} (${pagesText(r)}, ${sizing})`,
    r.baseVersionId !== null
      ? `  rows: ${rows} new and changed jobs read from the source`
      : `  rows: ${rows} source rows at the watermark`,
    `  watermark: ${watermark}`,
  ];
}
