/**
 * The activities of the `ScheduledRefresh` launcher: `launchRefresh` starts or attaches to the
 * catalog's rebuild with the Temporal client the worker holds (the same `startRebuild` as
 * `catalog-rebuild start`: workflow id `catalog-rebuild/<catalog>`, conflict policy use-existing,
 * identifying flags in the memo), and `awaitRebuild` waits, heartbeating, for its outcome.
 */
import { activityInfo, ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import { WorkflowFailedError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { beingCancelled, rebuildHandle, startRebuild, waitForResult } from '../client';
import { scheduleId } from '../workflows/names';
import type {
  AwaitRebuildInput,
  AwaitRebuildResult,
  LaunchRefreshInput,
  LaunchRefreshResult,
} from '../workflows/schedule-definitions';
import { ConfigError, FailureType } from '../lib/errors';
import type { ActivityContext } from './context';
import { withHeartbeat } from './heartbeat';
import { rootMessage } from '../workflows/failure-text';

/** The worker's Temporal client. @throws ConfigError when the worker was built without one. */
function clientOf(ctx: ActivityContext): Client {
  if (!ctx.client) throw new ConfigError('this worker has no Temporal client: it cannot start scheduled refreshes');
  return ctx.client;
}

/**
 * Starts a refresh of `input.catalog` (`RebuildCatalog` with `refresh`, on this activity's task
 * queue), or attaches to the running rebuild of the catalog. The launcher's workflow and run id are
 * the start token, so a retry of this activity finds the rebuild it started itself. A running
 * rebuild that is being cancelled is not attached to: the activity fails, retryable, and a retry
 * after the rebuild ended starts the refresh.
 * @throws REBUILD_CANCELLING (retryable) when the running rebuild is being cancelled.
 * @returns the rebuild's id and first run id, whether it attached, and the differing identifying
 *   flags of a running rebuild (then nothing was started).
 */
export async function launchRefresh(ctx: ActivityContext, input: LaunchRefreshInput): Promise<LaunchRefreshResult> {
  const r = await startRebuild(
    clientOf(ctx),
    { catalog: input.catalog, source: input.source, refresh: true, ...(input.files ? { files: true } : {}) },
    {
      taskQueue: activityInfo().taskQueue,
      startToken: `${input.launcherWorkflowId}/${input.launcherRunId}`,
      startedBy: `schedule ${scheduleId(input.catalog)}`,
    },
  );
  const desc = await r.handle.describe();
  if (r.attached && (await beingCancelled(rebuildHandle(clientOf(ctx), input.catalog)))) {
    throw ApplicationFailure.retryable(
      `the rebuild ${r.handle.workflowId} is being cancelled: the scheduled refresh starts once it ended`,
      FailureType.REBUILD_CANCELLING,
    );
  }
  return {
    workflowId: r.handle.workflowId,
    firstRunId: desc.raw.workflowExecutionInfo?.firstRunId || desc.runId,
    attached: r.attached,
    conflicts: r.conflicts,
  };
}

/**
 * Waits for the outcome of the rebuild `input.workflowId` started as run `input.firstRunId`
 * (following continue-as-new), heartbeating from a timer, for at most `input.maxWaitMs`.
 * @returns `running` when it has not ended within the wait; otherwise `published`, `up-to-date`,
 *   `not-published` (cancelled) with the version, or `failed` with the root cause's message (a
 *   failed, terminated or timed-out rebuild).
 * @throws CancelledFailure when the activity is cancelled (the launcher was cancelled).
 */
export async function awaitRebuild(ctx: ActivityContext, input: AwaitRebuildInput): Promise<AwaitRebuildResult> {
  const handle = clientOf(ctx).workflow.getHandle(input.workflowId, undefined, {
    firstExecutionRunId: input.firstRunId,
  });
  const cancelled = Context.current().cancelled;
  return withHeartbeat(
    () => ({ workflowId: input.workflowId }),
    async () => {
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<'running'>((r) => (timer = setTimeout(() => r('running'), input.maxWaitMs)));
      try {
        const r = await Promise.race([waitForResult(handle), waited, cancelled]);
        if (r === 'running') return { outcome: 'running' };
        if (r.published)
          return { outcome: 'published', versionId: r.versionId, message: `published version ${r.versionId}` };
        if (r.upToDate)
          return { outcome: 'up-to-date', versionId: null, message: 'up to date: nothing changed, nothing published' };
        return {
          outcome: 'not-published',
          versionId: null,
          message: r.cancelled ? `cancelled: version ${r.versionId} abandoned` : 'ended without publishing',
        };
      } catch (err) {
        if (err instanceof CancelledFailure) throw err;
        if (err instanceof WorkflowFailedError) {
          if (err.cause instanceof CancelledFailure)
            return { outcome: 'not-published', versionId: null, message: 'the rebuild was cancelled' };
          return { outcome: 'failed', message: rootMessage(err) };
        }
        throw err;
      } finally {
        clearTimeout(timer);
      }
    },
  );
}
