/**
 * Activity proxies of the workflows, one per timeout class, every timeout and retry written out.
 */
import type { ActivityOptions } from '@temporalio/workflow';
import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import {
  AWAIT_REBUILD_MAX_WAIT_MS,
  DRY_RUN_RETRY,
  LONG_RETRY,
  LONG_STEP_HEARTBEAT_FACTOR,
  LONG_STEP_HEARTBEAT_TIMEOUT,
  LONG_STEP_START_TO_CLOSE,
  PAGE_RETRY,
  PAGE_START_TO_CLOSE_FLOOR_MS,
  PAGE_START_TO_CLOSE_MS_PER_PLANNED_ROW,
  SHORT_RETRY,
} from './policies';

/** Short database calls: plan, end, events. Bounded retries: an unreachable source fails the rebuild. */
const SHORT_OPTIONS: ActivityOptions = {
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '30 seconds',
  retry: SHORT_RETRY,
};

/** The short calls' proxy with the options of {@link SHORT_OPTIONS}. */
export const short = proxyActivities<Activities>(SHORT_OPTIONS);

/**
 * The plan (`planRebuild`): the options of {@link SHORT_OPTIONS}, and a cancel waits for the attempt in
 * flight to end (`WAIT_CANCELLATION_COMPLETED`) instead of leaving it behind. Then no attempt runs
 * or follows: a plan that committed has returned its version, or (its attempt failed, or failed
 * after its commit) the version is found by the rebuild's ids; a source that cannot be reached is
 * not waited out through the remaining retries.
 */
export const planStep = proxyActivities<Activities>({
  ...SHORT_OPTIONS,
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});

/**
 * Long steps whose statements grow with the catalog (seal: reader index and ANALYZE; reconcile;
 * repair; publish: the shrink guard's counts; retirement). They run their statements without
 * statement timeout and heartbeat from a timer, so a dead worker is found by the heartbeat timeout;
 * the start-to-close timeout only bounds a step that heartbeats but never ends.
 */
const LONG_STEP_OPTIONS: ActivityOptions = {
  startToCloseTimeout: LONG_STEP_START_TO_CLOSE,
  heartbeatTimeout: LONG_STEP_HEARTBEAT_TIMEOUT,
  retry: LONG_RETRY,
};

/** The long steps' proxy with the options of {@link LONG_STEP_OPTIONS} (30 s heartbeat timeout). */
export const long = proxyActivities<Activities>(LONG_STEP_OPTIONS);

/** The dry run's plan: the long steps' timeouts with {@link DRY_RUN_RETRY} (3 attempts). */
export const dryRunSteps = proxyActivities<Activities>({ ...LONG_STEP_OPTIONS, retry: DRY_RUN_RETRY });

/**
 * The long steps' proxy for a rebuild whose pages have heartbeat timeout `heartbeatTimeoutMs`: the
 * options of {@link long} with a heartbeat timeout of {@link LONG_STEP_HEARTBEAT_FACTOR} × it (30 s
 * at the default 15 s), so that a rebuild run with a shorter page heartbeat timeout also finds a
 * worker that died in its seal, index, reconcile, repair or publish sooner. Without it, {@link long}.
 * @param heartbeatTimeoutMs the rebuild's page heartbeat timeout (ms), from its validated settings
 */
export function longSteps(heartbeatTimeoutMs: number | undefined): Activities {
  if (heartbeatTimeoutMs === undefined) return long;
  return proxyActivities<Activities>({
    ...LONG_STEP_OPTIONS,
    heartbeatTimeout: LONG_STEP_HEARTBEAT_FACTOR * heartbeatTimeoutMs,
  });
}

/**
 * The `ScheduledRefresh` launcher's calls: `launchRefresh` (start or attach through the worker's
 * Temporal client; short, bounded retries) and `awaitRebuild` (a wait of at most
 * {@link AWAIT_REBUILD_MAX_WAIT_MS} that heartbeats every few seconds, so a dead worker's wait moves
 * to another worker after 30 s; no maximum attempts, like pages).
 */
export const launcher = {
  launch: proxyActivities<Activities>({ startToCloseTimeout: '1 minute', retry: SHORT_RETRY }),
  wait: proxyActivities<Activities>({
    startToCloseTimeout: AWAIT_REBUILD_MAX_WAIT_MS + 300_000,
    heartbeatTimeout: '30 seconds',
    retry: PAGE_RETRY,
  }),
};

/**
 * Page copy proxy. Pages have no maximum attempts; heartbeat timeout independent of page time;
 * start-to-close sized from measured page times (10 × p99, floor 5 minutes, above the sessions'
 * statement_timeout) and from the largest planned page.
 * @param heartbeatTimeoutMs heartbeat timeout (ms)
 * @param pageDurationsMs recent page durations (ms)
 * @param summary activity summary shown in the Web UI
 * @param maxPageRows planned rows of the plan's largest page
 */
export function pageActivities(
  heartbeatTimeoutMs: number,
  pageDurationsMs: number[],
  summary: string,
  maxPageRows: number,
): Activities {
  const options: ActivityOptions = {
    startToCloseTimeout: startToCloseMs(pageDurationsMs, maxPageRows),
    heartbeatTimeout: heartbeatTimeoutMs,
    retry: PAGE_RETRY,
    summary,
  };
  return proxyActivities<Activities>(options);
}

/**
 * A page's start-to-close (ms): 10 × p99 of the durations, at least {@link PAGE_START_TO_CLOSE_FLOOR_MS}
 * (300,000 ms) and at least {@link PAGE_START_TO_CLOSE_MS_PER_PLANNED_ROW} (2 ms) per row of the
 * largest planned page.
 */
export function startToCloseMs(durationsMs: number[], maxPageRows = 0): number {
  const floor = Math.max(PAGE_START_TO_CLOSE_FLOOR_MS, PAGE_START_TO_CLOSE_MS_PER_PLANNED_ROW * maxPageRows);
  if (!durationsMs.length) return floor;
  const sorted = [...durationsMs].sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
  return Math.max(floor, 10 * p99);
}
