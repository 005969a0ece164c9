/**
 * Activity proxies of the workflows, one per timeout class, every timeout and retry written out.
 */
import { ActivityOptions, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

/** Error types never retried (deterministic: configuration, fencing, data). */
export const NON_RETRYABLE = ['CONFIG_INVALID', 'SOURCE_UNKNOWN', 'VERSION_FENCED', 'SCHEMA_TOO_NEW', 'NOT_PUBLISHABLE', 'SOURCE_DATA_INVALID', 'DB_ERROR'];

/** Short database calls: plan, seal, publish, end, events. Bounded retries: an unreachable source fails the rebuild. */
export const short = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10, nonRetryableErrorTypes: NON_RETRYABLE },
});

/** Long scans that heartbeat from a timer: reconcile, repair. */
export const long = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 10, nonRetryableErrorTypes: NON_RETRYABLE },
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
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', nonRetryableErrorTypes: NON_RETRYABLE },
    summary,
  };
  return proxyActivities<Activities>(options);
}

/** 10 × p99 of the durations (ms), at least 60,000 ms. */
export function startToCloseMs(durationsMs: number[]): number {
  if (!durationsMs.length) return 60_000;
  const sorted = [...durationsMs].sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
  return Math.max(60_000, 10 * p99);
}
