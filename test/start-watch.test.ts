/**
 * `start`'s watch for work no worker takes (client/commands/start-watch.ts), in process: the
 * rebuild's `describe` is a scripted sequence of what the server answers (pending workflow task,
 * pending activities), so every state is exact and nothing waits on a server.
 */
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { msToTs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import type { PendingTaskSeen } from '../client/commands/start-watch';
import { noPollerLine, pendingTask, watchForPoller, whileWatchingPollers } from '../client/commands/start-watch';

const { PENDING_ACTIVITY_STATE_SCHEDULED: SCHEDULED, PENDING_ACTIVITY_STATE_STARTED: STARTED } =
  temporal.api.enums.v1.PendingActivityState;
type Activity = temporal.api.workflow.v1.IPendingActivityInfo;

const ts = (ms: number) => msToTs(ms);
const page = (n: number, state: number, scheduledMs = Date.now() - 1_000): Activity => ({
  activityId: `page-${n}`,
  state,
  scheduledTime: ts(scheduledMs),
});

/** A handle whose `describe` answers `states[i]` on its i-th call (the last one from then on). */
function scripted(states: { activities?: Activity[]; workflowTask?: 'scheduled' | 'started' }[]) {
  let i = 0;
  return {
    calls: () => i,
    describe: async () => {
      const s = states[Math.min(i++, states.length - 1)];
      const task = s.workflowTask
        ? {
            state:
              s.workflowTask === 'scheduled'
                ? temporal.api.enums.v1.PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
                : temporal.api.enums.v1.PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED,
            originalScheduledTime: ts(1_000),
          }
        : null;
      return { raw: { pendingWorkflowTask: task, pendingActivities: s.activities ?? [] } } as never;
    },
  };
}

test('pendingTask: activities count only when none runs and some wait now; a workflow task comes first', async () => {
  const now = Date.now();
  const seen = (states: Parameters<typeof scripted>[0][number]) => pendingTask(scripted([states]), now);
  assert.deepEqual(await seen({ activities: [page(4, SCHEDULED), page(3, SCHEDULED)] }), {
    scheduled: true,
    scheduledAt: 'activities',
    activities: { count: 2, pages: [4, 3] },
  });
  assert.equal(await seen({ activities: [page(3, SCHEDULED), page(4, STARTED)] }), null, 'one runs: a worker is there');
  assert.equal(await seen({ activities: [page(3, SCHEDULED, now + 30_000)] }), null, 'a retry backoff is no wait');
  assert.deepEqual((await seen({ activities: [{ activityId: 'seal', state: SCHEDULED }] }))?.activities, {
    count: 1,
    pages: [],
  });
  assert.equal(await seen({}), null, 'nothing pending');
  const wf = await seen({ workflowTask: 'scheduled', activities: [page(3, SCHEDULED)] });
  assert.equal(wf?.scheduled, true);
  assert.equal(wf?.activities, undefined, 'the workflow task is named, not the activities');
  const onlyTask = await pendingTask(scripted([{ activities: [page(3, SCHEDULED)] }]), now, false);
  assert.equal(onlyTask, null, 'a dry run watches its workflow task only');
});

test('the activities line names the pages and the queue; a workflow task keeps its own line', () => {
  const acts = (pages: number[], count = pages.length): PendingTaskSeen => ({
    scheduled: true,
    scheduledAt: 'activities',
    activities: { count, pages },
  });
  const line = (task: PendingTaskSeen, waitedMs = 31_500) =>
    noPollerLine({ task, waitedMs, taskQueue: 'Q', noPollerMs: 5_000 });
  assert.equal(line(acts([3]), 4_999), null);
  assert.equal(
    line(acts([7, 3])),
    "no worker takes the rebuild's work from task queue Q: its 2 activities (pages 3, 7) have waited 31.5 s and none runs " +
      "(the worker that ran them may have died, or every worker's activity slots are busy); " +
      'start one with `npm run worker` (CATALOG_REBUILD_TASK_QUEUE=Q); the rebuild goes on as soon as one polls',
  );
  assert.match(line(acts([5])) ?? '', /its activity \(page 5\) has waited 31\.5 s/);
  assert.match(line(acts([], 1)) ?? '', /its activity has waited/);
  assert.match(line(acts([9, 8, 7, 6, 5, 4, 3])) ?? '', /\(pages 3, 4, 5, 6, 7, … \(7 in all\)\)/);
  assert.match(
    line({ scheduled: true, scheduledAt: '1.0' })!,
    /^no worker polls task queue Q: the rebuild's workflow task/,
  );
});

test('watchForPoller: activities that wait get the line once they waited noPollerMs; once they ran, a new wait is timed afresh', async () => {
  const waiting = { activities: [page(3, SCHEDULED), page(4, SCHEDULED)] };
  const running = { activities: [page(3, STARTED), page(4, STARTED)] };
  // Polls 1-15 see waiting pages, 16-20 running ones, then waiting pages again.
  const handle = scripted([...Array(15).fill(waiting), ...Array(5).fill(running), waiting]);
  const lines: { line: string; call: number }[] = [];
  const stop = new AbortController();
  // At most 60 polls: a watch that misses the second wait ends, and the assertions say so.
  const bounded = {
    describe: async () => {
      if (handle.calls() >= 60) stop.abort();
      return handle.describe();
    },
  };
  const watch = watchForPoller(bounded as never, {
    taskQueue: 'Q',
    settings: { noPollerMs: 40, pollMs: 10 },
    note: (line) => {
      lines.push({ line, call: handle.calls() });
      if (lines.length === 2) stop.abort();
    },
    signal: stop.signal,
    repeatMs: 60_000,
  });
  await watch;
  assert.equal(lines.length, 2, 'a line for each wait, though the repeat interval had not passed');
  assert.match(lines[0].line, /its 2 activities \(pages 3, 4\) have waited/);
  assert.ok(lines[0].call <= 15, `the first line came during the first wait (poll ${lines[0].call})`);
  assert.ok(lines[1].call > 20, `the second line came during the second wait (poll ${lines[1].call})`);
});

test('whileWatchingPollers ends with its work: the watch stops in its pause, not after it', async () => {
  // Timers stand still unless ticked: a watch that waited its pause out would never end.
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const handle = scripted([{ workflowTask: 'started' }]);
    const settings = { noPollerMs: 60_000, pollMs: 60_000 };
    let watchedWhileWorking = 0;
    const out = await whileWatchingPollers(
      handle as never,
      { taskQueue: 'Q', settings, note: () => undefined, repeatMs: 60_000 },
      async () => {
        // The work ends after the watch's first poll, while the watch sleeps.
        while (handle.calls() === 0) await new Promise((r) => setImmediate(r));
        watchedWhileWorking = handle.calls();
        return 'result';
      },
    );
    assert.equal(out, 'result');
    assert.equal(watchedWhileWorking, 1, 'the watch polled once while the work ran');
    assert.equal(handle.calls(), 1, 'no poll after the work ended');
  } finally {
    mock.timers.reset();
  }
});
