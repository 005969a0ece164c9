/**
 * The copy phase of `RebuildCatalog`: a sliding window of `copyPage` activities over the planned
 * pages, from the checkpoint on. Progress advances only from committed results (Temporal history is
 * the checkpoint); `pause` stops scheduling, and so does a page activity an operator paused with
 * `temporal activity pause` until it runs again; `setThrottle` resizes the window; a run that
 * scheduled its share of pages continues as new once the window drained. Page activities have the
 * ids `page-<n>`.
 * Deterministic: workflow code.
 */
import type { ActivityFunctionWithOptions, WorkflowInfo } from '@temporalio/workflow';
import { allHandlersFinished, condition, continueAsNew, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { CopyPageResult, RebuildCatalogInput, RebuildCatalogResult } from './definitions';
import { pageActivities, short } from './activity-options';
import type { RebuildState } from './rebuild-state';

/** Activity id of page `pageNo`'s `copyPage` activity, as `temporal activity pause|unpause|reset` take it. */
export const pageActivityId = (pageNo: number): string => `page-${pageNo}`;

/** Settings of the copy window. */
export interface CopyWindowOptions {
  /** Heartbeat timeout of page activities (ms). */
  heartbeatTimeoutMs: number;
  /** Pages this run may schedule before it continues as new. */
  maxPagesPerRun: number;
  /** `workflowInfo()` as the run saw it when it started. */
  startInfo: WorkflowInfo;
}

/**
 * Copies every page not yet committed, then records the end of the copy phase (an event in the
 * catalog database).
 * Continues as new (the returned promise rejects with `ContinueAsNew`) after `maxPagesPerRun` pages,
 * or when Temporal suggests it, once no page is in flight and every handler finished, carrying the
 * state of `state.carried`.
 * @throws the first failure of a page (ActivityFailure), once no other page is left to start.
 */
export async function copyPages(state: RebuildState, opts: CopyWindowOptions): Promise<void> {
  await new CopyWindow(state, opts).run();
  const st = state.carried;
  state.note(`copy phase done: ${st.pagesTotal} pages, ${st.rowsUpserted} rows, ${st.retries} retries`);
  await short.recordEvent({
    catalog: state.input.catalog,
    versionId: st.versionId,
    kind: 'copied',
    message: `copy phase done: ${st.pagesTotal} pages, ${st.rowsUpserted} rows, ${st.rejects} rejects, ${st.retries} retries, ${st.runs + 1} run(s)`,
    details: {
      pagesTotal: st.pagesTotal,
      rowsUpserted: st.rowsUpserted,
      rejects: st.rejects,
      retries: st.retries,
      runs: st.runs + 1,
    },
  });
}

/** One run's window over the pages: the next page to start and the first failure. */
class CopyWindow {
  private nextPage: number;
  private scheduledThisRun = 0;
  private failure: unknown = null;
  /** Workflow time (ms) the last page started. */
  private lastStartMs = 0;

  constructor(
    private readonly state: RebuildState,
    private readonly opts: CopyWindowOptions,
  ) {
    state.copyStartedMs = Date.now();
    this.nextPage = state.carried.checkpoint + 1;
  }

  /** Starts pages while the window has room, waits for results; resolves when every page committed. */
  async run(): Promise<void> {
    const { state, opts } = this;
    const st = state.carried;
    for (;;) {
      if (this.failure) throw this.failure;
      if (state.pagesDone() === st.pagesTotal && state.inFlight.size === 0) return;
      const runFull =
        this.scheduledThisRun >= opts.maxPagesPerRun ||
        opts.startInfo.continueAsNewSuggested ||
        workflowInfo().continueAsNewSuggested;
      const held = st.paused || state.operatorPaused();
      if (!held && !runFull && this.nextPage <= st.pagesTotal && state.inFlight.size < st.concurrency) {
        if (st.pauseBetweenPagesMs > 0 && this.lastStartMs > 0) {
          const waitMs = this.lastStartMs + st.pauseBetweenPagesMs - Date.now();
          if (waitMs > 0) {
            const w = state.wake;
            await condition(() => state.wake !== w || !!this.failure, waitMs);
            continue;
          }
        }
        this.startPage(this.nextPage++);
        continue;
      }
      if (runFull && state.inFlight.size === 0 && this.nextPage <= st.pagesTotal) {
        // Continue as new after the window drained and every handler finished, carrying all state.
        await condition(() => state.inFlight.size === 0);
        await condition(allHandlersFinished);
        state.note(`continuing as new at checkpoint ${st.checkpoint} (run ${st.runs + 2})`);
        return await continueAsNew<(input: RebuildCatalogInput) => Promise<RebuildCatalogResult>>({
          ...state.input,
          carried: { ...st, runs: st.runs + 1 },
        });
      }
      const w = state.wake;
      await condition(() => state.wake !== w);
    }
  }

  /** Schedules `copyPage` for `pageNo`; its result (or failure) wakes the window. */
  private startPage(pageNo: number): void {
    const { state, opts } = this;
    const st = state.carried;
    state.inFlight.add(pageNo);
    this.scheduledThisRun++;
    this.lastStartMs = Date.now();
    const acts = pageActivities(
      opts.heartbeatTimeoutMs,
      st.pageDurationsMs,
      `page ${pageNo} of ${st.pagesTotal}`,
      st.maxPageRows,
    );
    const copyPage = acts.copyPage as ActivityFunctionWithOptions<Activities['copyPage']>;
    copyPage
      .executeWithOptions({ activityId: pageActivityId(pageNo) }, [
        { catalog: state.input.catalog, source: state.input.source, versionId: st.versionId, pageNo },
      ])
      .then((r: CopyPageResult) => {
        state.pageCommitted(pageNo, r);
        state.wake++;
      })
      .catch((err: unknown) => {
        state.pageFailed(pageNo);
        if (!this.failure) this.failure = err;
        state.wake++;
      });
  }
}
