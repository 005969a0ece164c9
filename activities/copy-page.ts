/**
 * The `copyPage` activity: one page of the plan, read from the source and written in ONE catalog
 * transaction (design.md, "Page transaction").
 */
import { activityInfo, ApplicationFailure, Context, log } from '@temporalio/activity';
import type { PoolClient } from 'pg';
import type { PlannedPage } from '../lib/catalog';
import {
  attemptWorker,
  claimPage,
  claimPageAttempt,
  completePage,
  copyOrUpsertRows,
  lockVersion,
  rangeChecksum,
  readPlanPage,
  recordedPage,
  requireVersionStatus,
  upsertRows,
  writeRejects,
} from '../lib/catalog';
import { cancelOnAbort, withTransaction } from '../lib/db';
import { FailureType, NotPublishableError } from '../lib/errors';
import type { ValidatedRows } from '../lib/validate';
import { validateRows } from '../lib/validate';
import type { CopyPageInput, CopyPageResult } from '../workflows/definitions';
import type { ActivityContext, PageAttempt } from './context';
import { guard } from './failures';
import { withHeartbeat } from './heartbeat';
import { pageDuplicatesMessage, pageRejectsMessage, pageRetryMessage } from './messages';

/** What the heartbeat reports of an attempt in progress (a hint for humans only). */
interface AttemptProgress {
  stage: string;
  rowsRead: number;
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
  const progress: AttemptProgress = { stage: 'starting', rowsRead: 0 };
  return withHeartbeat(
    () => ({ pageNo: input.pageNo, stage: progress.stage, rowsRead: progress.rowsRead }),
    () => guard(() => copyPageAttempt(ctx, input, progress)),
  );
}

async function copyPageAttempt(
  ctx: ActivityContext,
  input: CopyPageInput,
  progress: AttemptProgress,
): Promise<CopyPageResult> {
  const started = Date.now();
  const attempt = activityInfo().attempt;
  const page: PageAttempt = { pageNo: input.pageNo, attempt };
  const plan = await readPlanPage(ctx.pool, input.versionId, input.pageNo);
  if (!plan) throw new NotPublishableError(`page ${input.pageNo} of version ${input.versionId} is not in the plan`);
  const recorded = async (): Promise<CopyPageResult | null> => {
    const p = await recordedPage(ctx.pool, input.versionId, input.pageNo);
    if (!p) return null;
    return {
      pageNo: input.pageNo,
      rows: p.rows,
      rejects: p.rejects,
      warnings: p.warnings,
      duplicates: p.duplicates,
      checksum: p.checksum,
      attempt: p.attempt,
      activityAttempt: attempt,
      alreadyCommitted: true,
      durationMs: Date.now() - started,
      previousFailure: null,
    };
  };
  await claimPageAttempt(ctx.pool, { versionId: input.versionId, pageNo: input.pageNo, attempt }, ctx.identity);
  const previousFailure = attempt > 1 ? await describePreviousAttempt(ctx, input, attempt) : null;
  // A page found committed (an in-flight page of a dead worker that did commit) is skipped.
  const done = await recorded();
  if (done) return { ...done, previousFailure };
  requireVersionStatus(input.versionId, plan.versionStatus, ['building']);

  progress.stage = 'reading';
  const rows = await ctx.sources.get(input.source, input.versionId).readRange(plan.firstKey, plan.lastKey);
  progress.rowsRead = rows.length;
  // Malformed records are quarantined (never fail the page); repeated ids keep the last row read.
  const checked = validateRows(rows);
  await ctx.hooks?.afterRead?.(page);

  progress.stage = 'writing';
  // Cancellation (worker shutdown past its grace time, a cancelled rebuild) gives the page up:
  // the statement in flight is cancelled, the transaction rolls back, another attempt retries.
  const signal = Context.current().cancellationSignal;
  if (signal.aborted) {
    log.warn('page given up before writing: activity cancelled', { pageNo: input.pageNo, attempt });
    throw ApplicationFailure.retryable(
      `page ${input.pageNo} given up before writing: activity cancelled`,
      FailureType.PAGE_CANCELLED,
    );
  }
  const result = await withTransaction(ctx.pool, async (c) => {
    try {
      return await cancelOnAbort(ctx.pool, c, signal, () =>
        writePage(ctx, c, input, page, plan, checked, previousFailure),
      );
    } catch (err) {
      if (signal.aborted) {
        throw ApplicationFailure.retryable(
          `page ${input.pageNo} given up while writing: activity cancelled (${(err as Error).message})`,
          FailureType.PAGE_CANCELLED,
        );
      }
      throw err;
    }
  });
  if (!result) {
    const other = await recorded();
    if (!other)
      throw ApplicationFailure.retryable(
        `page ${input.pageNo}: ledger row held by an attempt that did not commit`,
        FailureType.PAGE_CONFLICT,
      );
    return other;
  }
  result.durationMs = Date.now() - started;
  ctx.onPageCommitted?.(result);
  return result;
}

