/**
 * `cancelRun`: asks Temporal to cancel a workflow run with the worker's Temporal client. A rebuild
 * ended by the `cancel` signal calls it on its own run, because Temporal refuses a workflow's
 * RequestCancelExternalWorkflowExecution of itself ("Unable to cancel external workflow because not
 * found"); the run then ends with status CANCELLED, as after `temporal workflow cancel`.
 */
import type { CancelRunInput } from '../workflows/activity-types';
import { ConfigError } from '../lib/errors';
import type { ActivityContext } from './context';

/**
 * Requests cancellation of run `input.runId` of `input.workflowId`. Idempotent: Temporal records
 * one cancel request per run.
 * @throws ConfigError (CONFIG_INVALID, non-retryable) when the worker was built without a Temporal client.
 * @throws the client's error when Temporal refuses or cannot be reached (retried by the workflow's policy).
 */
export async function cancelRun(ctx: ActivityContext, input: CancelRunInput): Promise<void> {
  if (!ctx.client) throw new ConfigError('this worker has no Temporal client: it cannot cancel a rebuild run');
  await ctx.client.workflow.getHandle(input.workflowId, input.runId).cancel();
}
