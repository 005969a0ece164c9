/**
 * Activity proxies of the workflows, one per timeout class, every timeout and retry written out.
 */
import type { ActivityOptions } from '@temporalio/workflow';
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { LONG_RETRY, PAGE_RETRY, PAGE_START_TO_CLOSE_FLOOR_MS, SHORT_RETRY } from './policies';

/** Short database calls: plan, seal, publish, end, events. Bounded retries: an unreachable source fails the rebuild. */
export const short = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: SHORT_RETRY,
});

/** Long scans that heartbeat from a timer: reconcile, repair. */
export const long = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '30 seconds',
  retry: LONG_RETRY,
});

/**
 * Page copy proxy. Pages have no maximum attempts; heartbeat timeout independent of page time;
 * start-to-close sized from measured page times (10 × p99, floor 60 s, above the sessions'
 * 30 s statement_timeout).
 * @param heartbeatTimeoutMs heartbeat timeout (ms)
 * @param pageDurationsMs recent page durations (ms)
 * @param summary activity summary shown in the Web UI
 */
export function pageActivities(heartbeatTimeoutMs: number, pageDurationsMs: number[], summary: string): Activities {
  const options: ActivityOptions = {
    startToCloseTimeout: startToCloseMs(pageDurationsMs),
    heartbeatTimeout: heartbeatTimeoutMs,
    retry: PAGE_RETRY,
    summary,
  };
  return proxyActivities<Activities>(options);
}

/** 10 × p99 of the durations (ms), at least 60,000 ms. */
export function startToCloseMs(durationsMs: number[]): number {
  if (!durationsMs.length) return PAGE_START_TO_CLOSE_FLOOR_MS;
  const sorted = [...durationsMs].sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
  return Math.max(PAGE_START_TO_CLOSE_FLOOR_MS, 10 * p99);
}
