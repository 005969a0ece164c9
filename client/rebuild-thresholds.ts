/**
 * Thresholds of the rebuild health check (`check --rebuild`, client/rebuild-health.ts) and the
 * no-poller window that `status` shares with it: the defaults of the specification, and the
 * environment variables that shorten them for tests.
 */

/** Thresholds of the rebuild health check. */
export interface RebuildThresholds {
  /** CRITICAL when a running rebuild's task queue had no poll for longer than this (s). */
  noPollerSeconds: number;
  /** Floor of the copy stall limit (s): WARNING after max(this, `stallP99Factor` × p99 page time) without a commit. */
  stallFloorSeconds: number;
  /** Multiple of the p99 page time (of recent committed pages) in the copy stall limit. */
  stallP99Factor: number;
  /** WARNING when a pending activity (outside the copy phase) has not heartbeated for this multiple of its heartbeat timeout. */
  heartbeatTimeoutFactor: number;
  /** WARNING when at least this many pages' latest attempts failed with the same (non-timeout) error. */
  sameErrorPages: number;
}

/** The thresholds of the specification: 75 s, 2 min, 10 × p99, 2 × heartbeat timeout, 3 pages. */
export const DEFAULT_REBUILD_THRESHOLDS: Readonly<RebuildThresholds> = Object.freeze({
  noPollerSeconds: 75,
  stallFloorSeconds: 120,
  stallP99Factor: 10,
  heartbeatTimeoutFactor: 2,
  sameErrorPages: 3,
});

/**
 * Environment variables that shorten the thresholds, for tests (the defaults are those of the
 * specification; `status` counts live pollers within the same window):
 * `CATALOG_REBUILD_CHECK_NO_POLLER_SECONDS` (75) and `CATALOG_REBUILD_CHECK_STALL_SECONDS` (120, the floor of the copy stall limit).
 */
export const THRESHOLD_ENV = {
  noPollerSeconds: 'CATALOG_REBUILD_CHECK_NO_POLLER_SECONDS',
  stallFloorSeconds: 'CATALOG_REBUILD_CHECK_STALL_SECONDS',
} as const;

/**
 * The thresholds in force: the defaults, with those of {@link THRESHOLD_ENV} that are set to a
 * positive number.
 */
export function rebuildThresholds(env: NodeJS.ProcessEnv = process.env): RebuildThresholds {
  const t: RebuildThresholds = { ...DEFAULT_REBUILD_THRESHOLDS };
  for (const [key, name] of Object.entries(THRESHOLD_ENV) as [keyof typeof THRESHOLD_ENV, string][]) {
    const v = Number(env[name]);
    if (env[name] && Number.isFinite(v) && v > 0) t[key] = v;
  }
  return t;
}
