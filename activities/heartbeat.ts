/**
 * An activity's conversation with Temporal while it runs: heartbeats from a timer, and what
 * Temporal's cancellation of the activity means (an operator's pause or reset, a timeout, a
 * shutdown, the rebuild's own cancellation).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Context } from '@temporalio/activity';

/**
 * Runs `fn` while a timer heartbeats every heartbeat timeout / 4 (at least every 250 ms,
 * 2,500 ms when the activity has no heartbeat timeout), so one long SQL statement or a slow
 * source read keeps the activity's lease. `details()` supplies the details sent with each
 * heartbeat. The first heartbeat is sent at once, before `fn` starts, so Temporal holds the
 * attempt's details (e.g. its worker's identity) for the next attempt even when this one dies
 * right after it started.
 */
export async function withHeartbeat<T>(details: () => unknown, fn: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const timeoutMs = ctx.info.heartbeatTimeoutMs;
  const everyMs = timeoutMs ? Math.max(250, Math.floor(timeoutMs / 4)) : 2_500;
  ctx.heartbeat(details());
  const timer = setInterval(() => ctx.heartbeat(details()), everyMs);
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}

/**
 * Runs `work` until it settles or Temporal cancels the current activity (the rebuild's cancel, an
 * operator's pause, the worker's shutdown), whichever comes first. On a cancel it rejects at once
 * with the cancellation (a CancelledFailure) and leaves `work` to end in the background, its
 * outcome ignored: a source statement in flight runs on until it ends. Only for a step whose late
 * effect is refused or undone once the rebuild ended (the plan: `ended_plan`, migration 18).
 */
export function untilCancelled<T>(work: Promise<T>): Promise<T> {
  work.catch(() => undefined);
  return Promise.race([work, Context.current().cancelled as Promise<never>]);
}

/** Why Temporal cancelled the current activity, in words (from its cancellation details). */
export function cancelReason(): string {
  const d = Context.current().cancellationDetails;
  if (d?.paused) return 'paused by an operator';
  if (d?.reset) return 'reset by an operator';
  if (d?.notFound) return 'the rebuild run no longer has this activity';
  if (d?.timedOut) return 'timed out';
  if (d?.workerShutdown) return 'worker shutting down';
  return d?.cancelRequested ? 'cancellation requested by the rebuild' : 'cancelled';
}

/** A watch of the current activity for an operator's pause (see {@link onOperatorPause}). */
export interface OperatorPauseWatch {
  /** Stops watching; resolves once the handler (if it ran) finished. */
  settled(): Promise<void>;
}

/**
 * Runs `handler` once, in the activity's context (`Context.current()`, `log`, `activityInfo()` work
 * in it), if Temporal cancels the current activity because an operator paused it (`temporal
 * activity pause`). Temporal tells a running activity of the pause in the answer to a heartbeat, so
 * it arrives within about a heartbeat timeout. A rejection of `handler` is ignored: handle errors in it.
 */
export function onOperatorPause(handler: () => Promise<void>): OperatorPauseWatch {
  const ctx = Context.current();
  const signal = ctx.cancellationSignal;
  // The abort event fires outside the activity's async context: run the handler back inside it.
  const inActivity = AsyncLocalStorage.snapshot();
  let running: Promise<void> = Promise.resolve();
  const onAbort = () => {
    if (ctx.cancellationDetails?.paused) running = inActivity(handler).catch(() => undefined);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  return {
    async settled() {
      signal.removeEventListener('abort', onAbort);
      await running;
    },
  };
}
