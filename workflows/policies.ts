/**
 * Retry policies, timeouts and limits of catalog-rebuild: pure definitions shared by the workflows'
 * activity proxies, the client's validators and the tooling. Imported by workflow code.
 */
import type { RetryPolicy } from '@temporalio/common';
import { NON_RETRYABLE_TYPES } from './failures';

/** Limits of the rebuild's settings (CLI flags, workflow input, `setThrottle`): integers, inclusive. */
export const LIMITS = {
  /** Jobs per page (`--page-size`; without it the plan sizes pages, see lib/page-sizing.ts). */
  pageSize: { min: 1, max: 100_000 },
  /** Pages in flight. */
  concurrency: { min: 1, max: 64, default: 4 },
  /** Pause between page starts (ms). */
  pauseBetweenPagesMs: { min: 0, max: 3_600_000 },
  /** Heartbeat timeout of page activities (ms). */
  heartbeatTimeoutMs: { min: 1_000, max: 600_000, default: 15_000 },
  /** Pages a run may schedule before it continues as new. */
  maxPagesPerRun: { min: 1, max: 5_000, default: 1_000 },
} as const;

/** Retries of short database activities (plan, seal, publish, end, events): 10 attempts, then the rebuild fails. */
export const SHORT_RETRY: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '30 seconds',
  maximumAttempts: 10,
  nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES],
};

/** Retries of long steps that heartbeat (seal, reconcile, repair, publish, retire): 10 attempts. */
export const LONG_RETRY: RetryPolicy = { ...SHORT_RETRY };

/**
 * Retries of a dry run's plan (`start --dry-run`): 3 attempts (about 3 s of back-off), so a source
 * that cannot be read fails the cheap check at once and the CLI names its error, instead of the
 * 10 attempts (about 2.5 minutes) of a rebuild's steps.
 */
export const DRY_RUN_RETRY: RetryPolicy = { ...SHORT_RETRY, maximumAttempts: 3 };

/**
 * Start-to-close timeout of long steps: only a bound on a step that keeps heartbeating without
 * ending; a dead worker is found by {@link LONG_STEP_HEARTBEAT_TIMEOUT}.
 */
export const LONG_STEP_START_TO_CLOSE = '24 hours';

/**
 * Heartbeat timeout of long steps (they heartbeat from a timer every quarter of it) where the caller
 * has no rebuild settings (the dry run, the launcher); a rebuild's long steps use
 * {@link LONG_STEP_HEARTBEAT_FACTOR} × its page heartbeat timeout, the same 30 s at the default.
 */
export const LONG_STEP_HEARTBEAT_TIMEOUT = '30 seconds';

/** A rebuild's long steps' heartbeat timeout as a multiple of its page heartbeat timeout (15 s → 30 s). */
export const LONG_STEP_HEARTBEAT_FACTOR = 2;

/** Retries of page activities: no maximum attempts (design.md); deterministic errors are not retried. */
export const PAGE_RETRY: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '30 seconds',
  nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES],
};

/**
 * Floor of a page activity's start-to-close timeout (ms): above the largest page statement timeout
 * (30 s + 1 ms per planned row: 130 s for 100,000 rows, lib/page-cost.ts). A dead worker is found by
 * the heartbeat timeout, not by this.
 */
export const PAGE_START_TO_CLOSE_FLOOR_MS = 300_000;

/**
 * Start-to-close allowance per row of the largest planned page (ms): twice the page statements'
 * 1 ms per row, so a page of one job with millions of file records (its own page, planned by its
 * `JobFiles`) is not timed out by the start-to-close before its statements' own timeout: 4,000 s for
 * a job of 2,000,000 files. Only pages above 150,000 rows raise the timeout over its floor.
 */
export const PAGE_START_TO_CLOSE_MS_PER_PLANNED_ROW = 2;

/** Page attempts above this are reported (workflow log). */
export const PAGE_ATTEMPTS_REPORTED_ABOVE = 5;

/** Page durations (ms) a rebuild keeps, newest last, for sizing the page timeout; carried across continue-as-new. */
export const PAGE_DURATIONS_KEPT = 200;

/**
 * `RepairBucket` children a reconcile round starts at most (design.md: at most 100 per run); buckets
 * beyond it stay mismatched and are repaired in the next round.
 */
export const MAX_REPAIR_CHILDREN = 100;

/** `RepairBucket` children running at once. */
export const REPAIR_CONCURRENCY = 4;

/** Retired versions kept with their rows after a publish when the input does not say (`start --retention`). */
export const DEFAULT_RETENTION = 1;

/** Reconcile → repair rounds before a rebuild fails when the input does not say (`maxRepairRounds`). */
export const DEFAULT_MAX_REPAIR_ROUNDS = 2;

/** Longest single wait of the `ScheduledRefresh` launcher's `awaitRebuild` activity (ms): it then asks again. */
export const AWAIT_REBUILD_MAX_WAIT_MS = 3_600_000;
