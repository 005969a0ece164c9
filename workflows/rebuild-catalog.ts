/**
 * RebuildCatalog: plan → copy window → seal, verify and repair → publish. Temporal history is the
 * checkpoint; the ledger is the page record. The steps live beside this file: the run's state and
 * message handlers in `rebuild-state.ts`, the page window in `copy-window.ts`, reconcile ⇄
 * RepairBucket rounds in `repair-rounds.ts`, input validation in `validation.ts`.
 */
import type { WorkflowInfo } from '@temporalio/workflow';
import {
  allHandlersFinished,
  CancellationScope,
  condition,
  executeChild,
  isCancellation,
  setWorkflowOptions,
  TemporalFailure,
  workflowInfo,
} from '@temporalio/workflow';
import type { PublishCatalogResult, RebuildCatalogInput, RebuildCatalogResult } from './definitions';
import { longSteps, pageActivities, planStep, short } from './activity-options';
import { copyPages } from './copy-window';
import { endingFailure, failureText, rootMessage } from './failure-text';
import { publishWorkflowId } from './names';
import { patchApplies } from './patches';
import { PublishCatalog } from './publish-catalog';
import { setRebuildHandlers } from './rebuild-handlers';
import { initialState, RebuildState } from './rebuild-state';
import { reconcileAndRepair } from './repair-rounds';
import { runSettings } from './validation';

/**
 * Rebuilds one catalog from one source into a new version and publishes it atomically.
 * Workflow id `catalog-rebuild/<catalog>`. Signals pause/resume/cancel, query progress, update setThrottle.
 * @returns the published rebuild, or (after the `cancel` signal) a cancelled one whose version was abandoned.
 * @throws ApplicationFailure CONFIG_INVALID (non-retryable) for invalid input, before any activity.
 * @throws ApplicationFailure NOT_PUBLISHABLE (non-retryable) when reconciliation or the shrink guard refuse.
 */
export async function RebuildCatalog(input: RebuildCatalogInput): Promise<RebuildCatalogResult> {
  const info = workflowInfo();
  const settings = runSettings(input);
  const state = new RebuildState(input, input.carried ?? initialState(input), !!input.carried);
  setRebuildHandlers(state);
  try {
    const result = await state.root.run(async () => {
      state.setPhase(state.phase);
      state.memo();
      if (!input.carried && (await plan(state, settings.pageSize, info)) === 'up to date') {
        state.setPhase('done');
        return state.result({ published: false, upToDate: true });
      }
      await copyPages(state, {
        heartbeatTimeoutMs: settings.heartbeatTimeoutMs,
        maxPagesPerRun: settings.maxPagesPerRun,
        startInfo: info,
      });
      await seal(state, settings.heartbeatTimeoutMs);
      // The reader index is built beside the reconciliation: both are CPU-bound scans of the sealed
      // table, and together they keep both cores busy (docs/performance.md).
      await Promise.all([
        reconcileAndRepair(state, {
          maxRounds: settings.maxRepairRounds,
          workflowId: info.workflowId,
          heartbeatTimeoutMs: settings.heartbeatTimeoutMs,
        }),
        longSteps(settings.heartbeatTimeoutMs).indexVersion({ versionId: state.carried.versionId }),
      ]);
      const pub = await publish(state, settings, info.workflowId);
      // A Temporal cancellation request that came while publishing was too late, as the signal is
      // then: recorded as the signal's handler records it.
      if (state.root.consideredCancelled && !state.cancelRequested)
        await temporalCancelEvent(
          state,
          'cancel requested through Temporal (a workflow cancellation request): too late, the rebuild was publishing and published',
        );
      return state.result({ published: true, previousVersionId: pub.previousVersionId });
    });
    await handlersFinished();
    return result;
  } catch (err) {
    if (isCancellation(err) || state.cancelRequested) return await cancelled(state, err);
    // Only failures end the rebuild; anything else is a workflow-task bug that Temporal retries.
    if (!(err instanceof TemporalFailure)) throw err;
    await failed(state, err);
    await handlersFinished();
    throw endingFailure(err);
  }
}
// Pinned: a rebuild runs on the build it started on, through continue-as-new, until it ends; a new
// build takes only new rebuilds (docs/operations.md, "Rolling out a new build").
setWorkflowOptions({ versioningBehavior: 'PINNED' }, RebuildCatalog);

/**
 * Runs `step` (the publish) shielded from the rebuild's cancellation (the `cancel` signal or
 * Temporal's): a cancel waits for it to end. Histories recorded before patch `cancelled-rebuild-ends-cancelled` run it
 * cancellable, as they did.
 */
function notCancelledInFlight<T>(step: () => Promise<T>): Promise<T> {
  return patchApplies('cancelled-rebuild-ends-cancelled') ? CancellationScope.nonCancellable(step) : step();
}

/** Waits until the message handlers in progress (operator events being recorded) have finished. */
function handlersFinished(): Promise<void> {
  return CancellationScope.nonCancellable(() => condition(allHandlersFinished));
}

