/**
 * Input and result of the `ScheduledRefresh` launcher workflow (the action of a catalog's Temporal
 * Schedule, `catalog-rebuild schedule`) and of its two activities. Pure types: the client, the
 * worker and the tests import them.
 */

/** Input of `ScheduledRefresh`: the schedule's action arguments (`catalog-rebuild schedule`). */
export interface ScheduledRefreshInput {
  catalog: string;
  /** Source name from the worker configuration. */
  source: string;
  /** Refresh each job's file records too (`schedule --files`). */
  files?: boolean;
}

/**
 * How a scheduled refresh ended:
 * - `published`: the refresh published a new version;
 * - `up-to-date`: nothing changed since the active version; nothing was published (a success);
 * - `not-published`: the rebuild ended without publishing (cancelled by the `cancel` signal);
 * - `skipped`: a rebuild of the catalog with other identifying flags was running; nothing was started.
 */
export type ScheduledRefreshOutcome = 'published' | 'up-to-date' | 'not-published' | 'skipped';

/** Result of `ScheduledRefresh` (a failed refresh fails the launcher instead, with REFRESH_FAILED). */
export interface ScheduledRefreshResult {
  catalog: string;
  outcome: ScheduledRefreshOutcome;
  /** The rebuild's workflow id, `catalog-rebuild/<catalog>`. */
  rebuildWorkflowId: string;
  /** First run id of the rebuild the launcher started or attached to; null when skipped. */
  rebuildRunId: string | null;
  /** True when a rebuild with the same flags was already running and the launcher waited for it. */
  attached: boolean;
  /** The published version (decimal text); null when nothing was published. */
  versionId: string | null;
  /** One line for humans: what happened (for `skipped`, the differing flags). */
  message: string;
}

/** Input of the `launchRefresh` activity. */
export interface LaunchRefreshInput extends ScheduledRefreshInput {
  /** The launcher's workflow id and run id: the start token, so a retried start knows its own rebuild. */
  launcherWorkflowId: string;
  launcherRunId: string;
}

/** Result of `launchRefresh`: the rebuild started or attached to, or the flags that kept it from attaching. */
export interface LaunchRefreshResult {
  workflowId: string;
  /** First run id of the rebuild (its continue-as-new chain). */
  firstRunId: string;
  attached: boolean;
  /** `name: running X, requested Y` for each differing identifying flag; empty when started or attached. */
  conflicts: string[];
}

/** Input of the `awaitRebuild` activity. */
export interface AwaitRebuildInput {
  workflowId: string;
  firstRunId: string;
  /** Return `running` after this long without an outcome (ms); the launcher then asks again. */
  maxWaitMs: number;
}

/** Result of `awaitRebuild`. */
export type AwaitRebuildResult =
  | { outcome: 'running' }
  | { outcome: 'published' | 'up-to-date' | 'not-published'; versionId: string | null; message: string }
  | { outcome: 'failed'; message: string };

/**
 * Event kinds the launcher records in the catalog's event log: a successful scheduled refresh
 * (published or up to date; its newest is the worker's `catalog_rebuild_last_refresh_age_seconds`)
 * and a skipped run.
 */
export const SCHEDULE_EVENTS = {
  done: 'scheduled_refresh_done',
  skipped: 'scheduled_refresh_skipped',
} as const;
