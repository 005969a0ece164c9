/**
 * Verification of a sealed version: `reconcile` compares source and catalog per bucket; each round
 * that finds buckets differing repairs them with `RepairBucket` children and reconciles again, for
 * a bounded number of rounds. Deterministic: workflow code.
 */
import { ApplicationFailure, executeChild } from '@temporalio/workflow';
import { longSteps } from './activity-options';
import { FailureType } from './failures';
import { repairWorkflowId } from './names';
import { MAX_REPAIR_CHILDREN, REPAIR_CONCURRENCY } from './policies';
import type { RebuildState } from './rebuild-state';
import { RepairBucket } from './repair-bucket';

/** Settings of the verify-and-repair phase. */
export interface RepairRoundsOptions {
  /** Repair rounds before the rebuild fails (reconcile runs at most `maxRounds + 1` times). */
  maxRounds: number;
  /** Workflow id of the rebuild: the parent of the `RepairBucket` children's ids. */
  workflowId: string;
  /** The rebuild's page heartbeat timeout (ms): its long steps' heartbeat timeout is twice it. */
  heartbeatTimeoutMs: number;
}

/**
 * Reconciles round after round (phase `reconciling`, then `repairing` while buckets differ) until a
 * round passes; the passing summary is left in `state.reconciliation`.
 * @throws ApplicationFailure NOT_PUBLISHABLE (non-retryable) naming the buckets (at most 50) that
 *   still differ after `maxRounds` repair rounds.
 */
export async function reconcileAndRepair(state: RebuildState, opts: RepairRoundsOptions): Promise<void> {
  const { input, carried: st } = state;
  let round = 0;
  for (;;) {
    round++;
    state.setPhase('reconciling');
    const reconciliation = await longSteps(opts.heartbeatTimeoutMs).reconcile({
      catalog: input.catalog,
      source: input.source,
      versionId: st.versionId,
      round,
    });
    state.reconciliation = reconciliation;
    state.note(
      reconciliation.ok
        ? `reconciled: ${reconciliation.buckets} buckets match, delta ${reconciliation.delta}${reconciliation.gone ? `, ${reconciliation.gone} jobs gone from the source after the plan` : ''}`
        : `reconcile round ${round}: ${reconciliation.mismatched.length} buckets differ`,
    );
    if (reconciliation.ok) return;
    if (round > opts.maxRounds) {
      throw ApplicationFailure.nonRetryable(
        `reconciliation failed after ${opts.maxRounds} repair rounds; buckets still differing: ${reconciliation.mismatched.slice(0, 50).join(', ')}`,
        FailureType.NOT_PUBLISHABLE,
      );
    }
    state.setPhase('repairing');
    const buckets = reconciliation.mismatched.slice(0, MAX_REPAIR_CHILDREN);
    await repairBuckets(state, buckets, round, opts);
    state.note(`repaired ${buckets.length} buckets in round ${round}`);
  }
}

/**
 * Runs one `RepairBucket` child per bucket (`none` = jobs without a start time), REPAIR_CONCURRENCY
 * at once, in the order given; child ids `<workflowId>/bucket-<day>/r<round>`.
 * @throws ChildWorkflowFailure when a repair fails (e.g. an unreadable bucket).
 */
async function repairBuckets(
  state: RebuildState,
  buckets: string[],
  round: number,
  opts: RepairRoundsOptions,
): Promise<void> {
  const { workflowId, heartbeatTimeoutMs } = opts;
  const { input, carried: st } = state;
  let idx = 0;
  const runOne = async (): Promise<void> => {
    while (idx < buckets.length) {
      const b = buckets[idx++];
      const bucket = b === 'none' ? null : b;
      await executeChild(RepairBucket, {
        workflowId: repairWorkflowId(workflowId, bucket, round),
        args: [{ catalog: input.catalog, source: input.source, versionId: st.versionId, bucket, heartbeatTimeoutMs }],
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(REPAIR_CONCURRENCY, buckets.length) }, runOne));
}