/**
 * The page transaction's statements, in order: ledger row, fence, rows (COPY on attempt 1, upsert
 * on a retry), rejects and their events, range checksum, ledger completion.
 * @returns null when another attempt holds the ledger row (the caller rolls back and reads its result).
 */
async function writePage(
  ctx: ActivityContext,
  c: PoolClient,
  input: CopyPageInput,
  page: PageAttempt,
  plan: PlannedPage,
  checked: ValidatedRows,
  previousFailure: string | null,
): Promise<CopyPageResult | null> {
  const { versionId, pageNo } = input;
  const attempt = page.attempt;
  const claimed = await claimPage(
    c,
    { versionId, pageNo, attempt, firstKey: plan.firstKey, lastKey: plan.lastKey },
    ctx.identity,
  );
  if (!claimed) return null; // another attempt committed: roll back, report its result
  await lockVersion(c, versionId, { mode: 'share', allowed: ['building'] });
  await ctx.hooks?.insideTransaction?.(page, c);
  // The first attempt at a page of a fresh version COPYs its rows (falling back to the
  // upsert should any exist); a retry upserts, writing nothing for identical rows.
  if (attempt === 1) await copyOrUpsertRows(c, versionId, pageNo, checked.valid);
  else await upsertRows(c, versionId, pageNo, checked.valid);
  const rejects = checked.rejects.length;
  if (rejects) {
    await writeRejects(c, versionId, pageNo, checked.rejects);
    await ctx.events.record(c, {
      catalog: input.catalog,
      versionId,
      kind: 'rejected',
      message: pageRejectsMessage(pageNo, checked.rejects),
      details: {
        pageNo,
        rejects,
        first: checked.rejects.slice(0, 5).map((r) => ({ jobKey: r.jobKey, jobId: r.jobId, reason: r.reason })),
      },
    });
  }
  if (checked.duplicates) {
    await ctx.events.record(c, {
      catalog: input.catalog,
      versionId,
      kind: 'duplicates',
      message: pageDuplicatesMessage(pageNo, checked.duplicates),
      details: { pageNo, duplicates: checked.duplicates },
    });
  }
  const sum = await rangeChecksum(c, versionId, plan.firstKey, plan.lastKey);
  await completePage(c, versionId, pageNo, {
    rows: sum.rows,
    checksum: sum.checksum,
    rejects,
    warnings: checked.warnings,
    duplicates: checked.duplicates,
  });
  return {
    pageNo,
    rows: sum.rows,
    rejects,
    warnings: checked.warnings,
    duplicates: checked.duplicates,
    checksum: sum.checksum,
    attempt,
    activityAttempt: attempt,
    alreadyCommitted: false,
    durationMs: 0,
    previousFailure,
  };
}

/**
 * Names the previous attempt of a retried page: its worker (from its `page_attempt` claim row, or
 * the workflow's pending activity when it has none) and its failure (from the pending activity;
 * "did not complete" when the worker died), and records a `page_retry` event.
 * @returns `<failure> (worker <identity>)`.
 */
async function describePreviousAttempt(ctx: ActivityContext, input: CopyPageInput, attempt: number): Promise<string> {
  const info = activityInfo();
  let failure = 'previous attempt did not complete';
  let worker = await attemptWorker(ctx.pool, input.versionId, input.pageNo, attempt - 1);
  const execution = info.workflowExecution;
  if (ctx.client && execution) {
    try {
      const desc = await ctx.client.workflow.getHandle(execution.workflowId, execution.runId).describe();
      const pending = desc.raw.pendingActivities?.find((a) => a.activityId === info.activityId);
      if (pending?.lastFailure?.message) failure = pending.lastFailure.message;
      // lastWorkerIdentity is the worker of the attempt now running (this one) once it started:
      // the attempt's own claim row names the previous holder; describe only fills a gap.
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
    },
  });
  log.warn('page retried', { pageNo: input.pageNo, attempt, lastFailure: failure, lastWorkerIdentity: worker });
  return `${failure} (worker ${worker ?? 'unknown'})`;
}