/**
 * Plans the version (`planRebuild`, idempotent per workflow id and first run): version, pages, their
 * size and sizing, and the watermark into the carried state; then phase `copying`. Without a page
 * size the plan sizes pages from measured cost for the rebuild's concurrency.
 */
async function plan(
  state: RebuildState,
  pageSize: number | undefined,
  info: WorkflowInfo,
): Promise<'planned' | 'up to date'> {
  const { input, carried: st } = state;
  const planInput = {
    catalog: input.catalog,
    source: input.source,
    pageSize,
    concurrency: st.concurrency,
    // Only when set, so the plan's input of a rebuild without files is the same as before.
    ...(input.files ? { files: true } : {}),
    ...(input.refresh ? { refresh: true } : {}),
    ...(input.verify === 'full' ? { verify: 'full' as const } : {}),
    workflowId: info.workflowId,
    firstRunId: info.firstExecutionRunId,
  };
  // A cancel during the plan waits for the attempt in flight to end, not for the retries after it
  // (an unreachable source's): the attempt either returns its version, which the cancel abandons,
  // or fails, and the cancel abandons what it may have committed, found by the rebuild's ids.
  // Histories recorded before patch `cancelled-rebuild-ends-cancelled` plan as they did.
  state.planScheduled = true;
  const planned = patchApplies('cancelled-rebuild-ends-cancelled')
    ? await planStep.planRebuild(planInput)
    : await short.planRebuild(planInput);
  if (planned.refresh) st.refresh = planned.refresh;
  if (planned.fullRebuildBecause) st.fullRebuildBecause = planned.fullRebuildBecause;
  if (planned.upToDate) {
    state.note(`refresh: up to date: nothing changed since version ${planned.refresh?.baseVersionId ?? '?'}`);
    return 'up to date';
  }
  st.versionId = planned.versionId;
  st.pagesTotal = planned.pagesTotal;
  st.sourceRows = planned.sourceRows;
  st.watermark = planned.watermark;
  st.pageSize = planned.pageSize;
  st.pageSizing = planned.pageSizing;
  st.maxPageRows = planned.maxPageRows ?? 0;
  const r = planned.refresh;
  state.note(
    r
      ? `planned version ${planned.versionId}: a refresh of version ${r.baseVersionId}: ${r.newJobs} new, ${r.changedJobs} changed, ${r.deletedJobs} deleted jobs in ${planned.pagesTotal} pages, watermark job ${planned.watermark.jobKey ?? 'none'}`
      : `${planned.fullRebuildBecause ? `refresh planned as a full rebuild (${planned.fullRebuildBecause}): ` : ''}planned version ${planned.versionId}: ${planned.pagesTotal} pages of ${st.pageSize} rows (${st.pageSizing}), watermark job ${planned.watermark.jobKey ?? 'none'}`,
  );
  state.setPhase('copying');
  return 'planned';
}

/**
 * Seals the version (`sealVersion`): it proves every planned page has its committed ledger row;
 * pages without one (e.g. a ledger row deleted by hand) are copied again, one at a time, and the
 * seal is retried until it holds. The counts are not changed (reconciliation counts the rows).
 */
async function seal(state: RebuildState, heartbeatTimeoutMs: number): Promise<void> {
  const st = state.carried;
  const input = { versionId: st.versionId };
  const steps = longSteps(heartbeatTimeoutMs);
  let sealed = await steps.sealVersion(input);
  while (sealed?.missingPages?.length) {
    const message = `seal: ${sealed.missingPages.length} planned pages have no committed ledger row (${sealed.missingPages.slice(0, 20).join(', ')}); copying them again`;
    state.note(message);
    await short.recordEvent({
      catalog: state.input.catalog,
      versionId: st.versionId,
      kind: 'pages_recopied',
      message,
      details: { pages: sealed.missingPages },
    });
    for (const pageNo of sealed.missingPages) {
      const acts = pageActivities(
        heartbeatTimeoutMs,
        st.pageDurationsMs,
        `page ${pageNo} again (seal)`,
        st.maxPageRows,
      );
      await acts.copyPage({
        catalog: state.input.catalog,
        source: state.input.source,
        versionId: st.versionId,
        pageNo,
      });
    }
    sealed = await steps.sealVersion(input);
  }
}

/**
 * Publishes the reconciled version with the `PublishCatalog` child (shrink guard, flip, retirement);
 * then phase `done`. Not cancellable: a cancel that arrives while publishing is too late.
 */
