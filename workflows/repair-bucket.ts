/** RepairBucket: re-copies one mismatched bucket from the source and verifies it. */
import { log, setWorkflowOptions } from '@temporalio/workflow';
import type { RepairBucketInput, RepairBucketResult } from './definitions';
import { longSteps } from './activity-options';

/**
 * Child workflow `catalog-rebuild/<catalog>/bucket-<day>/r<round>`: one repair of one bucket.
 * Writes require the version to be building or verifying (fenced in the activity).
 */
export async function RepairBucket(input: RepairBucketInput): Promise<RepairBucketResult> {
  const { heartbeatTimeoutMs, ...repair } = input;
  const result = await longSteps(heartbeatTimeoutMs).repairBucket(repair);
  log.info('bucket repaired', {
    bucket: input.bucket,
    upserted: result.upserted,
    deleted: result.deleted,
    ok: result.ok,
  });
  return result;
}
// A child starts on its parent's build and stays there: one rebuild, one build (docs/operations.md).
setWorkflowOptions({ versioningBehavior: 'PINNED' }, RepairBucket);
