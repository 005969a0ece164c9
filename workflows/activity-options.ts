/**
 * Activity proxies of the workflows, one per timeout class, every timeout and retry written out.
 */
import type { ActivityOptions } from '@temporalio/workflow';
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  LONG_RETRY,
  LONG_STEP_HEARTBEAT_TIMEOUT,
  LONG_STEP_START_TO_CLOSE,
  PAGE_RETRY,
  PAGE_START_TO_CLOSE_FLOOR_MS,
  SHORT_RETRY,
} from './policies';

/** Short database calls: plan, end, events. Bounded retries: an unreachable source fails the rebuild. */
const shortCalls = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: SHORT_RETRY,
});

/**
 * Long steps whose statements grow with the catalog (seal: reader index and ANALYZE; reconcile;
 * repair; publish: the shrink guard's counts; retirement). They run their statements without
 * statement timeout and heartbeat from a timer, so a dead worker is found by the heartbeat timeout;
 * the start-to-close timeout only bounds a step that heartbeats but never ends.
 */
export const long = proxyActivities<Activities>({
  startToCloseTimeout: LONG_STEP_START_TO_CLOSE,
  heartbeatTimeout: LONG_STEP_HEARTBEAT_TIMEOUT,
  retry: LONG_RETRY,
});

/** Activities called through {@link short} that are long steps (run with the options of {@link long}). */
const LONG_STEPS: ReadonlySet<PropertyKey> = new Set<keyof Activities>([
  'sealVersion',
  'indexVersion',
  'publishVersion',
]);

/**
 * The proxy of the workflows' short calls (plan, end, events); `sealVersion` and `publishVersion`
 * called through it are long steps and get the options of {@link long}.
 */
export const short: Activities = new Proxy(shortCalls, {
  get: (target, name) => (LONG_STEPS.has(name) ? long : target)[name as keyof Activities],
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
