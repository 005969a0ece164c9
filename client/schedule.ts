/**
 * Scheduled refreshes on Temporal Schedules (`catalog-rebuild schedule`): the client library over
 * the SDK's ScheduleClient. A catalog's schedule has id `catalog-rebuild/<catalog>`; its action
 * starts the `ScheduledRefresh` launcher (workflow id `catalog-rebuild/<catalog>/scheduled`, to which
 * Temporal appends the scheduled time), which starts or attaches to the refresh under
 * `catalog-rebuild/<catalog>`. Overlap policy skip, catch-up window 24 h, no pause on failure.
 */
import type { Client, ScheduleDescription, ScheduleSpec } from '@temporalio/client';
import { ScheduleAlreadyRunning, ScheduleNotFoundError, WorkflowFailedError } from '@temporalio/client';
import { z } from 'zod';
import type { ScheduledRefreshInput, ScheduledRefreshResult } from '../workflows/schedule-definitions';
import { catalogOfScheduleId, scheduledRefreshWorkflowId, scheduleId } from '../workflows/names';
import { CatalogNameKey } from '../workflows/search-attributes';
import { formatDuration, parseDuration } from './check';
import { rootMessage } from '../workflows/failure-text';

/** The launcher's workflow type, the schedule's action. */
export const SCHEDULED_REFRESH_WORKFLOW = 'ScheduledRefresh';
/** Catch-up window of every schedule (ms): runs missed while the Temporal service was down for less run once it is back. */
export const SCHEDULE_CATCHUP_WINDOW_MS = 24 * 3600 * 1000;
/** Shortest `--every` (s). */
export const MIN_EVERY_SECONDS = 60;
/** Recent runs whose launchers are described for their outcome, at most (the server keeps about 10). */
const MAX_RUNS_DESCRIBED = 10;

/** What `schedule --catalog C --source S (--every D | --cron C) [--files]` asks for, validated. */
export const ScheduleRequest = z
  .object({
    catalog: z.string().min(1),
    source: z.string().min(1, 'needs a source name'),
    every: z
      .string()
      .transform((text, c) => {
        try {
          return parseDuration(text);
        } catch (e) {
          c.addIssue({ code: 'custom', message: (e as Error).message });
          return z.NEVER;
        }
      })
      .refine((s) => s >= MIN_EVERY_SECONDS, `--every must be at least ${formatDuration(MIN_EVERY_SECONDS)}`)
      .optional(),
    cron: z
      .string()
      .trim()
      .regex(/^(@\w+|(\S+\s+){4,6}\S+)$/, 'a cron expression of 5 to 7 fields (e.g. "0 2 * * *") or @daily, @hourly')
      .optional(),
    files: z.boolean().default(false),
  })
  .refine((o) => (o.every === undefined) !== (o.cron === undefined), 'give exactly one of --every and --cron');
/** A validated schedule request (`every` in seconds). */
export type ScheduleRequest = z.output<typeof ScheduleRequest>;

/** When a request runs, in words: `every 1h` or `cron "0 2 * * *"`. */
export function cadenceText(r: Pick<ScheduleRequest, 'every' | 'cron'>): string {
  return r.every !== undefined ? `every ${formatDuration(r.every)}` : `cron "${r.cron}"`;
}

/** The Temporal spec of a request: one interval, or one cron expression (UTC unless it names a zone). */
function specOf(r: ScheduleRequest): ScheduleSpec {
  return r.every !== undefined ? { intervals: [{ every: r.every * 1000 }] } : { cronExpressions: [r.cron!] };
}

/** The schedule's action: the launcher on `taskQueue` with the request's catalog, source and files. */
function actionOf(r: ScheduleRequest, taskQueue: string) {
  const input: ScheduledRefreshInput = { catalog: r.catalog, source: r.source, ...(r.files ? { files: true } : {}) };
  return {
    type: 'startWorkflow' as const,
    workflowType: SCHEDULED_REFRESH_WORKFLOW,
    workflowId: scheduledRefreshWorkflowId(r.catalog),
    taskQueue,
    args: [input],
    staticSummary: `Scheduled refresh of catalog ${r.catalog} from source ${r.source}${r.files ? ' with files' : ''}, ${cadenceText(r)}`,
    typedSearchAttributes: [{ key: CatalogNameKey, value: r.catalog }],
  };
}

