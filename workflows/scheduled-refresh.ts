/**
 * ScheduledRefresh: the action of a catalog's Temporal Schedule (`catalog-rebuild schedule`, schedule
 * id `catalog-rebuild/<catalog>`), workflow id `catalog-rebuild/<catalog>/scheduled-<scheduled time>`
 * (the schedule appends the time). It starts a refresh under the rebuild's one id
 * `catalog-rebuild/<catalog>`, or attaches to the running rebuild with the same identifying flags
 * (start's conflict rule), and waits for its outcome, so the schedule's overlap policy (skip) and its
 * recent actions are about the refresh. A running rebuild with other flags: the run is skipped, with
 * an event (`scheduled_refresh_skipped`) and the result saying so. A refresh that published or was up
 * to date is recorded as `scheduled_refresh_done` (the worker's refresh age gauge reads it). The
 * rebuild is started by an activity through the worker's Temporal client, not as a child
 * (docs/architecture.md, "Scheduled refreshes").
 */
import { ApplicationFailure, setWorkflowOptions, workflowInfo } from '@temporalio/workflow';
import { launcher, short } from './activity-options';
import { FailureType } from './failures';
import { AWAIT_REBUILD_MAX_WAIT_MS } from './policies';
import type { ScheduledRefreshInput, ScheduledRefreshResult } from './schedule-definitions';
import { SCHEDULE_EVENTS } from './schedule-definitions';

/**
 * Runs one scheduled refresh of `input.catalog` to its end.
 * @returns the outcome: `published`, `up-to-date`, `not-published` (cancelled) or `skipped`.
 * @throws ApplicationFailure REFRESH_FAILED (non-retryable) `rebuild catalog-rebuild/<catalog> failed:
 *   <reason>` when the refresh failed, was terminated or timed out.
 */
export async function ScheduledRefresh(input: ScheduledRefreshInput): Promise<ScheduledRefreshResult> {
  const info = workflowInfo();
  const started = await launcher.launch.launchRefresh({
    ...input,
    launcherWorkflowId: info.workflowId,
    launcherRunId: info.runId,
  });
  const base = { catalog: input.catalog, rebuildWorkflowId: started.workflowId, attached: started.attached };
  if (started.conflicts.length) {
    const message = `scheduled refresh skipped: a rebuild of ${input.catalog} with other flags is running (${started.conflicts.join('; ')})`;
    await short.recordEvent({
      catalog: input.catalog,
      versionId: null,
      kind: SCHEDULE_EVENTS.skipped,
      message,
      details: { launcher: info.workflowId, rebuild: started.workflowId, conflicts: started.conflicts },
    });
    return { ...base, outcome: 'skipped', rebuildRunId: null, versionId: null, message };
  }
  for (;;) {
    const r = await launcher.wait.awaitRebuild({
      workflowId: started.workflowId,
      firstRunId: started.firstRunId,
      maxWaitMs: AWAIT_REBUILD_MAX_WAIT_MS,
    });
    if (r.outcome === 'running') continue;
    if (r.outcome === 'failed') {
      throw ApplicationFailure.nonRetryable(
        `rebuild ${started.workflowId} failed: ${r.message}`,
        FailureType.REFRESH_FAILED,
      );
    }
    if (r.outcome !== 'not-published') {
      await short.recordEvent({
        catalog: input.catalog,
        versionId: r.versionId,
        kind: SCHEDULE_EVENTS.done,
        message: `scheduled refresh ${r.outcome}: ${r.message}`,
        details: { launcher: info.workflowId, rebuild: started.workflowId, outcome: r.outcome },
      });
    }
    return {
      ...base,
      outcome: r.outcome,
      rebuildRunId: started.firstRunId,
      versionId: r.versionId,
      message: r.message,
    };
  }
}
// Pinned like every workflow of the product: a launcher stays on the build it started on.
setWorkflowOptions({ versioningBehavior: 'PINNED' }, ScheduledRefresh);
