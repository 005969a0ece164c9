/**
 * The schedule's part of `check --rebuild`, gathered: describes the catalog's Temporal Schedule and
 * its recent runs (client/schedule.ts) and merges the verdict of `evaluateScheduleHealth`
 * (client/schedule-health.ts) into the rebuild's.
 */
import type { Client } from '@temporalio/client';
import { describeSchedule } from './schedule';
import type { CheckVerdict } from './schedule-health';
import { evaluateScheduleHealth, mergeScheduleVerdict, scheduleFactsOf } from './schedule-health';

/**
 * `health` with the verdict on the schedule of `catalog` merged in; unchanged when the catalog has
 * no schedule. A schedule Temporal cannot describe adds a clause saying so and changes no state.
 */
export async function withScheduleHealth<T extends CheckVerdict>(
  health: T,
  client: Client,
  catalog: string,
): Promise<T> {
  try {
    const view = await describeSchedule(client, catalog);
    return mergeScheduleVerdict(health, view && evaluateScheduleHealth(scheduleFactsOf(view), Date.now()));
  } catch (err) {
    const text = `${health.text}; schedule unreadable: ${(err as Error).message}`.replace(/[\r\n|]+/g, ' ');
    return { ...health, text, line: health.line.replace(health.text, text) };
  }
}
