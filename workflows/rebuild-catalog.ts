/**
 * RebuildCatalog: plan → pages (sliding window, continue-as-new) → seal → reconcile ⇄ RepairBucket
 * children → PublishCatalog child. Temporal history is the checkpoint; the ledger is the page record.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  executeChild,
  isCancellation,
  log,
  patched,
  setCurrentDetails,
  setHandler,
  TemporalFailure,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  cancelSignal,
  CarriedState,
  CopyPageResult,
  pauseSignal,
  progressQuery,
  RebuildCatalogInput,
  RebuildCatalogResult,
  RebuildPhase,
  RebuildProgress,
  ReconcileSummary,
  resumeSignal,
  setThrottleUpdate,
} from './definitions';
import { long, pageActivities, short } from './activity-options';
import { FailureType } from './failures';
import { publishWorkflowId, repairWorkflowId } from './names';
import { MAX_REPAIR_CHILDREN, PAGE_ATTEMPTS_REPORTED_ABOVE, PAGE_DURATIONS_KEPT, REPAIR_CONCURRENCY } from './policies';
import { initialThrottle, runSettings, validateThrottle } from './validation';
import { CatalogNameKey, RebuildPhaseKey } from './search-attributes';
import { PublishCatalog } from './publish-catalog';
import { RepairBucket } from './repair-bucket';

/**
 * Rebuilds one catalog from one source into a new version and publishes it atomically.
 * Workflow id `catalog-rebuild/<catalog>`. Signals pause/resume/cancel, query progress, update setThrottle.
 * @throws ApplicationFailure NOT_PUBLISHABLE (non-retryable) when reconciliation or the shrink guard refuse.
 */
