/** The `retireVersions` activity: retention after a publish (design.md, "Partitions"). */
import { deleteStagedRecordsOfFinishedVersions, leftoverVersionIds, retiredBeyondRetention } from '../lib/catalog';
import type { RetireVersionsInput, RetireVersionsResult } from '../workflows/activity-types';
import type { ActivityContext } from './context';
import { dropVersions } from './drop-versions';
import { guard } from './failures';
import { withHeartbeat } from './heartbeat';
import { withLongSession } from '../lib/db';

/**
 * Retires versions beyond retention after a publish: keeps the `retention` most recently
 * published retired versions with their rows; detaches (CONCURRENTLY, with lock_timeout) and drops
 * the rest, and finishes interrupted drops. Staged listings of published, retired and dropped
 * versions are deleted (they are only read while a version is built and verified). Heartbeats from a
 * timer; the detach, drop and deletes run on sessions without statement timeout.
 * @returns the version ids whose rows were dropped now.
 */
export async function retireVersions(ctx: ActivityContext, input: RetireVersionsInput): Promise<RetireVersionsResult> {
  return withHeartbeat(
    () => ({ stage: 'retiring' }),
    () =>
      guard(async () => {
        const old = await retiredBeyondRetention(ctx.pool, input.catalog, input.retention);
        const leftovers = await leftoverVersionIds(ctx.pool, input.catalog);
        await withLongSession(ctx.pool, (c) => deleteStagedRecordsOfFinishedVersions(c, input.catalog));
        return dropVersions(ctx, input.catalog, [...old, ...leftovers]);
      }),
  );
}
