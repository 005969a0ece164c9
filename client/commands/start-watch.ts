/**
 * What `start` watches once the rebuild started: work no worker takes (no worker polls the task
 * queue, e.g. right after the only worker died) and Ctrl-C (the rebuild goes on). The work is the
 * rebuild's pending workflow task, else its activities when none of them runs and some wait (the
 * pages of a copy whose only worker died: after their heartbeat timeout they wait for a worker).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkflowHandle } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { pendingActivityPage } from '../pending-activity';

/**
 * A rebuild's waiting work as `describe` shows it: its pending workflow task, scheduled (waiting for
 * a worker) or started; or, without one, its activities when none runs and some wait.
 */
export interface PendingTaskSeen {
  /** True while no worker has taken the task (or any of the activities). */
  scheduled: boolean;
  /** When it was (first) scheduled, as the server says; identifies the task across reads (`activities` for activities). */
  scheduledAt: string;
  /** Activities waiting for a worker, none running: how many, and the pages among them. Absent for a workflow task. */
  activities?: { count: number; pages: number[] };
}

const { PENDING_ACTIVITY_STATE_SCHEDULED: ACTIVITY_SCHEDULED } = temporal.api.enums.v1.PendingActivityState;

/**
 * The line `start` prints when the rebuild's workflow task, or its activities, have waited `waitedMs`
 * for a worker (pure): null below `noPollerMs` or when nothing waits.
 */
export function noPollerLine(o: {
  task: PendingTaskSeen | null;
  waitedMs: number;
  taskQueue: string;
  noPollerMs: number;
}): string | null {
  if (!o.task?.scheduled || o.waitedMs < o.noPollerMs) return null;
  const waited = `${Math.round(o.waitedMs / 100) / 10} s`;
  const start = `start one with \`npm run worker\` (CATALOG_REBUILD_TASK_QUEUE=${o.taskQueue}); the rebuild goes on as soon as one polls`;
  const acts = o.task.activities;
  if (!acts)
    return (
      `no worker polls task queue ${o.taskQueue}: the rebuild's workflow task has waited ${waited} and no worker took it ` +
      `(a worker that served it may have died); ${start}`
    );
  const pages = acts.pages.length ? ` (page${acts.pages.length > 1 ? 's' : ''} ${pageList(acts.pages)})` : '';
  const what = acts.count === 1 ? `activity${pages} has` : `${acts.count} activities${pages} have`;
  return (
    `no worker takes the rebuild's work from task queue ${o.taskQueue}: its ${what} waited ${waited} and none runs ` +
    `(the worker that ran them may have died, or every worker's activity slots are busy); ${start}`
  );
}

/** Page numbers as `3, 4, 7` (at most 5, then `… (12 in all)`). */
function pageList(pages: number[]): string {
  const sorted = [...pages].sort((a, b) => a - b);
  return sorted.length <= 5 ? sorted.join(', ') : `${sorted.slice(0, 5).join(', ')}, … (${sorted.length} in all)`;
}

/**
 * The rebuild's pending workflow task; without one, its activities when none runs and at least one
 * waits for a worker now (an activity waiting out a retry backoff, scheduled in the future, does not
 * count); else null. `activities` false: the workflow task only.
 */
export async function pendingTask(
  handle: Pick<WorkflowHandle, 'describe'>,
  now = Date.now(),
  activities = true,
): Promise<PendingTaskSeen | null> {
  const { raw } = await handle.describe();
  const t = raw.pendingWorkflowTask;
  if (t) {
    const at = t.originalScheduledTime ?? t.scheduledTime;
    return {
      scheduled: t.state === temporal.api.enums.v1.PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED,
      scheduledAt: `${at?.seconds ?? ''}.${at?.nanos ?? ''}`,
    };
  }
  const acts = activities ? (raw.pendingActivities ?? []) : [];
  if (!acts.length || acts.some((a) => a.state !== ACTIVITY_SCHEDULED)) return null;
  const waiting = acts.filter((a) => (optionalTsToMs(a.scheduledTime) ?? 0) <= now);
  if (!waiting.length) return null;
  const pages = waiting.map(pendingActivityPage).filter((p): p is number => p !== null);
  return { scheduled: true, scheduledAt: 'activities', activities: { count: waiting.length, pages } };
}

/**
 * What a poller watch saw, kept across watches of one rebuild (`start`'s wait for the plan, then
 * its `--wait`): the waiting task first seen (by its scheduled time, and when on this machine's
 * clock), and the last line printed about it.
 */
