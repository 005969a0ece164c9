/**
 * The state of one run of `RebuildCatalog` and what it shows: the `progress` query's answer, the
 * Web UI's current details, the `CatalogName` / `RebuildPhase` search attributes, the memo (pause
 * state, read without a worker) and the operator events it records in the catalog's event log. Its
 * message handlers are in `rebuild-handlers.ts`. Deterministic: workflow code.
 */
import { CancellationScope, log, setCurrentDetails, upsertMemo, upsertSearchAttributes } from '@temporalio/workflow';
import type {
  CarriedState,
  CopyPageResult,
  RebuildCatalogInput,
  RebuildCatalogResult,
  RebuildMemo,
  RebuildPhase,
  RebuildProgress,
  ReconcileSummary,
} from './definitions';
import { short } from './activity-options';
import { PAGE_ATTEMPTS_REPORTED_ABOVE, PAGE_DURATIONS_KEPT } from './policies';
import { CatalogNameKey, RebuildPhaseKey } from './search-attributes';
import { initialThrottle } from './validation';

/** Rows per second are measured over this window (ms). */
const RATE_WINDOW_MS = 60_000;

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
    pageSize: 0,
    pageSizing: input.pageSize === undefined ? 'auto' : 'fixed',
    maxPageRows: 0,
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
  /** Set when this run scheduled the plan (a first run): a plan may have committed a version it did not return. */
  planScheduled = false;
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
  /** The operator events recorded so far, one after the other (so the log keeps their order). */
  private events: Promise<void> = Promise.resolve();

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

  /**
   * Publishes the pause state in the memo (`paused`, `pauseChangedAt`), and with `outcome` the result
   * of a cancelled run (Temporal keeps none for it), which `status`, `wait` and `check --rebuild`
   * read from Temporal's description without a worker.
   */
  memo(outcome?: RebuildCatalogResult): void {
    const st = this.carried;
    const memo: RebuildMemo = {
      paused: st.paused,
      pauseChangedAt: st.pauseChangedAt ?? null,
      ...(outcome ? { outcome } : {}),
    };
    upsertMemo({ ...memo });
  }

  /**
   * Records an operator action (pause, resume, cancel, throttle) in the catalog's event log, after
   * the ones recorded before it; resolves once it is written. Not cancelled with the rebuild.
   */
  operatorEvent(kind: string, message: string, details: Record<string, unknown> = {}): Promise<void> {
    const event = {
      catalog: this.input.catalog,
      versionId: this.carried.versionId || null,
      kind,
      message,
      details: { ...details, checkpoint: this.carried.checkpoint, pagesDone: this.pagesDone() },
    };
    // An event that cannot be written (its activity's retries exhausted) is logged, never a failure
    // of the handler: that would fail the rebuild.
    const record = () =>
      CancellationScope.nonCancellable(() => short.recordEvent(event)).catch((err: unknown) =>
        log.warn('operator event not recorded', { kind, error: err instanceof Error ? err.message : String(err) }),
      );
    this.events = this.events.then(record);
    return this.events;
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

  /** How the pages are sized: as planned; before the plan, as requested (no page size: `auto`). */
  private sizing(): Pick<RebuildProgress, 'pageSizing' | 'pageSize'> {
    const st = this.carried;
    const given = this.input.pageSize;
    if (st.versionId) return { pageSizing: st.pageSizing, pageSize: st.pageSize };
    return given === undefined ? { pageSizing: 'auto', pageSize: null } : { pageSizing: 'fixed', pageSize: given };
  }

  /** The `progress` query's answer. */
  progress(): RebuildProgress {
    const st = this.carried;
    const phase = this.phase;
    // Nothing moves while paused and drained: no rate, no ETA (the last minute's rate would linger).
    const idle = st.paused && this.inFlight.size === 0;
    const rps = idle ? 0 : this.rate();
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
    o:
      | { published: true; previousVersionId: string | null }
      | { published: false; cancelled: true }
      | { published: false; upToDate: true },
  ): RebuildCatalogResult {
    const st = this.carried;
    const cancelled = 'cancelled' in o;
    return {
      ...(st.refresh ? { refresh: st.refresh } : {}),
      ...(st.fullRebuildBecause ? { fullRebuildBecause: st.fullRebuildBecause } : {}),
      ...('upToDate' in o ? { upToDate: true } : {}),
      catalog: this.input.catalog,
      versionId: st.versionId,
      published: o.published,
      cancelled,
      pagesTotal: st.pagesTotal,
      pagesDone: this.pagesDone(),
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