/**
 * Creates the schedule `catalog-rebuild/<catalog>` of `r`, or updates it (spec, action, policies;
 * its paused state and note are kept).
 * @returns whether it was created (false: updated).
 * @throws the server's error for a spec it refuses (e.g. a malformed cron expression).
 */
export async function upsertSchedule(client: Client, r: ScheduleRequest, taskQueue: string): Promise<boolean> {
  const policies = { overlap: 'SKIP' as const, catchupWindow: SCHEDULE_CATCHUP_WINDOW_MS, pauseOnFailure: false };
  const spec = specOf(r);
  const action = actionOf(r, taskQueue);
  try {
    await client.schedule.create({ scheduleId: scheduleId(r.catalog), spec, action, policies });
    return true;
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  await client.schedule.getHandle(scheduleId(r.catalog)).update((prev) => ({ ...prev, spec, action, policies }));
  return false;
}

/** One run of a schedule (a recent action): its launcher and how it ended. */
export interface ScheduledRun {
  /** The launcher's workflow id (`catalog-rebuild/<catalog>/scheduled-<time>`) and run id. */
  workflowId: string;
  runId: string;
  /** Scheduled time and the time the schedule took the action (ms since epoch). */
  scheduledAtMs: number;
  takenAtMs: number;
  /** The launcher's Temporal status (RUNNING, COMPLETED, FAILED, TERMINATED, TIMED_OUT, …); UNKNOWN when not found. */
  status: string;
  /** Close time of a closed launcher (ms since epoch); null while it runs. */
  closedAtMs: number | null;
  /** A completed launcher's outcome (published, up-to-date, not-published, skipped); null otherwise. */
  outcome: ScheduledRefreshResult['outcome'] | null;
  /** The outcome's or the failure's message; null while running. */
  message: string | null;
}

/** A catalog's schedule as `describe` shows it, with the outcomes of its recent runs. */
export interface ScheduleView {
  scheduleId: string;
  catalog: string;
  /** The launcher's input (source, files) from the action. */
  input: ScheduledRefreshInput;
  /** The action's summary (`Scheduled refresh of catalog … every 1h`). */
  summary: string;
  taskQueue: string;
  paused: boolean;
  note: string | null;
  /** Interval of an `--every` schedule (s); null for a cron schedule. */
  everySeconds: number | null;
  /** Next scheduled times (ms since epoch), soonest first. */
  nextRunsMs: number[];
  /** Recent runs, oldest first (Temporal keeps the last 10). */
  recent: ScheduledRun[];
  /** Launchers running now (workflow ids). */
  running: string[];
  createdAtMs: number;
  overlap: string;
  catchupWindowMs: number;
  /** Runs skipped because the previous one still ran; runs missed beyond the catch-up window. */
  skippedOverlap: number;
  missedCatchup: number;
}

/** Status, close time and outcome of one launcher run. */
async function runOf(client: Client, a: ScheduleDescription['info']['recentActions'][number]): Promise<ScheduledRun> {
  const { workflowId, firstExecutionRunId: runId } = a.action.workflow;
  const run: ScheduledRun = {
    workflowId,
    runId,
    scheduledAtMs: a.scheduledAt.getTime(),
    takenAtMs: a.takenAt.getTime(),
    status: 'UNKNOWN',
    closedAtMs: null,
    outcome: null,
    message: null,
  };
  const handle = client.workflow.getHandle(workflowId, runId);
  try {
    const d = await handle.describe();
    run.status = d.status.name;
    run.closedAtMs = d.closeTime?.getTime() ?? null;
  } catch {
    return run; // past retention, or not visible yet
  }
  if (run.status === 'RUNNING') return run;
  try {
    const r = (await handle.result()) as ScheduledRefreshResult;
    run.outcome = r.outcome;
    run.message = r.message;
  } catch (err) {
    run.message = err instanceof WorkflowFailedError ? rootMessage(err) : (err as Error).message;
  }
  return run;
}

/**
 * Describes the schedule of `catalog` and the launchers of its recent runs (at most 10).
 * @returns null when the catalog has no schedule.
 */
export async function describeSchedule(client: Client, catalog: string): Promise<ScheduleView | null> {
  let d: ScheduleDescription;
  try {
    d = await client.schedule.getHandle(scheduleId(catalog)).describe();
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return null;
    throw err;
  }
  const actions = d.info.recentActions.slice(-MAX_RUNS_DESCRIBED);
  const recent = await Promise.all(actions.map((a) => runOf(client, a)));
  const input = (d.action.args?.[0] ?? { catalog, source: '?' }) as ScheduledRefreshInput;
  return {
    scheduleId: d.scheduleId,
    catalog,
    input,
    summary: typeof d.action.staticSummary === 'string' ? d.action.staticSummary : '',
    taskQueue: d.action.taskQueue,
    paused: d.state.paused,
    note: d.state.note || null,
    everySeconds: d.spec.intervals?.length ? Math.round(d.spec.intervals[0].every / 1000) : null,
    nextRunsMs: d.info.nextActionTimes.map((t) => t.getTime()),
    recent,
    running: d.info.runningActions.map((a) => a.workflow.workflowId),
    createdAtMs: d.info.createdAt.getTime(),
    overlap: String(d.policies.overlap),
    catchupWindowMs: d.policies.catchupWindow,
    skippedOverlap: d.info.numActionsSkippedOverlap,
    missedCatchup: d.info.numActionsMissedCatchupWindow,
  };
}

/** One line of `schedule --list`. */
export interface ScheduleListEntry {
  catalog: string;
  scheduleId: string;
  paused: boolean;
  /** Next scheduled time and the newest run's time (ms since epoch); null when none. */
  nextRunMs: number | null;
  lastRunMs: number | null;
}

/**
 * Every catalog's schedule on the namespace (ids `catalog-rebuild/<catalog>` whose action is the
 * launcher), sorted by catalog. Temporal's schedule list is eventually consistent: a schedule made
 * a moment ago may be missing for a second.
 */
export async function listSchedules(client: Client): Promise<ScheduleListEntry[]> {
  const out: ScheduleListEntry[] = [];
  for await (const s of client.schedule.list()) {
    const catalog = catalogOfScheduleId(s.scheduleId);
    if (!catalog || s.action?.workflowType !== SCHEDULED_REFRESH_WORKFLOW) continue;
    const last = s.info.recentActions.at(-1);
    out.push({
      catalog,
      scheduleId: s.scheduleId,
      paused: s.state.paused,
      nextRunMs: s.info.nextActionTimes[0]?.getTime() ?? null,
      lastRunMs: last ? last.takenAt.getTime() : null,
    });
  }
  return out.sort((a, b) => (a.catalog < b.catalog ? -1 : a.catalog > b.catalog ? 1 : 0));
}

/** What {@link deleteSchedule} removed. */
export interface DeletedSchedule {
  /** Launchers that were running, now cancelled (the refresh they waited for keeps running under its own id). */
  cancelledLaunchers: string[];
}

/**
 * Deletes the schedule of `catalog` and cancels its running launchers (a launcher only waits; the
 * refresh it started keeps running as `catalog-rebuild/<catalog>`, and `cancel` ends it).
 * @returns null when the catalog has no schedule.
 */
export async function deleteSchedule(client: Client, catalog: string): Promise<DeletedSchedule | null> {
  const handle = client.schedule.getHandle(scheduleId(catalog));
  let running: string[];
  try {
    running = (await handle.describe()).info.runningActions.map((a) => a.workflow.workflowId);
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return null;
    throw err;
  }
  await handle.delete();
  // A launcher that ended meanwhile cannot be cancelled, and needs not be.
  for (const id of running)
    await client.workflow
      .getHandle(id)
      .cancel()
      .catch(() => undefined);
  return { cancelledLaunchers: running };
}