async function publish(
  state: RebuildState,
  settings: { retention: number; heartbeatTimeoutMs: number },
  workflowId: string,
): Promise<PublishCatalogResult> {
  const { input, carried: st } = state;
  const { retention, heartbeatTimeoutMs } = settings;
  state.setPhase('publishing');
  const publishChild = () =>
    executeChild(PublishCatalog, {
      workflowId: publishWorkflowId(workflowId),
      args: [
        {
          catalog: input.catalog,
          versionId: st.versionId,
          allowShrink: !!input.allowShrink,
          retention,
          heartbeatTimeoutMs,
        },
      ],
    });
  // Once publishing, a cancel is too late: the flip may have committed, and a cancelled publish
  // would report an active version as abandoned. The publish runs to its end (published or refused).
  const pub = await notCancelledInFlight(publishChild);
  state.note(
    `published version ${st.versionId}${pub.previousVersionId ? ` (replacing ${pub.previousVersionId})` : ''}`,
  );
  if (pub.retireFailure) {
    const message = `version ${st.versionId} published; retiring old versions failed, the next publish retires them: ${pub.retireFailure}`;
    state.note(message);
    await state.operatorEvent('retire_failed', message, { retireFailure: pub.retireFailure });
  }
  state.setPhase('done');
  return pub;
}

/**
 * Ends a cancelled rebuild: its version becomes `abandoned` (the active version is untouched), phase
 * `cancelled`, and the workflow ends with Temporal status CANCELLED whether the `cancel` signal or a
 * Temporal cancellation request (`temporal workflow cancel`, the Web UI's Cancel) asked for it: the
 * Web UI shows it cancelled, never a green COMPLETED. Temporal keeps no result for a cancelled run,
 * so the result goes to the memo (`outcome`) first. After the signal, activity `cancelRun` asks
 * Temporal to cancel this run (a workflow may not request its own cancellation), and the workflow
 * ends when the request arrives; should that activity fail, the rebuild completes with the result.
 * A Temporal request is recorded as the signal is, an event `cancel_requested` of the catalog.
 * Histories recorded before patch `cancelled-rebuild-ends-cancelled` complete with the result.
 */
async function cancelled(state: RebuildState, err: unknown): Promise<RebuildCatalogResult> {
  // The signal's handler records its own event; a Temporal request has no handler, so it is recorded
  // here, before the version is abandoned, as the signal's is.
  if (!state.cancelRequested)
    await temporalCancelEvent(
      state,
      'cancel requested through Temporal (a workflow cancellation request: temporal workflow cancel, the Web UI or a client)',
    );
  await endVersion(state, 'abandoned', state.cancelRequested ? 'cancelled by signal' : 'workflow cancelled');
  state.note('cancelled: version abandoned, active version unchanged');
  state.phase = 'cancelled';
  await CancellationScope.nonCancellable(async () => state.setPhase('cancelled'));
  await handlersFinished();
  const result = state.result({ published: false, cancelled: true });
  if (patchApplies('cancelled-rebuild-ends-cancelled')) {
    state.memo(result);
    // The workflow's own scope: Temporal's cancellation request cancels it (the signal only the rebuild's).
    const run = CancellationScope.current();
    if (!run.consideredCancelled) {
      const { workflowId, runId } = workflowInfo();
      try {
        await CancellationScope.nonCancellable(() => short.cancelRun({ workflowId, runId }));
      } catch (e) {
        state.note(`cancelled: Temporal could not be asked to cancel the run (${rootMessage(e)}); it completes`);
        return result;
      }
    }
    // Rejects with a CancelledFailure once Temporal's request reached the run: it ends CANCELLED.
    await run.cancelRequested;
  }
  if (!state.cancelRequested) throw err;
  return result;
}

/**
 * Records a Temporal cancellation request (`temporal workflow cancel`, the Web UI, a client) as the
 * `cancel` signal's handler records the signal: an event `cancel_requested` with `message`.
 */
function temporalCancelEvent(state: RebuildState, message: string): Promise<void> {
  return state.operatorEvent('cancel_requested', message, { reason: null, via: 'temporal' });
}

/**
 * Ends a failed rebuild: its version becomes `failed` with the failure's text (the root cause's
 * message, naming the step that gave up when its retries ran out: {@link failureText}), phase `failed`.
 */
async function failed(state: RebuildState, err: TemporalFailure): Promise<void> {
  const message = failureText(err);
  await endVersion(state, 'failed', message);
  state.note(`failed: ${message}`);
  state.setPhase('failed');
}

/**
 * Marks the version abandoned or failed, even while the rebuild is being cancelled: the planned
 * version, or, when the plan ended without returning one (cancelled or failed in flight), the
 * version it may have committed, found by the rebuild's workflow id and first run id.
 */
async function endVersion(state: RebuildState, status: 'abandoned' | 'failed', reason: string): Promise<void> {
  const { input, carried: st } = state;
  if (st.versionId) {
    await CancellationScope.nonCancellable(() =>
      short.endVersion({ catalog: input.catalog, versionId: st.versionId, status, reason }),
    );
    return;
  }
  if (!state.planScheduled || !patchApplies('cancelled-rebuild-ends-cancelled')) return;
  const { workflowId, firstExecutionRunId: firstRunId } = workflowInfo();
  const found = await CancellationScope.nonCancellable(() =>
    short.endVersion({ catalog: input.catalog, plannedBy: { workflowId, firstRunId }, status, reason }),
  );
  // The result names the version that ended, as it does when the plan returned it.
  if (found) st.versionId = found;
}
