/**
 * The warnings of the rebuild health check (client/rebuild-health.ts), each a pure function of the
 * facts (client/rebuild-facts.ts): a copy that stalled, activities that stopped heartbeating,
 * pages failing with the same error, and steps (the plan, the seal, …) that Temporal retries.
 */
import type { DatabaseFact, PendingActivityFact, RebuildFacts } from './rebuild-facts';
import type { RebuildThresholds } from './rebuild-thresholds';
import { STEP_NAMES } from '../workflows/failure-text';

/** Whole seconds from `atMs` to `nowMs` (ms since epoch), at least 0. */
export const secondsSince = (nowMs: number, atMs: number): number => Math.max(0, Math.round((nowMs - atMs) / 1000));

/** Page numbers (or activity ids) of activities, as `page 3, 7` / `pages 3, 7, 9`. */
export function pageList(acts: PendingActivityFact[]): string {
  const names = acts.map((a) => (a.pageNo !== null ? String(a.pageNo) : a.activityId));
  return `${names.length === 1 ? 'page' : 'pages'} ${names.join(', ')}`;
}

/** WARNING text when no page committed for max(floor, factor × p99); null otherwise or without the database. */
export function stallWarning(d: DatabaseFact | null, nowMs: number, t: RebuildThresholds): string | null {
  if (!d || d.status !== 'building') return null;
  const limit = Math.max(t.stallFloorSeconds, Math.ceil((t.stallP99Factor * (d.p99PageMs ?? 0)) / 1000));
  const idle = secondsSince(nowMs, d.lastCommitAtMs ?? d.createdAtMs);
  if (idle <= limit) return null;
  return d.lastCommitAtMs !== null
    ? `no page committed for ${idle} s (limit ${limit} s)`
    : `no page committed in the ${idle} s since the plan (limit ${limit} s)`;
}

/** WARNING texts for pending activities that have not heartbeated for factor × their heartbeat timeout. */
export function heartbeatWarnings(f: RebuildFacts, nowMs: number, t: RebuildThresholds): string[] {
  const out: string[] = [];
  for (const a of f.activities) {
    if (a.paused || !a.heartbeatTimeoutMs) continue;
    const waitingForRetry = a.nextAttemptAtMs !== null && a.nextAttemptAtMs > nowMs;
    if (!(a.state === 'STARTED' || a.state === 'CANCEL_REQUESTED' || (a.state === 'SCHEDULED' && !waitingForRetry)))
      continue;
    const last = Math.max(a.lastHeartbeatAtMs ?? 0, a.lastStartedAtMs ?? 0);
    if (!last) continue;
    const idle = secondsSince(nowMs, last);
    const limitS = (t.heartbeatTimeoutFactor * a.heartbeatTimeoutMs) / 1000;
    if (idle <= limitS) continue;
    const where = a.workflowId === f.workflowId ? '' : ` in ${a.workflowId}`;
    out.push(
      `activity ${a.activityType} (attempt ${a.attempt}${where}) has not heartbeated for ${idle} s (heartbeat timeout ${a.heartbeatTimeoutMs / 1000} s)`,
    );
  }
  return out;
}

/** Failures that are not errors of the page: timeouts (a worker died) and cancellations (a worker shut down). */
export function countsAsError(a: PendingActivityFact): boolean {
  const lf = a.lastFailure;
  return !!lf && !lf.timeout && lf.type !== 'PAGE_CANCELLED';
}

/**
 * WARNING text when at least `sameErrorPages` copyPage activities' latest attempts failed with the
 * same error (numbers in messages ignored when comparing), naming the error and the pages.
 */
export function sameErrorWarning(acts: PendingActivityFact[], t: RebuildThresholds): string | null {
  const groups = new Map<string, PendingActivityFact[]>();
  for (const a of acts) {
    if (a.activityType !== 'copyPage' || !countsAsError(a)) continue;
    const key = `${a.lastFailure!.type ?? ''}|${a.lastFailure!.message.replace(/\d+/g, '#')}`;
    groups.set(key, [...(groups.get(key) ?? []), a]);
  }
  let worst: PendingActivityFact[] = [];
  for (const g of groups.values()) if (g.length > worst.length) worst = g;
  if (worst.length < t.sameErrorPages) return null;
  const lf = worst[0].lastFailure!;
  const message = lf.message.length > 200 ? `${lf.message.slice(0, 197)}...` : lf.message;
  const sorted = [...worst].sort((a, b) => (a.pageNo ?? 0) - (b.pageNo ?? 0));
  return `${worst.length} pages failing with the same error: ${lf.type ? `${lf.type}: ` : ''}${message} (${pageList(sorted)})`;
}

/**
 * A step whose latest attempt failed and that Temporal retries: `its plan is retried (attempt 6):
 * <the failure's message>`, the message cut at 200 characters.
 */
export function retriedStepText(a: PendingActivityFact): string {
  const lf = a.lastFailure!;
  const message = lf.message.length > 200 ? `${lf.message.slice(0, 197)}...` : lf.message;
  return `${STEP_NAMES[a.activityType] ?? a.activityType} is retried (attempt ${a.attempt}): ${message}`;
}

/**
 * WARNING texts for the rebuild's steps other than pages (the plan, the seal, a reconciliation, …)
 * whose latest attempt failed with an error (not a timeout or a cancel: {@link countsAsError}),
 * e.g. a plan retried while its source cannot be reached. Pages have {@link sameErrorWarning}.
 */
export function retriedStepWarnings(acts: PendingActivityFact[]): string[] {
  return acts.filter((a) => a.activityType !== 'copyPage' && countsAsError(a)).map(retriedStepText);
}
