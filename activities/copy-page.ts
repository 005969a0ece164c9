/**
 * The `copyPage` activity: one page of the plan, read from the source and written in ONE catalog
 * transaction (design.md, "Page transaction").
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { activityInfo, ApplicationFailure, Context, log } from '@temporalio/activity';
import type { AttemptClaim } from '../lib/catalog';
import {
  attemptWorker,
  claimPageAttempt,
  markAttemptPaused,
  markPausesResumed,
  otherPageBackends,
  pageGoneJobCount,
  readPlanPage,
  recordedPage,
  requireVersionStatus,
  terminateBackends,
  unresumedPauses,
} from '../lib/catalog';
import { FailureType, NotPublishableError, PageCancelledError } from '../lib/errors';
import { copyPlannedPage } from '../lib/page/copy';
import type { CopyPageInput, CopyPageResult, PageActivityReport } from '../workflows/definitions';
import { pageActivityPausedSignal, pageActivityResumedSignal } from '../workflows/definitions';
import type { ActivityContext } from './context';
import { guard } from './failures';
import type { OperatorPauseWatch } from './heartbeat';
import { cancelReason, onOperatorPause, withHeartbeat } from './heartbeat';
import { pageRetryMessage, zombieEndedMessage } from './messages';

/** How far an attempt got (a hint for humans only: a retried page starts again at its first key). */
interface AttemptProgress {
  stage: string;
  rowsRead: number;
}

/**
 * Heartbeat details of a page attempt, sent at its start and then from a timer. Temporal keeps the
 * last ones for the next attempt (`activityInfo().heartbeatDetails`), which reads from them the
 * worker of an attempt that died before it wrote anything; stage and rows read are hints only.
 */
export interface PageHeartbeat extends AttemptProgress {
  pageNo: number;
  /** Temporal attempt number of the attempt that sent them. */
  attempt: number;
  /** Identity (`<pid>@<host>`) of its worker. */
  workerIdentity: string;
  /** Its claim id (`page_attempt.claim_id`). */
  claimId: string;
}

/**
 * Copies one page: reads its key range from the source, then in ONE catalog transaction
 * inserts the ledger row first (`ON CONFLICT DO NOTHING`: if another attempt committed, roll back
 * and return its recorded result), locks the version row `FOR SHARE` and requires `building`
 * (the fence), upserts the rows keyed by (version, job id), and completes the ledger row.
 * Heartbeats from a timer throughout. A retried attempt records a `page_retry` event naming the
 * previous attempt's worker and failure.
 * @throws VERSION_FENCED (non-retryable) when the version is no longer building; PAGE_CANCELLED
 *   (retryable) when the activity was cancelled before or while writing.
 */
export async function copyPage(ctx: ActivityContext, input: CopyPageInput): Promise<CopyPageResult> {
  const info = activityInfo();
  const claim: AttemptClaim = {
    versionId: input.versionId,
    pageNo: input.pageNo,
    attempt: info.attempt,
    claimId: randomUUID(),
  };
  const previous = previousHeartbeat(info.heartbeatDetails, info.attempt);
  const progress: AttemptProgress = { stage: 'starting', rowsRead: 0 };
  const pause = watchOperatorPause(ctx, input, claim);
  try {
    return await withHeartbeat(
      (): PageHeartbeat => ({
        pageNo: input.pageNo,
        attempt: claim.attempt,
        workerIdentity: ctx.identity,
        claimId: claim.claimId,
        stage: progress.stage,
        rowsRead: progress.rowsRead,
      }),
      () => guard(() => copyPageAttempt(ctx, input, claim, previous, progress)),
    );
  } finally {
    // The rebuild hears of an operator pause before the attempt ends (and before the next one starts).
    await pause.settled();
  }
}

