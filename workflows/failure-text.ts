/**
 * How a failed rebuild names its failure: the root cause's message, and, when Temporal stopped
 * retrying a step (its retry policy's attempts or its schedule-to-close timeout ran out), which
 * step gave up. Without that, a failure whose cause was retryable (`transient database error: …`)
 * read as if it were still being retried. Deterministic: workflow code.
 */
import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common';

/** The rebuild's steps by activity type, as operators read them; other types by their name. */
export const STEP_NAMES: Readonly<Record<string, string>> = {
  planRebuild: 'its plan',
  sealVersion: 'its seal',
  indexVersion: 'its index build',
  reconcile: 'its reconciliation',
  repairBucket: 'a bucket repair',
  publishVersion: 'its publish',
  retireVersions: 'the retirement of old versions',
};

/** The root cause of a failure chain (ActivityFailure → ApplicationFailure → …). */
export function rootCause(err: unknown): unknown {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e;
}

/** The root cause's message of a failure chain. */
export function rootMessage(err: unknown): string {
  const e = rootCause(err);
  return e instanceof Error ? e.message : String(e);
}

/** The outermost activity failure of the chain whose retries Temporal gave up, or null. */
function activityThatGaveUp(err: unknown): ActivityFailure | null {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (!(e instanceof ActivityFailure)) continue;
    const s = e.retryState;
    return s === RetryState.MAXIMUM_ATTEMPTS_REACHED || s === RetryState.TIMEOUT ? e : null;
  }
  return null;
}

/**
 * The text of a rebuild's failure: `its plan gave up, its retries exhausted: <root message>` when
 * Temporal stopped retrying a step (`…, its retry time exhausted: …` for a schedule-to-close
 * timeout), else the root cause's message.
 */
export function failureText(err: unknown): string {
  const root = rootMessage(err);
  const act = activityThatGaveUp(err);
  if (!act) return root;
  const step = STEP_NAMES[act.activityType] ?? `step ${act.activityType}`;
  const what = act.retryState === RetryState.TIMEOUT ? 'its retry time' : 'its retries';
  return `${step} gave up, ${what} exhausted: ${root}`;
}

/**
 * The failure a rebuild ends with: `err` itself, or, when a step gave up retrying, a non-retryable
 * ApplicationFailure of the root's type whose message is {@link failureText} (clients show a
 * failure's root message: the chain stays in the step's own history event).
 */
export function endingFailure(err: unknown): unknown {
  if (!activityThatGaveUp(err)) return err;
  const root = rootCause(err);
  const type = root instanceof ApplicationFailure ? root.type : undefined;
  return ApplicationFailure.create({ message: failureText(err), type: type ?? undefined, nonRetryable: true });
}
