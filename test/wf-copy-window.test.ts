/**
 * RebuildCatalog's copy window in process, over mocked activities: at most `concurrency` pages in
 * flight, `setThrottle` narrowing and widening the window and spacing page starts, pages retried by
 * their retry policy after a retryable failure, and a non-retryable one (VERSION_FENCED) failing the
 * rebuild at once.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import type { RebuildCatalogResult } from '../workflows/definitions';
import { setThrottleUpdate } from '../workflows/definitions';
import { MockActivities } from '../dev/harness/mock-activities';
import type { HistoryEvent, InProcessEnv } from '../dev/harness/workflow-test';
import {
  history,
  inProcessEnv,
  phaseAttribute,
  pick,
  progress,
  scheduledActivities,
  startRebuild,
  uniqueCatalog,
  waitForProgress,
  withWorker,
  workflowFailure,
} from '../dev/harness/workflow-test';

let ctx: InProcessEnv;
before(async () => {
  ctx = await inProcessEnv();
});
after(async () => {
  await ctx?.env.teardown();
});

const pageIds = (n: number) => Array.from({ length: n }, (_, i) => `page-${i + 1}`);

/** Each `copyPage` scheduled: its event index and the workflow time (ms) of the task that scheduled it. */
function pageStarts(events: HistoryEvent[]): { index: number; ms: number }[] {
  const out: { index: number; ms: number }[] = [];
  let taskStarted = 0;
  events.forEach((e, index) => {
    if (e.workflowTaskStartedEventAttributes)
      taskStarted = Number(e.eventTime!.seconds) * 1000 + e.eventTime!.nanos! / 1e6;
    if (e.activityTaskScheduledEventAttributes?.activityType?.name === 'copyPage') out.push({ index, ms: taskStarted });
  });
  return out;
}

test('at most N pages in flight; setThrottle narrows the window (no page starts above it) and widens it; a refused update leaves no trace', async () => {
  const catalog = uniqueCatalog('window');
  const mock = new MockActivities({ catalog, source: 's', pages: 12 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 3 });
    await waitForProgress(handle, '3 pages in flight', (p) => p.inFlight === 3);
    await mock.waitForCalls('copyPage', 3);
    assert.deepEqual(mock.pagesStarted(), [1, 2, 3]);
    mock.release(1);
    await mock.waitForHeld(4);
    assert.equal((await waitForProgress(handle, 'page 1 committed', (p) => p.checkpoint === 1)).inFlight, 3);
    assert.deepEqual(mock.pagesStarted(), [1, 2, 3, 4], 'one page ended, one started');

    const narrowed = await handle.executeUpdate(setThrottleUpdate, { args: [{ concurrency: 1 }] });
    assert.deepEqual(narrowed, { concurrency: 1, pauseBetweenPagesMs: 0 });
    const p1 = await progress(handle);
    assert.equal(p1.concurrency, 1);
    assert.equal(p1.lastEvent, 'throttle set: 1 pages in flight, 0 ms between pages');
    for (const [page, inFlight] of [
      [2, 2],
      [3, 1],
    ]) {
      mock.release(page);
      const p = await waitForProgress(handle, `page ${page} committed`, (q) => q.pagesDone === page);
      assert.equal(p.inFlight, inFlight);
      // The query saw the commit, so the workflow task that took it is complete: a page it had
      // scheduled would be in the history.
      assert.deepEqual(
        scheduledActivities(await history(ctx, workflowId), 'copyPage').map((a) => a.activityId),
        pageIds(4),
        `no page starts with ${inFlight} in flight above 1`,
      );
    }
    mock.release(4);
    await mock.waitForHeld(5);
    await waitForProgress(handle, 'page 4 committed', (p) => p.pagesDone === 4 && p.inFlight === 1);
    assert.deepEqual(mock.pagesStarted(), [1, 2, 3, 4, 5], 'one page at a time');

    for (const [bad, message] of [
      [{ concurrency: 65 }, /concurrency must be an integer from 1 to 64, got 65/],
      [{ pauseBetweenPagesMs: -1 }, /pauseBetweenPagesMs must be an integer from 0 to 3600000/],
      [{}, /setThrottle needs concurrency and\/or pauseBetweenPagesMs/],
    ] as const) {
      await assert.rejects(handle.executeUpdate(setThrottleUpdate, { args: [bad] }), (err: Error) =>
        message.test(String((err.cause as Error | undefined)?.message)),
      );
    }
    assert.equal((await progress(handle)).concurrency, 1, 'a refused update changes nothing');

    await handle.executeUpdate(setThrottleUpdate, { args: [{ concurrency: 5 }] });
    await waitForProgress(handle, '5 pages in flight', (p) => p.inFlight === 5);
    await mock.waitForCalls('copyPage', 9);
    assert.deepEqual(mock.pagesStarted(), [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.equal(mock.maxPagesRunning, 5);

    mock.releasePages(true);
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.equal(r.published, true);
    assert.equal(r.rowsUpserted, 120);
    assert.equal(mock.maxPagesRunning, 5, 'never more pages running than the window');
    assert.deepEqual(
      mock
        .callsOf('recordEvent')
        .filter((c) => c.input.kind === 'throttled')
        .map((c) => c.input.message),
      ['throttle set: 1 pages in flight, 0 ms between pages', 'throttle set: 5 pages in flight, 0 ms between pages'],
      'each accepted throttle is an event of the catalog; refused ones are not',
    );
    const events = await history(ctx, workflowId);
    const pages = scheduledActivities(events, 'copyPage');
    assert.deepEqual(
      pages.map((a) => a.activityId),
      pageIds(12),
    );
    assert.ok(
      pages.every((a) => a.heartbeatTimeoutS === 15),
      'page heartbeat timeout defaults to 15 s',
    );
    await assertLongStepHeartbeat(workflowId, 30);
    const accepted = events.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes);
    assert.equal(accepted.length, 2, 'only the two valid updates are in the history');
    assert.deepEqual(mock.inputErrors, []);
  });
});