export interface PollerWatchMemory {
  seen?: { at: string; since: number };
  noted?: { at: string; time: number };
}

/**
 * Watches the rebuild's waiting work ({@link pendingTask}) until `signal` aborts: when it waits `noPollerMs` for a
 * worker (timed on this machine's clock from when it was first seen), prints {@link noPollerLine}
 * on `note`. Without `repeatMs` that is once, and the watch ends; with it, the line is printed again
 * every `repeatMs` while a task still waits, and for each later task that waits. With `memory`,
 * a watch goes on from where an earlier one left off (the same task's wait and last line). Describe
 * errors are ignored (the receipt reports what it sees).
 */
export async function watchForPoller(
  handle: WorkflowHandle,
  o: {
    taskQueue: string;
    settings: { noPollerMs: number; pollMs: number };
    note: (line: string) => void;
    signal: AbortSignal;
    repeatMs?: number;
    memory?: PollerWatchMemory;
    /** False: watch the workflow task only (a dry run, whose activity may wait for a busy worker's slot). */
    activities?: boolean;
  },
): Promise<void> {
  const m = o.memory ?? {};
  while (!o.signal.aborted) {
    const { seen, noted } = m;
    // A describe that fails says nothing about the wait: the memory stays as it is.
    const read = await pendingTask(handle, Date.now(), o.activities ?? true).catch(() => undefined);
    const task = read ?? null;
    if (task?.scheduled && seen?.at !== task.scheduledAt) m.seen = { at: task.scheduledAt, since: Date.now() };
    // Activities that waited and then ran: a later wait is timed afresh.
    if (read !== undefined && !task?.scheduled && seen?.at === 'activities') {
      m.seen = undefined;
      if (noted?.at === 'activities') m.noted = undefined;
    }
    const line = noPollerLine({
      task,
      waitedMs: m.seen && task?.scheduled ? Date.now() - m.seen.since : 0,
      taskQueue: o.taskQueue,
      noPollerMs: o.settings.noPollerMs,
    });
    const again = !noted || noted.at !== task?.scheduledAt || Date.now() - noted.time >= (o.repeatMs ?? Infinity);
    if (line && again && !o.signal.aborted) {
      o.note(line);
      m.noted = { at: task!.scheduledAt, time: Date.now() };
      if (o.repeatMs === undefined) return;
    }
    // Every 0.5 s for the first line; at most every 2 s while a whole --wait is watched. The pause
    // ends when the watch is aborted: the command it watches has its answer and exits at once.
    const pauseMs = Math.min(o.settings.pollMs, o.repeatMs === undefined ? 500 : 2_000);
    await sleep(pauseMs, undefined, { signal: o.signal }).catch(() => undefined);
  }
}

/**
 * Runs `fn` while {@link watchForPoller} watches the rebuild (with `o.repeatMs`, for as long as
 * `fn` runs); the watch ends with `fn`.
 */
export async function whileWatchingPollers<T>(
  handle: WorkflowHandle,
  o: {
    taskQueue: string;
    settings: { noPollerMs: number; pollMs: number };
    note: (line: string) => void;
    repeatMs?: number;
    memory?: PollerWatchMemory;
  },
  fn: () => Promise<T>,
): Promise<T> {
  const watching = new AbortController();
  const watch = watchForPoller(handle, { ...o, signal: watching.signal });
  try {
    return await fn();
  } finally {
    watching.abort();
    await watch;
  }
}

/** What `start` prints when Ctrl-C stops it after the rebuild started: the rebuild goes on, and how to follow it. */
export function interruptedLines(catalog: string, workflowId: string): string[] {
  return [
    `interrupted: rebuild ${workflowId} goes on; Ctrl-C stopped only this command`,
    `  follow it:        catalog-rebuild status --catalog ${catalog} --follow`,
    `  wait for its end: catalog-rebuild wait --catalog ${catalog}`,
    `  stop it:          catalog-rebuild cancel --catalog ${catalog}`,
  ];
}

/**
 * Until the returned function is called, SIGINT (Ctrl-C) prints `lines` on `note` and then ends the
 * process as SIGINT does (the handler removes itself and raises the signal again).
 */
export function onInterrupt(lines: string[], note: (line: string) => void): () => void {
  const handler = (): void => {
    for (const l of lines) note(l);
    process.kill(process.pid, 'SIGINT');
  };
  process.once('SIGINT', handler);
  return () => process.removeListener('SIGINT', handler);
}
