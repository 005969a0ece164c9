/** The `recordEvent` activity: phase changes reported by the workflow, in the catalog's event log. */
import type { RecordEventInput } from '../workflows/activity-types';
import type { ActivityContext } from './context';
import { guard } from './failures';

/** Appends an event to the catalog's log; the event log adds the worker's build id to its details. */
export async function recordEvent(ctx: ActivityContext, input: RecordEventInput): Promise<void> {
  return guard(() => ctx.events.record(ctx.pool, input));
}
