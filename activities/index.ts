/**
 * Activities of catalog-rebuild, one file each, built by `createActivities(deps)` over the worker's
 * dependencies (catalog pool, named sources, Temporal client). Workflows import only the type.
 * All SQL is in `lib/catalog/` (catalog side) and `lib/sources/` (source side).
 */
import type { Client } from '@temporalio/client';
import type { Pool } from 'pg';
import { createEventLog } from '../lib/catalog';
import type { SourceRegistry } from '../lib/sources';
import type {
  CancelRunInput,
  EndVersionInput,
  PlanRebuildInput,
  PublishVersionInput,
  PublishVersionResult,
  ReconcileInput,
  RecordEventInput,
  RetireVersionsInput,
  RetireVersionsResult,
  SealVersionInput,
  IndexVersionInput,
  SealVersionResult,
} from '../workflows/activity-types';
import type {
  CopyPageInput,
  CopyPageResult,
  DryRunInput,
  DryRunResult,
  PlanResult,
  ReconcileSummary,
  RepairBucketInput,
  RepairBucketResult,
} from '../workflows/definitions';
import type { ActivityContext } from './context';
import type { PageHooks } from '../lib/page';
import { cancelRun } from './cancel-run';
import { copyPage } from './copy-page';
import { planRebuild } from './plan-rebuild';
import { dryRunPlan } from './dry-run';
import { publishVersion } from './publish-version';
import { reconcile } from './reconcile';
import { recordEvent } from './record-event';
import { repairBucket } from './repair-bucket';
import { retireVersions } from './retire-versions';
import { endVersion, indexVersion, sealVersion } from './version-lifecycle';
import { awaitRebuild, launchRefresh } from './scheduled-refresh';
import type {
  AwaitRebuildInput,
  AwaitRebuildResult,
  LaunchRefreshInput,
  LaunchRefreshResult,
} from '../workflows/schedule-definitions';

export type { ActivityContext } from './context';
export type { PageAttempt, PageHooks } from '../lib/page';

/** What the activities need; built once per worker process. */
export interface ActivityDeps {
  /** Pool on the catalog database. */
  pool: Pool;
  /** Named sources from the worker's configuration. */
  sources: SourceRegistry;
  /**
   * Temporal client: to read a retried page's previous failure, and to start and await the
   * rebuilds of scheduled refreshes (without it those activities fail with CONFIG_INVALID).
   */
  client?: Client;
  /** Worker identity recorded in the ledger and events. */
  identity: string;
  /** Build id of this worker, stamped on every event it records. */
  buildId: string;
  /** Page hooks (test workers only, dev/test-worker.ts). */
  hooks?: PageHooks;
  /** Called after each committed page (metrics). */
  onPageCommitted?: (r: CopyPageResult) => void;
}

/**
 * Builds the activity functions over their dependencies. The keys are the activity names the
 * workflows call (recorded in their histories): they never change.
 * Every activity takes one input object and returns one result object with ids and counts only.
 */
export function createActivities(deps: ActivityDeps) {
  const ctx: ActivityContext = {
    pool: deps.pool,
    sources: deps.sources,
    client: deps.client,
    identity: deps.identity,
    events: createEventLog(deps.buildId),
    hooks: deps.hooks,
    onPageCommitted: deps.onPageCommitted,
  };
  return {
    /** Plans a rebuild: version, table and fixed page plan (plan-rebuild.ts). */
    planRebuild: (input: PlanRebuildInput): Promise<PlanResult> => planRebuild(ctx, input),
    /** Copies one page in one catalog transaction (copy-page.ts). */
    copyPage: (input: CopyPageInput): Promise<CopyPageResult> => copyPage(ctx, input),
    /** Ends the copy phase: `verifying`, reader index, ANALYZE (version-lifecycle.ts). */
    sealVersion: (input: SealVersionInput): Promise<SealVersionResult> => sealVersion(ctx, input),
    indexVersion: (input: IndexVersionInput): Promise<void> => indexVersion(ctx, input),
    /** One reconciliation round against the source at the watermark (reconcile.ts). */
    reconcile: (input: ReconcileInput): Promise<ReconcileSummary> => reconcile(ctx, input),
    /** Repairs one mismatched bucket (repair-bucket.ts). */
    repairBucket: (input: RepairBucketInput): Promise<RepairBucketResult> => repairBucket(ctx, input),
    /** Flips the active pointer under the publish lock (publish-version.ts). */
    publishVersion: (input: PublishVersionInput): Promise<PublishVersionResult> => publishVersion(ctx, input),
    /** Drops versions beyond retention (retire-versions.ts). */
    retireVersions: (input: RetireVersionsInput): Promise<RetireVersionsResult> => retireVersions(ctx, input),
    /** Ends an unpublished version as abandoned or failed (version-lifecycle.ts). */
    endVersion: (input: EndVersionInput): Promise<string | null> => endVersion(ctx, input),
    /** Asks Temporal to cancel a run: a rebuild ended by the `cancel` signal ends CANCELLED (cancel-run.ts). */
    cancelRun: (input: CancelRunInput): Promise<void> => cancelRun(ctx, input),
    /** Appends an event to the catalog's log (record-event.ts). */
    recordEvent: (input: RecordEventInput): Promise<void> => recordEvent(ctx, input),
    /** What a rebuild would do now, without making it (dry-run.ts). */
    dryRunPlan: (input: DryRunInput): Promise<DryRunResult> => dryRunPlan(ctx, input),
    /** Starts or attaches to the catalog's refresh for the ScheduledRefresh launcher (scheduled-refresh.ts). */
    launchRefresh: (input: LaunchRefreshInput): Promise<LaunchRefreshResult> => launchRefresh(ctx, input),
    /** Waits, heartbeating, for a rebuild's outcome for at most a bounded time (scheduled-refresh.ts). */
    awaitRebuild: (input: AwaitRebuildInput): Promise<AwaitRebuildResult> => awaitRebuild(ctx, input),
  };
}

/** The activity functions registered by the worker. */
export type Activities = ReturnType<typeof createActivities>;