test('pauseBetweenPagesMs spaces page starts in workflow time; setThrottle to 0 starts the rest at once', async () => {
  const catalog = uniqueCatalog('spacing');
  const mock = new MockActivities({ catalog, source: 's', pages: 6 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, {
      catalog,
      source: 's',
      concurrency: 6,
      pauseBetweenPagesMs: 700,
      heartbeatTimeoutMs: 5_000,
    });
    await mock.waitForHeld(3);
    const set = await handle.executeUpdate(setThrottleUpdate, { args: [{ pauseBetweenPagesMs: 0 }] });
    assert.deepEqual(set, { concurrency: 6, pauseBetweenPagesMs: 0 });
    await waitForProgress(handle, '6 pages in flight', (p) => p.inFlight === 6);
    mock.releasePages(true);
    assert.equal(((await handle.result()) as RebuildCatalogResult).published, true);

    const events = await history(ctx, workflowId);
    const updateAt = events.findIndex((e) => e.workflowExecutionUpdateAcceptedEventAttributes);
    const starts = pageStarts(events);
    const before = starts.filter((s) => s.index < updateAt);
    const after = starts.filter((s) => s.index > updateAt);
    assert.ok(before.length >= 3, `${before.length} pages started before the update`);
    for (let i = 1; i < before.length; i++)
      assert.ok(
        before[i].ms - before[i - 1].ms >= 700,
        `page ${i + 1} ${before[i].ms - before[i - 1].ms} ms after the one before`,
      );
    assert.ok(after.length >= 2, `${after.length} pages started after the update`);
    assert.ok(
      after.every((s) => s.ms === after[0].ms),
      'the pages left start in one workflow task',
    );
    assert.ok(
      events.some((e) => e.timerStartedEventAttributes),
      'the spacing is a workflow timer',
    );
    const pages = scheduledActivities(events, 'copyPage');
    assert.ok(pages.every((a) => a.heartbeatTimeoutS === 5));
    await assertLongStepHeartbeat(workflowId, 10);
  });
});

/** Asserts that the rebuild's long steps (and its publish child's) heartbeat with timeout `seconds`. */
async function assertLongStepHeartbeat(workflowId: string, seconds: number): Promise<void> {
  const steps = [
    ...scheduledActivities(await history(ctx, workflowId)),
    ...scheduledActivities(await history(ctx, `${workflowId}/publish`)),
  ].filter((a) => ['sealVersion', 'indexVersion', 'reconcile', 'publishVersion', 'retireVersions'].includes(a.type));
  assert.deepEqual([...new Set(steps.map((a) => a.type))].sort(), [
    'indexVersion',
    'publishVersion',
    'reconcile',
    'retireVersions',
    'sealVersion',
  ]);
  for (const a of steps)
    assert.equal(a.heartbeatTimeoutS, seconds, `${a.type}: long steps heartbeat timeout is 2 × the page's`);
}