export async function RebuildCatalog(input: RebuildCatalogInput): Promise<RebuildCatalogResult> {
  const info = workflowInfo();
  const { pageSize, heartbeatTimeoutMs, maxPagesPerRun, retention, maxRepairRounds: maxRounds } = runSettings(input);
  const c = input.carried;

  const st: CarriedState = c ?? {
    ...initialThrottle(input),
    versionId: '',
    pagesTotal: 0,
    sourceRows: '0',
    watermark: { jobKey: null, time: '' },
    checkpoint: 0,
    rowsUpserted: 0,
    rejects: 0,
    retries: 0,
    paused: false,
    pageDurationsMs: [],
    startedAtMs: Date.now(),
    lastEvent: 'started',
    runs: 0,
  };
  let phase: RebuildPhase = c ? 'copying' : 'planning';
  let cancelRequested = false;
  let reconciliation: ReconcileSummary | null = null;
  const inFlight = new Set<number>();
  const doneAbove = new Set<number>();
  const recent: { t: number; rows: number }[] = [];
  let copyStartedMs = Date.now();
  let wake = 0;
  const root = new CancellationScope();

  const note = (msg: string) => {
    st.lastEvent = msg;
    log.info(msg, { catalog: input.catalog, versionId: st.versionId });
  };
  const setPhase = (p: RebuildPhase) => {
    phase = p;
    upsertSearchAttributes([
      { key: CatalogNameKey, value: input.catalog },
      { key: RebuildPhaseKey, value: p },
    ]);
    details();
  };
  const rate = (): number => {
    const now = Date.now();
    while (recent.length && recent[0].t < now - 60_000) recent.shift();
    const rows = recent.reduce((n, r) => n + r.rows, 0);
    const windowS = Math.max(1, Math.min(60, (now - copyStartedMs) / 1000));
    return Math.round(rows / windowS);
  };
  const pagesDone = () => st.checkpoint + doneAbove.size;
  const progress = (): RebuildProgress => {
    const rps = rate();
    const remaining = Math.max(0, Number(st.sourceRows) - st.rowsUpserted);
    return {
      phase,
      paused: st.paused,
      draining: (st.paused || cancelRequested) && inFlight.size > 0,
      pagesTotal: st.pagesTotal,
      pagesDone: pagesDone(),
      checkpoint: st.checkpoint,
      rowsUpserted: st.rowsUpserted,
      rejects: st.rejects,
      retries: st.retries,
      rowsPerSecond: rps,
      etaSeconds: phase === 'copying' ? (rps > 0 ? Math.round(remaining / rps) : null) : phase === 'done' ? 0 : null,
      versionId: st.versionId || null,
      watermark: st.versionId ? st.watermark : null,
      lastEvent: st.lastEvent,
      catalog: input.catalog,
      source: input.source,
      concurrency: st.concurrency,
      inFlight: inFlight.size,
      run: st.runs + 1,
      reconciliation,
    };
  };
  const details = () => {
    const p = progress();
    const bits = [`${phase}`, `page ${p.pagesDone.toLocaleString('en-US')} of ${p.pagesTotal.toLocaleString('en-US')}`];
    if (phase === 'copying') bits.push(`${p.rowsPerSecond.toLocaleString('en-US')} rows/s`);
    bits.push(`${p.retries} retries`);
    if (st.paused) bits.push('paused');
    setCurrentDetails(`${bits.join(' · ')}\n\nlast event: ${st.lastEvent}`);
  };

  setHandler(pauseSignal, () => {
    if (!st.paused) {
      st.paused = true;
      note('paused by signal');
      details();
      wake++;
    }
  });
  setHandler(resumeSignal, () => {
    if (st.paused) {
      st.paused = false;
      note(`resumed by signal at checkpoint ${st.checkpoint}`);
      details();
      wake++;
    }
  });
  setHandler(cancelSignal, (arg) => {
    if (!cancelRequested) {
      cancelRequested = true;
      note(`cancel requested${arg?.reason ? `: ${arg.reason}` : ''}`);
      root.cancel();
    }
  });
  setHandler(progressQuery, progress);
  setHandler(
    setThrottleUpdate,
    (s) => {
      if (s.concurrency !== undefined) st.concurrency = s.concurrency;
      if (s.pauseBetweenPagesMs !== undefined) st.pauseBetweenPagesMs = s.pauseBetweenPagesMs;
      note(`throttle set: ${st.concurrency} pages in flight, ${st.pauseBetweenPagesMs} ms between pages`);
      wake++;
      return { concurrency: st.concurrency, pauseBetweenPagesMs: st.pauseBetweenPagesMs };
    },
    { validator: validateThrottle },
  );

  const endVersion = async (status: 'abandoned' | 'failed', reason: string) => {
    if (!st.versionId) return;
    await CancellationScope.nonCancellable(() =>
      short.endVersion({ catalog: input.catalog, versionId: st.versionId, status, reason }),
    );
  };

  try {
    return await root.run(async () => {
      setPhase(phase);
      if (!c) {
        const plan = await short.planRebuild({
          catalog: input.catalog,
          source: input.source,
          pageSize,
          workflowId: info.workflowId,
          firstRunId: info.firstExecutionRunId,
        });
        st.versionId = plan.versionId;
        st.pagesTotal = plan.pagesTotal;
        st.sourceRows = plan.sourceRows;
        st.watermark = plan.watermark;
        note(`planned version ${plan.versionId}: ${plan.pagesTotal} pages of ${pageSize}, watermark job ${plan.watermark.jobKey ?? 'none'}`);
        setPhase('copying');
      }

      // Copy phase: a sliding window of pages; progress only from committed results.
      copyStartedMs = Date.now();
      let nextPage = st.checkpoint + 1;
      let scheduledThisRun = 0;
      let failure: unknown = null;
      let lastStartMs = 0;
      const startPage = (pageNo: number) => {
        inFlight.add(pageNo);
        scheduledThisRun++;
        lastStartMs = Date.now();
        const acts = pageActivities(heartbeatTimeoutMs, st.pageDurationsMs, `page ${pageNo} of ${st.pagesTotal}`);
        acts
          .copyPage({ catalog: input.catalog, source: input.source, versionId: st.versionId, pageNo })
          .then((r: CopyPageResult) => {
            inFlight.delete(pageNo);
            doneAbove.add(pageNo);
            while (doneAbove.has(st.checkpoint + 1)) {
              doneAbove.delete(st.checkpoint + 1);
              st.checkpoint++;
            }
            st.rowsUpserted += r.rows;
            st.rejects += r.rejects;
            if (r.activityAttempt > 1) {
              st.retries += r.activityAttempt - 1;
              note(`page ${pageNo} committed on attempt ${r.activityAttempt}${r.alreadyCommitted ? ' (found already committed)' : ''}: ${r.previousFailure ?? 'previous attempt failed'}`);
            }
            if (r.activityAttempt > PAGE_ATTEMPTS_REPORTED_ABOVE) log.warn(`page needed more than ${PAGE_ATTEMPTS_REPORTED_ABOVE} attempts`, { pageNo, attempts: r.activityAttempt });
            st.pageDurationsMs.push(r.durationMs);
            if (st.pageDurationsMs.length > PAGE_DURATIONS_KEPT) st.pageDurationsMs.shift();
            recent.push({ t: Date.now(), rows: r.rows });
            details();
            wake++;
          })
          .catch((err: unknown) => {
            inFlight.delete(pageNo);
            if (!failure) failure = err;
            wake++;
          });
      };

      for (;;) {
        if (failure) throw failure;
        if (pagesDone() === st.pagesTotal && inFlight.size === 0) break;
        const runFull = scheduledThisRun >= maxPagesPerRun || info.continueAsNewSuggested || workflowInfo().continueAsNewSuggested;
        if (!st.paused && !runFull && nextPage <= st.pagesTotal && inFlight.size < st.concurrency) {
          if (st.pauseBetweenPagesMs > 0 && lastStartMs > 0) {
            const waitMs = lastStartMs + st.pauseBetweenPagesMs - Date.now();
            if (waitMs > 0) {
              const w = wake;
              await condition(() => wake !== w || !!failure, waitMs);
              continue;
            }
          }
          startPage(nextPage++);
          continue;
        }
        if (runFull && inFlight.size === 0 && nextPage <= st.pagesTotal) {
          // Continue as new after the window drained and every handler finished, carrying all state.
          await condition(() => inFlight.size === 0);
          await condition(allHandlersFinished);
          note(`continuing as new at checkpoint ${st.checkpoint} (run ${st.runs + 2})`);
          const carried: CarriedState = { ...st, runs: st.runs + 1 };
          return await continueAsNew<typeof RebuildCatalog>({ ...input, carried });
        }
        const w = wake;
        await condition(() => wake !== w);
      }
      note(`copy phase done: ${st.pagesTotal} pages, ${st.rowsUpserted} rows, ${st.retries} retries`);
      // Added after histories were recorded: running rebuilds without the marker skip it on replay.
      if (patched('record-copy-phase-event')) {
        await short.recordEvent({
          catalog: input.catalog,
          versionId: st.versionId,
          kind: 'copied',
          message: `copy phase done: ${st.pagesTotal} pages, ${st.rowsUpserted} rows, ${st.rejects} rejects, ${st.retries} retries, ${st.runs + 1} run(s)`,
          details: { pagesTotal: st.pagesTotal, rowsUpserted: st.rowsUpserted, rejects: st.rejects, retries: st.retries, runs: st.runs + 1 },
        });
      }

      await short.sealVersion({ versionId: st.versionId });
      let round = 0;
      for (;;) {
        round++;
        setPhase('reconciling');
        reconciliation = await long.reconcile({ catalog: input.catalog, source: input.source, versionId: st.versionId, round });
        note(
          reconciliation.ok
            ? `reconciled: ${reconciliation.buckets} buckets match, delta ${reconciliation.delta}`
            : `reconcile round ${round}: ${reconciliation.mismatched.length} buckets differ`,
        );
        if (reconciliation.ok) break;
        if (round > maxRounds) {
          throw ApplicationFailure.nonRetryable(
            `reconciliation failed after ${maxRounds} repair rounds; buckets still differing: ${reconciliation.mismatched.slice(0, 50).join(', ')}`,
            FailureType.NOT_PUBLISHABLE,
          );
        }
        setPhase('repairing');
        const buckets = reconciliation.mismatched.slice(0, MAX_REPAIR_CHILDREN);
        let idx = 0;
        const runOne = async (): Promise<void> => {
          while (idx < buckets.length) {
            const b = buckets[idx++];
            const bucket = b === 'none' ? null : b;
            await executeChild(RepairBucket, {
              workflowId: repairWorkflowId(info.workflowId, bucket, round),
              args: [{ catalog: input.catalog, source: input.source, versionId: st.versionId, bucket }],
            });
          }
        };
        await Promise.all(Array.from({ length: Math.min(REPAIR_CONCURRENCY, buckets.length) }, runOne));
        note(`repaired ${buckets.length} buckets in round ${round}`);
      }

      setPhase('publishing');
      const pub = await executeChild(PublishCatalog, {
        workflowId: publishWorkflowId(info.workflowId),
        args: [{ catalog: input.catalog, versionId: st.versionId, allowShrink: !!input.allowShrink, retention }],
      });
      note(`published version ${st.versionId}${pub.previousVersionId ? ` (replacing ${pub.previousVersionId})` : ''}`);
      setPhase('done');
      return {
        catalog: input.catalog,
        versionId: st.versionId,
        published: true,
        cancelled: false,
        pagesTotal: st.pagesTotal,
        rowsUpserted: st.rowsUpserted,
        rejects: st.rejects,
        retries: st.retries,
        reconciliation,
        previousVersionId: pub.previousVersionId,
        durationMs: Date.now() - st.startedAtMs,
        runs: st.runs + 1,
      };
    });
  } catch (err) {
    if (isCancellation(err) || cancelRequested) {
      await endVersion('abandoned', cancelRequested ? 'cancelled by signal' : 'workflow cancelled');
      note('cancelled: version abandoned, active version unchanged');
      phase = 'cancelled';
      await CancellationScope.nonCancellable(async () => setPhase('cancelled'));
      // Temporal cancellation ends the workflow as cancelled; the cancel signal completes it unpublished.
      if (!cancelRequested) throw err;
      return {
        catalog: input.catalog,
        versionId: st.versionId,
        published: false,
        cancelled: true,
        pagesTotal: st.pagesTotal,
        rowsUpserted: st.rowsUpserted,
        rejects: st.rejects,
        retries: st.retries,
        reconciliation,
        previousVersionId: null,
        durationMs: Date.now() - st.startedAtMs,
        runs: st.runs + 1,
      };
    }
    // Only failures end the rebuild; anything else is a workflow-task bug that Temporal retries.
    if (!(err instanceof TemporalFailure)) throw err;
    const message = rootMessage(err);
    await endVersion('failed', message);
    note(`failed: ${message}`);
    setPhase('failed');
    throw err;
  }
}

/** The root cause's message of a failure chain (ActivityFailure → ApplicationFailure). */
function rootMessage(err: unknown): string {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
