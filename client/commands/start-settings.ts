/** How long `start` waits for workers, plans and cancels, and what it accepts: defaults and their test overrides. */

/**
 * Environment variables overriding the waits of `start`, for tests (defaults in
 * {@link startCheckSettings}).
 */
export const START_ENV = {
  workerWaitMs: 'CATALOG_REBUILD_START_WORKER_WAIT_MS',
  recordMaxAgeMs: 'CATALOG_REBUILD_START_SOURCE_MAX_AGE_MS',
  planWaitMs: 'CATALOG_REBUILD_START_PLAN_WAIT_MS',
  noPollerMs: 'CATALOG_REBUILD_START_NO_POLLER_MS',
  noPollerRepeatMs: 'CATALOG_REBUILD_START_NO_POLLER_REPEAT_MS',
  cancelWaitMs: 'CATALOG_REBUILD_START_CANCEL_WAIT_MS',
  dryRunNoWorkerMs: 'CATALOG_REBUILD_START_DRY_RUN_NO_WORKER_MS',
} as const;

/** How long `start` waits and what it accepts (all ms). */
export interface StartCheckSettings {
  /** Wait for a first worker record of the task queue; default 60,000. */
  workerWaitMs: number;
  /** A source recorded this recently is served; default 300,000 (5 min). */
  recordMaxAgeMs: number;
  /** Wait for the plan before the receipt; default 30,000. */
  planWaitMs: number;
  /**
   * A workflow task of the rebuild that no worker took for this long means no worker polls the task
   * queue (a live one takes it at once); `start` then says so within its wait; default 5,000.
   */
  noPollerMs: number;
  /** With `--wait`, while a workflow task still waits for a worker, the no-worker line again this often; default 60,000. */
  noPollerRepeatMs: number;
  /**
   * Wait for a rebuild of the catalog that is being cancelled to end before a new one starts (it
   * abandons its version and ends within seconds); default 60,000.
   */
  cancelWaitMs: number;
  /** A dry run that no worker took for this long is ended, and `start --dry-run` exits 1; default 30,000. */
  dryRunNoWorkerMs: number;
  /** Pause between two reads of the records while waiting; 1,000. */
  pollMs: number;
}

/** The settings of `start` from `env` (non-negative integer overrides of {@link START_ENV}, else the defaults). */
export function startCheckSettings(env: NodeJS.ProcessEnv = process.env): StartCheckSettings {
  const ms = (name: string, fallback: number) => {
    const raw = env[name];
    const n = raw === undefined || raw === '' ? NaN : Number(raw);
    return Number.isInteger(n) && n >= 0 ? n : fallback;
  };
  return {
    workerWaitMs: ms(START_ENV.workerWaitMs, 60_000),
    recordMaxAgeMs: ms(START_ENV.recordMaxAgeMs, 300_000),
    planWaitMs: ms(START_ENV.planWaitMs, 30_000),
    noPollerMs: ms(START_ENV.noPollerMs, 5_000),
    noPollerRepeatMs: ms(START_ENV.noPollerRepeatMs, 60_000),
    cancelWaitMs: ms(START_ENV.cancelWaitMs, 60_000),
    dryRunNoWorkerMs: ms(START_ENV.dryRunNoWorkerMs, 30_000),
    pollMs: 1_000,
  };
}
