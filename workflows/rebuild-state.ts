/**
 * The state of one run of `RebuildCatalog` and what it shows: the `progress` query's answer, the
 * Web UI's current details, the `CatalogName` / `RebuildPhase` search attributes, and the handlers
 * of the `pause`, `resume` and `cancel` signals, the page activities' `pageActivityPaused` /
 * `pageActivityResumed` reports, the `progress` query and the `setThrottle` update.
 * Deterministic: workflow code.
 */
import {
  CancellationScope,
  log,
  patched,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type {
  CarriedState,
  CopyPageResult,
  PageActivityReport,
  RebuildCatalogInput,
  RebuildCatalogResult,
  RebuildPhase,
  RebuildProgress,
  ReconcileSummary,
} from './definitions';
import {
  cancelSignal,
  pageActivityPausedSignal,
  pageActivityResumedSignal,
  pauseSignal,
  progressQuery,
  resumeSignal,
  setThrottleUpdate,
} from './definitions';
import { LEGACY_DEFAULT_PAGE_SIZE, PAGE_ATTEMPTS_REPORTED_ABOVE, PAGE_DURATIONS_KEPT } from './policies';
import { CatalogNameKey, RebuildPhaseKey } from './search-attributes';
import { initialThrottle, validateThrottle } from './validation';

/** Rows per second are measured over this window (ms). */
const RATE_WINDOW_MS = 60_000;

/**
 * Patch of the operator-pause reports: rebuilds whose history has no marker ignore
 * `pageActivityPaused` / `pageActivityResumed` on replay, as the code they ran did.
 */
export const OPERATOR_PAUSE_PATCH = 'operator-paused-pages';

/**
 * The carried state of a first run: nothing planned yet, the page window from the input.
 * @throws ApplicationFailure CONFIG_INVALID when `concurrency` or `pauseBetweenPagesMs` is out of range.
 */
export function initialState(input: RebuildCatalogInput): CarriedState {
  const throttle = initialThrottle(input);
  return {
    versionId: '',
    pagesTotal: 0,
    sourceRows: '0',
    watermark: { jobKey: null, time: '' },
    checkpoint: 0,
    rowsUpserted: 0,
    rejects: 0,
    retries: 0,
    paused: false,
    concurrency: throttle.concurrency,
    pauseBetweenPagesMs: throttle.pauseBetweenPagesMs,
    pageDurationsMs: [],
    startedAtMs: Date.now(),
    lastEvent: 'started',
    runs: 0,
  };
}

/**
 * One run's state: `carried` is what continue-as-new hands to the next run (version, plan, counts,
 * pause state, throttle); the rest lives for this run only (phase, pages in flight, recent rates).
 */
export class RebuildState {
  /** Current phase (see RebuildPhase). */
  phase: RebuildPhase;
  /** Set by the `cancel` signal. */
  cancelRequested = false;
  /** The last reconciliation, once reconciled. */
  reconciliation: ReconcileSummary | null = null;
  /** Pages whose copyPage activity is scheduled and has not ended. */
  readonly inFlight = new Set<number>();
  /** Committed pages above the checkpoint (committed out of order). */
  private readonly doneAbove = new Set<number>();
  /** Rows committed per page result in the last minute, with the workflow time (ms) of the result. */
  private readonly recent: { t: number; rows: number }[] = [];
  /** Workflow time (ms) this run's copy phase started. */
  copyStartedMs = Date.now();
  /** Bumped by every event that may let the copy window move on; the window waits for it to change. */
  wake = 0;
  /** Scope of the whole rebuild; the `cancel` signal cancels it. */
  readonly root = new CancellationScope();

  constructor(
    readonly input: RebuildCatalogInput,
    /** State carried across continue-as-new; mutated in place. */
    readonly carried: CarriedState,
    resumed: boolean,
  ) {
    this.phase = resumed ? 'copying' : 'planning';
  }

  /** Records `msg` as the last event (progress, details) and logs it. */
  note(msg: string): void {
    this.carried.lastEvent = msg;
    log.info(msg, { catalog: this.input.catalog, versionId: this.carried.versionId });
  }

  /** Enters phase `p`: search attributes `CatalogName` and `RebuildPhase`, and the current details. */
  setPhase(p: RebuildPhase): void {
    this.phase = p;
    upsertSearchAttributes([
      { key: CatalogNameKey, value: this.input.catalog },
      { key: RebuildPhaseKey, value: p },
    ]);
    this.details();
  }

  /** Committed pages: the checkpoint plus pages committed above it. */
  pagesDone(): number {
    return this.carried.checkpoint + this.doneAbove.size;
  }

  /** Pages whose activity an operator paused (reported by the activity), in page order. */
  operatorPausedPages(): number[] {
    return [...(this.carried.operatorPausedPages ?? [])].sort((a, b) => a - b);
  }

  /** Whether an operator paused the activity of a page in flight: then no new page starts. */
  operatorPaused(): boolean {
    return !!this.carried.operatorPausedPages?.some((p) => this.inFlight.has(p));
  }

  /**
   * Records that an operator paused the activity of `pageNo` (a page in flight); false when the
   * report is stale (the page is no longer in flight) or already known.
   */
  pageOperatorPaused(pageNo: number): boolean {
    const st = this.carried;
    if (!this.inFlight.has(pageNo) || st.operatorPausedPages?.includes(pageNo)) return false;
    st.operatorPausedPages = [...(st.operatorPausedPages ?? []), pageNo];
    return true;
  }

  /** Forgets an operator pause of `pageNo` (it runs again or ended); false when it was not paused. */
  pageOperatorResumed(pageNo: number): boolean {
    const st = this.carried;
    if (!st.operatorPausedPages?.includes(pageNo)) return false;
    st.operatorPausedPages = st.operatorPausedPages.filter((p) => p !== pageNo);
    return true;
  }

  /** A page's activity ended without committing (the copy window fails): it is no longer in flight. */
  pageFailed(pageNo: number): void {
    this.inFlight.delete(pageNo);
    this.pageOperatorResumed(pageNo);
  }

  /** Records the result of a committed page: checkpoint, counts, retries, duration and rate. */
  pageCommitted(pageNo: number, r: CopyPageResult): void {
    const st = this.carried;
    this.inFlight.delete(pageNo);
    this.pageOperatorResumed(pageNo);
    this.doneAbove.add(pageNo);
    while (this.doneAbove.has(st.checkpoint + 1)) {
      this.doneAbove.delete(st.checkpoint + 1);
      st.checkpoint++;
    }
    st.rowsUpserted += r.rows;
    st.rejects += r.rejects;
    if (r.activityAttempt > 1) {
      st.retries += r.activityAttempt - 1;
      this.note(
        `page ${pageNo} committed on attempt ${r.activityAttempt}${r.alreadyCommitted ? ' (found already committed)' : ''}: ${r.previousFailure ?? 'previous attempt failed'}`,
      );
    }
    if (r.activityAttempt > PAGE_ATTEMPTS_REPORTED_ABOVE)
      log.warn(`page needed more than ${PAGE_ATTEMPTS_REPORTED_ABOVE} attempts`, {
        pageNo,
        attempts: r.activityAttempt,
      });
    st.pageDurationsMs.push(r.durationMs);
    if (st.pageDurationsMs.length > PAGE_DURATIONS_KEPT) st.pageDurationsMs.shift();
    this.recent.push({ t: Date.now(), rows: r.rows });
    this.details();
  }

  /** Rows committed per second over the last minute (or since the copy phase started). */
  private rate(): number {
    const now = Date.now();
    while (this.recent.length && this.recent[0].t < now - RATE_WINDOW_MS) this.recent.shift();
    const rows = this.recent.reduce((n, r) => n + r.rows, 0);
    const windowS = Math.max(1, Math.min(RATE_WINDOW_MS / 1000, (now - this.copyStartedMs) / 1000));
    return Math.round(rows / windowS);
  }

  /**
   * How the pages are sized: as planned; before the plan, as requested (no page size: `auto`);
   * for a plan made by an earlier release (nothing carried), fixed at the requested or old default size.
   */
  private sizing(): Pick<RebuildProgress, 'pageSizing' | 'pageSize'> {
    const st = this.carried;
    const given = this.input.pageSize;
    if (st.pageSize !== undefined) return { pageSizing: st.pageSizing ?? 'fixed', pageSize: st.pageSize };
    if (st.versionId) return { pageSizing: 'fixed', pageSize: given ?? LEGACY_DEFAULT_PAGE_SIZE };
    return given === undefined ? { pageSizing: 'auto', pageSize: null } : { pageSizing: 'fixed', pageSize: given };
  }

  /** The `progress` query's answer. */
  progress(): RebuildProgress {
    const st = this.carried;
    const phase = this.phase;
    const rps = this.rate();
    const remaining = Math.max(0, Number(st.sourceRows) - st.rowsUpserted);
    return {
      phase,
      paused: st.paused,
      draining: (st.paused || this.cancelRequested) && this.inFlight.size > 0,
      pagesTotal: st.pagesTotal,
      pagesDone: this.pagesDone(),
      ...this.sizing(),
      checkpoint: st.checkpoint,
      rowsUpserted: st.rowsUpserted,
      rejects: st.rejects,
      retries: st.retries,
      rowsPerSecond: rps,
      etaSeconds: phase === 'copying' ? (rps > 0 ? Math.round(remaining / rps) : null) : phase === 'done' ? 0 : null,
      versionId: st.versionId || null,
      watermark: st.versionId ? st.watermark : null,
      lastEvent: st.lastEvent,
      catalog: this.input.catalog,
      source: this.input.source,
      files: !!this.input.files,
      concurrency: st.concurrency,
      inFlight: this.inFlight.size,
      run: st.runs + 1,
      reconciliation: this.reconciliation,
      operatorPausedPages: this.operatorPausedPages(),
    };
  }

  /** Sets the workflow's current details (Web UI): phase, pages, rate, retries, pause, last event. */
  details(): void {
    const p = this.progress();
    const bits = [
      `${this.phase}`,
      `page ${p.pagesDone.toLocaleString('en-US')} of ${p.pagesTotal.toLocaleString('en-US')}`,
    ];
    if (this.phase === 'copying') bits.push(`${p.rowsPerSecond.toLocaleString('en-US')} rows/s`);
    bits.push(`${p.retries} retries`);
    if (this.carried.paused) bits.push('paused');
    const opPaused = this.operatorPausedPages();
    if (opPaused.length)
      bits.push(`${opPaused.length > 1 ? 'pages' : 'page'} ${opPaused.join(', ')} paused by an operator`);
    setCurrentDetails(`${bits.join(' · ')}\n\nlast event: ${this.carried.lastEvent}`);
  }

  /** The rebuild's result: published (with the version it replaced) or cancelled by the `cancel` signal. */
  result(
    o: { published: true; previousVersionId: string | null } | { published: false; cancelled: true },
  ): RebuildCatalogResult {
    const st = this.carried;
    return {
      catalog: this.input.catalog,
      versionId: st.versionId,
      published: o.published,
      cancelled: !o.published,
      pagesTotal: st.pagesTotal,
      rowsUpserted: st.rowsUpserted,
      rejects: st.rejects,
      retries: st.retries,
      reconciliation: this.reconciliation,
      previousVersionId: o.published ? o.previousVersionId : null,
      durationMs: Date.now() - st.startedAtMs,
      runs: st.runs + 1,
    };
  }
}

/**
 * Handlers of the rebuild's messages: `pause` stops scheduling pages, `resume` continues from the
 * checkpoint, `cancel` cancels the rebuild's scope, `pageActivityPaused` / `pageActivityResumed`
 * (sent by page activities an operator paused with `temporal activity pause`, and by their next
 * attempt) hold and release the page window, `progress` answers from the state, `setThrottle`
 * changes the page window (validated by {@link validateThrottle}) and returns the settings in force.
 */
export function setRebuildHandlers(state: RebuildState): void {
  const st = state.carried;
  setHandler(pauseSignal, () => {
    if (!st.paused) {
      st.paused = true;
      state.note('paused by signal');
      state.details();
      state.wake++;
    }
  });
  setHandler(resumeSignal, () => {
    if (st.paused) {
      st.paused = false;
      state.note(`resumed by signal at checkpoint ${st.checkpoint}`);
      state.details();
      state.wake++;
    }
  });
  setHandler(cancelSignal, (arg) => {
    if (!state.cancelRequested) {
      state.cancelRequested = true;
      state.note(`cancel requested${arg?.reason ? `: ${arg.reason}` : ''}`);
      state.root.cancel();
    }
  });
  setHandler(pageActivityPausedSignal, (r: PageActivityReport) => {
    // Guarded: the report changes which pages start, so histories without the marker ignore it.
    if (!patched(OPERATOR_PAUSE_PATCH) || !state.pageOperatorPaused(r.pageNo)) return;
    state.note(
      `page ${r.pageNo} paused by an operator (temporal activity pause; attempt ${r.attempt} on ${r.workerIdentity}): no new page starts until it is unpaused`,
    );
    state.details();
    state.wake++;
  });
  setHandler(pageActivityResumedSignal, (r: PageActivityReport) => {
    if (!patched(OPERATOR_PAUSE_PATCH) || !state.pageOperatorResumed(r.pageNo)) return;
    state.note(`page ${r.pageNo} runs again (attempt ${r.attempt} on ${r.workerIdentity}) after an operator pause`);
    state.details();
    state.wake++;
  });
  setHandler(progressQuery, () => state.progress());
  setHandler(
    setThrottleUpdate,
    (s) => {
      if (s.concurrency !== undefined) st.concurrency = s.concurrency;
      if (s.pauseBetweenPagesMs !== undefined) st.pauseBetweenPagesMs = s.pauseBetweenPagesMs;
      state.note(`throttle set: ${st.concurrency} pages in flight, ${st.pauseBetweenPagesMs} ms between pages`);
      state.wake++;
      return { concurrency: st.concurrency, pauseBetweenPagesMs: st.pauseBetweenPagesMs };
    },
    { validator: validateThrottle },
  );
}