test('retryable page failures are retried by the page retry policy (one schedule each); retries counted', async () => {
  const catalog = uniqueCatalog('retry');
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 4,
    holdPages: false,
    pageFailure: (pageNo, attempt) => {
      if (attempt > 1) return undefined;
      if (pageNo === 2)
        return ApplicationFailure.retryable('transient database error: connection reset', 'DB_TRANSIENT');
      if (pageNo === 3) return new Error('socket hang up');
      return undefined;
    },
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 2 });
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.deepEqual(pick(r, ['published', 'rowsUpserted', 'retries', 'pagesTotal']), {
      published: true,
      rowsUpserted: 40,
      retries: 2,
      pagesTotal: 4,
    });
    const attempts = (page: number) =>
      mock
        .callsOf('copyPage')
        .filter((c) => c.input.pageNo === page)
        .map((c) => [c.attempt, c.outcome]);
    assert.deepEqual(attempts(1), [[1, 'returned']]);
    assert.deepEqual(attempts(2), [
      [1, 'failed'],
      [2, 'returned'],
    ]);
    assert.deepEqual(attempts(3), [
      [1, 'failed'],
      [2, 'returned'],
    ]);
    const p = await progress(handle);
    assert.deepEqual(pick(p, ['phase', 'retries', 'checkpoint']), { phase: 'done', retries: 2, checkpoint: 4 });
    const copied = mock.callsOf('recordEvent').find((c) => c.input.kind === 'copied');
    assert.equal((copied?.input.details as { retries: number }).retries, 2);

    const events = await history(ctx, workflowId);
    assert.deepEqual(
      scheduledActivities(events, 'copyPage').map((a) => a.activityId),
      pageIds(4),
      'a retry is not a new schedule: Temporal retries the activity',
    );
    const started = events
      .map((e) => e.activityTaskStartedEventAttributes)
      .filter((a) => a && a.attempt! > 1)
      .map((a) => a!.lastFailure?.message)
      .sort();
    assert.deepEqual(started, ['socket hang up', 'transient database error: connection reset']);
    assert.equal(
      events.filter((e) => e.activityTaskFailedEventAttributes).length,
      0,
      'no page failed for the workflow',
    );
  });
});

test('VERSION_FENCED on a page fails the rebuild at once: not retried, no page started after it, the version failed, nothing sealed', async () => {
  const catalog = uniqueCatalog('fenced');
  const message = 'version 7 is abandoned, not building: write refused';
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 6,
    // Thrown as retryable: the page retry policy lists the type as non-retryable.
    pageFailure: (pageNo) => (pageNo === 3 ? ApplicationFailure.retryable(message, 'VERSION_FENCED') : undefined),
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 3 });
    await assert.rejects(handle.result(), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError);
      assert.ok(err.cause instanceof ActivityFailure, String(err.cause));
      const app = err.cause.cause;
      assert.ok(app instanceof ApplicationFailure);
      assert.deepEqual([app.type, app.message], ['VERSION_FENCED', message]);
      return true;
    });
    assert.deepEqual(
      mock
        .callsOf('copyPage')
        .filter((c) => c.input.pageNo === 3)
        .map((c) => c.attempt),
      [1],
      'not retried',
    );
    // Pages 1 and 2 were scheduled with page 3; the history (below) shows no page after them.
    assert.ok(
      mock.pagesStarted().every((p) => p <= 3),
      'no page started after the failure',
    );
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input),
      [{ catalog, versionId: '7', status: 'failed', reason: message }],
    );
    assert.deepEqual(
      mock.calls.filter((c) => !['planRebuild', 'copyPage', 'endVersion'].includes(c.name)).map((c) => c.name),
      [],
      'not sealed, no copy-phase event',
    );
    const p = await progress(handle);
    assert.equal(p.phase, 'failed');
    assert.equal(p.lastEvent, `failed: ${message}`);
    assert.equal(await phaseAttribute(handle), 'failed');

    const events = await history(ctx, workflowId);
    assert.deepEqual(
      scheduledActivities(events, 'copyPage').map((a) => a.activityId),
      pageIds(3),
    );
    assert.equal(events.filter((e) => e.activityTaskFailedEventAttributes).length, 1);
    const failure = workflowFailure(events);
    assert.equal(failure?.cause?.applicationFailureInfo?.type, 'VERSION_FENCED');
  });
});