async function copyPageAttempt(
  ctx: ActivityContext,
  input: CopyPageInput,
  claim: AttemptClaim,
  previous: PageHeartbeat | null,
  progress: AttemptProgress,
): Promise<CopyPageResult> {
  const started = Date.now();
  const attempt = claim.attempt;
  const plan = await readPlanPage(ctx.pool, input.versionId, input.pageNo);
  if (!plan) throw new NotPublishableError(`page ${input.pageNo} of version ${input.versionId} is not in the plan`);
  const recorded = async (): Promise<CopyPageResult | null> => {
    const p = await recordedPage(ctx.pool, input.versionId, input.pageNo);
    if (!p) return null;
    const gone = plan.files ? await pageGoneJobCount(ctx.pool, input.versionId, input.pageNo) : 0;
    return {
      pageNo: input.pageNo,
      rows: p.rows,
      rejects: p.rejects,
      warnings: p.warnings,
      duplicates: p.duplicates,
      ...(gone ? { gone } : {}),
      checksum: p.checksum,
      attempt: p.attempt,
      activityAttempt: attempt,
      alreadyCommitted: true,
      durationMs: Date.now() - started,
      previousFailure: null,
    };
  };
  await claimPageAttempt(ctx.pool, claim, ctx.identity);
  await reportResumed(ctx, input, claim);
  // A retry, or the first attempt after `temporal activity reset` (the details of the one before).
  const previousFailure = attempt > 1 || previous ? await describePreviousAttempt(ctx, input, claim, previous) : null;
  // A page found committed (an in-flight page of a dead worker that did commit) is skipped.
  const done = await recorded();
  if (done) return { ...done, previousFailure };
  requireVersionStatus(input.versionId, plan.versionStatus, ['building']);
  // An earlier attempt whose worker froze may still hold the page's transaction: end it.
  if (attempt > 1 || previous) await endZombieAttempts(ctx, input);

  const copy = { claim, plan, previousFailure, signal: Context.current().cancellationSignal, progress };
  const result = await copyPlannedPage({ ...ctx, log }, input, copy).catch(cancelledAsFailure);
  if (!result) {
    const other = await recorded();
    if (!other)
      throw ApplicationFailure.retryable(
        `page ${input.pageNo}: ledger row held by an attempt that did not commit`,
        FailureType.PAGE_CONFLICT,
      );
    return other;
  }
  progress.rowsRead = result.rows + result.rejects;
  result.durationMs = Date.now() - started;
  ctx.onPageCommitted?.(result);
  return result;
}

/**
 * A page given up because the activity was cancelled (worker shutdown past its grace time, a
 * cancelled rebuild, an operator's pause): the retryable PAGE_CANCELLED failure, with Temporal's
 * reason; any other error is thrown as it is.
 * @throws always.
 */
function cancelledAsFailure(err: unknown): never {
  if (!(err instanceof PageCancelledError)) throw err;
  const reason = cancelReason();
  if (!err.writing)
    log.warn('page given up before writing: activity cancelled', {
      pageNo: err.pageNo,
      attempt: activityInfo().attempt,
      reason,
    });
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
  throw ApplicationFailure.retryable(
    `page ${err.pageNo} given up ${err.writing ? 'while' : 'before'} writing: activity cancelled (${reason}${cause})`,
    FailureType.PAGE_CANCELLED,
  );
}

/**
 * Ends the catalog sessions still working on this page for an earlier attempt (a worker frozen or
 * cut off after Temporal timed its attempt out): waits up to the heartbeat timeout for them to end
 * by themselves, then terminates them, so their transaction rolls back and its ledger row lock is
 * released. Records a `zombie_ended` event naming the pids.
 */
async function endZombieAttempts(ctx: ActivityContext, input: CopyPageInput): Promise<void> {
  const waitMs = activityInfo().heartbeatTimeoutMs ?? 15_000;
  const deadline = Date.now() + waitMs;
  let pids = await otherPageBackends(ctx.pool, input.versionId, input.pageNo);
  while (pids.length && Date.now() < deadline) {
    await sleep(Math.min(500, Math.max(1, deadline - Date.now())));
    pids = await otherPageBackends(ctx.pool, input.versionId, input.pageNo);
  }
  if (!pids.length) return;
  const ended = await terminateBackends(ctx.pool, pids);
  log.warn('ended the session of an earlier attempt of the page', { pageNo: input.pageNo, pids: ended });
  await ctx.events.record(ctx.pool, {
    catalog: input.catalog,
    versionId: input.versionId,
    kind: 'zombie_ended',
    message: zombieEndedMessage(input.pageNo, ended, waitMs),
    details: { pageNo: input.pageNo, pids: ended, waitedMs: waitMs },
  });
}

/**
 * Names the previous attempt of a retried page (or, after `temporal activity reset`, the execution
 * before it): its worker, from the heartbeat details it sent when it started (so even an attempt
 * that died before writing anything is named), else from its `page_attempt` claim row, else from the
 * workflow's pending activity; and its failure (from the pending activity; "did not complete" when
 * the worker died). Records a `page_retry` event.
 * @returns `<failure> (worker <identity>)`.
 */
