/**
 * What `start` watches once the rebuild started: a workflow task no worker takes (no worker polls
 * the task queue, e.g. right after the only worker died) and Ctrl-C (the rebuild goes on).
 */
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

/** A rebuild's pending workflow task as `describe` shows it: scheduled (waiting for a worker) or started. */
export interface PendingTaskSeen {
  /** True while no worker has taken the task. */
  scheduled: boolean;
  /** When it was (first) scheduled, as the server says; identifies the task across reads. */
  scheduledAt: string;
}

/**
 * The line `start` prints when the rebuild's workflow task has waited `waitedMs` for a worker (pure):
 * null below `noPollerMs` or when there is no waiting task.
 */
export function noPollerLine(o: {
  task: PendingTaskSeen | null;
  waitedMs: number;
  taskQueue: string;
  noPollerMs: number;
}): string | null {
  if (!o.task?.scheduled || o.waitedMs < o.noPollerMs) return null;
  return (
    `no worker polls task queue ${o.taskQueue}: the rebuild's workflow task has waited ${Math.round(o.waitedMs / 100) / 10} s and no worker took it ` +
    `(a worker that served it may have died); start one with \`npm run worker\` (CATALOG_REBUILD_TASK_QUEUE=${o.taskQueue}); the rebuild goes on as soon as one polls`
  );
}

/** The rebuild's pending workflow task, or null when it has none. */
async function pendingTask(handle: WorkflowHandle): Promise<PendingTaskSeen | null> {
  const t = (await handle.describe()).raw.pendingWorkflowTask;
  if (!t) return null;
  const at = t.originalScheduledTime ?? t.scheduledTime;
  return {
    scheduled: t.state === temporal.api.enums.v1.PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED,
    scheduledAt: `${at?.seconds ?? ''}.${at?.nanos ?? ''}`,
  };
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
 * Watches the rebuild's workflow task until `signal` aborts: when one waits `noPollerMs` for a
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
  },
): Promise<void> {
  const m = o.memory ?? {};
  while (!o.signal.aborted) {
    const { seen, noted } = m;
    const task = await pendingTask(handle).catch(() => null);
    if (task?.scheduled && seen?.at !== task.scheduledAt) m.seen = { at: task.scheduledAt, since: Date.now() };
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
    // Every 0.5 s for the first line; at most every 2 s while a whole --wait is watched.
    await new Promise((r) => setTimeout(r, Math.min(o.settings.pollMs, o.repeatMs === undefined ? 500 : 2_000)));
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