async function describePreviousAttempt(
  ctx: ActivityContext,
  input: CopyPageInput,
  claim: AttemptClaim,
  previous: PageHeartbeat | null,
): Promise<string> {
  const info = activityInfo();
  const attempt = claim.attempt;
  let failure = 'previous attempt did not complete';
  let worker =
    previous?.workerIdentity ??
    (attempt > 1 ? await attemptWorker(ctx.pool, { ...claim, attempt: attempt - 1 }, claim.claimId) : null);
  const execution = info.workflowExecution;
  if (ctx.client && execution) {
    try {
      const desc = await ctx.client.workflow.getHandle(execution.workflowId, execution.runId).describe();
      const pending = desc.raw.pendingActivities?.find((a) => a.activityId === info.activityId);
      if (pending?.lastFailure?.message) failure = pending.lastFailure.message;
      // lastWorkerIdentity is the worker of the attempt now running (this one) once it started:
      // the previous attempt's heartbeat or claim row names it; describe only fills a gap.
      if (!worker && pending?.lastWorkerIdentity && pending.lastWorkerIdentity !== ctx.identity)
        worker = pending.lastWorkerIdentity;
    } catch (err) {
      log.warn('could not describe the workflow for the previous attempt', { error: (err as Error).message });
    }
  }
  await ctx.events.record(ctx.pool, {
    catalog: input.catalog,
    versionId: input.versionId,
    kind: 'page_retry',
    message: pageRetryMessage(input.pageNo, attempt, worker, failure),
    details: {
      pageNo: input.pageNo,
      attempt,
      lastFailure: failure,
      lastWorkerIdentity: worker,
      retriedBy: ctx.identity,
      ...(previous ? { previousAttempt: previous.attempt, previousClaimId: previous.claimId } : {}),
    },
  });
  log.warn('page retried', { pageNo: input.pageNo, attempt, lastFailure: failure, lastWorkerIdentity: worker });
  return `${failure} (worker ${worker ?? 'unknown'})`;
}

/**
 * The heartbeat details Temporal kept from the execution before this attempt, when they are this
 * product's and come from it, else null. They come from it when they name attempt - 1, or an
 * attempt number not below this one's (numbers restart after `temporal activity reset`); an older
 * attempt's details mean the previous one died before its first heartbeat reached Temporal.
 */
function previousHeartbeat(details: unknown, attempt: number): PageHeartbeat | null {
  if (!details || typeof details !== 'object') return null;
  const d = details as Partial<PageHeartbeat>;
  if (typeof d.workerIdentity !== 'string' || typeof d.claimId !== 'string' || typeof d.attempt !== 'number')
    return null;
  if (d.attempt < attempt - 1) return null;
  return d as PageHeartbeat;
}

/** What a page activity says of itself in `pageActivityPaused` / `pageActivityResumed`. */
function report(ctx: ActivityContext, claim: AttemptClaim): PageActivityReport {
  return { pageNo: claim.pageNo, attempt: claim.attempt, workerIdentity: ctx.identity };
}

/**
 * When Temporal cancels the attempt because an operator paused it (`temporal activity pause`),
 * marks its claim row paused and sends `pageActivityPaused` to its rebuild run, so the window starts
 * no new page; the attempt itself gives the page up as for any cancellation. A failed report is
 * logged, never thrown.
 */
function watchOperatorPause(ctx: ActivityContext, input: CopyPageInput, claim: AttemptClaim): OperatorPauseWatch {
  return onOperatorPause(async () => {
    try {
      await markAttemptPaused(ctx.pool, claim, ctx.identity);
      await signalRebuild(ctx, pageActivityPausedSignal, report(ctx, claim));
      log.warn('page activity paused by an operator: the rebuild starts no new page until it is unpaused', {
        pageNo: input.pageNo,
        attempt: claim.attempt,
      });
    } catch (err) {
      log.warn('could not report the operator pause to the rebuild', { error: (err as Error).message });
    }
  });
}

/**
 * When an operator paused an earlier execution of this page (its claim row says so) and this is the
 * first attempt since, tells the rebuild run that the page runs again (`pageActivityResumed`), then
 * marks those pauses resumed. A failure is logged; the next attempt reports again.
 */
async function reportResumed(ctx: ActivityContext, input: CopyPageInput, claim: AttemptClaim): Promise<void> {
  try {
    const paused = (await unresumedPauses(ctx.pool, input.versionId, input.pageNo)).filter(
      (id) => id !== claim.claimId,
    );
    if (!paused.length) return;
    await signalRebuild(ctx, pageActivityResumedSignal, report(ctx, claim));
    await markPausesResumed(ctx.pool, paused);
    log.info('page runs again after an operator pause', { pageNo: input.pageNo, attempt: claim.attempt });
  } catch (err) {
    log.warn('could not report that the page runs again after an operator pause', { error: (err as Error).message });
  }
}

/** Signals the rebuild run this activity belongs to (10 s deadline). */
async function signalRebuild(
  ctx: ActivityContext,
  def: typeof pageActivityPausedSignal,
  arg: PageActivityReport,
): Promise<void> {
  const execution = activityInfo().workflowExecution;
  if (!ctx.client || !execution) throw new Error('no Temporal client to reach the rebuild');
  const client = ctx.client;
  await client.withDeadline(Date.now() + 10_000, () =>
    client.workflow.getHandle(execution.workflowId, execution.runId).signal(def, arg),
  );
}
