/**
 * RebuildCatalog in process, over mocked activities: the page activities' reports of an operator's
 * pause (`pageActivityPaused` / `pageActivityResumed`) hold and release the copy window; stale and
 * repeated reports change nothing; and Temporal's own activity pause and unpause, sent to the test
 * server, reach the window through the reports a page activity sends.
 */
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Context } from '@temporalio/activity';
import type { WorkflowHandle } from '@temporalio/client';
import type { PageActivityReport, RebuildCatalogResult } from '../workflows/definitions';
import {
  pageActivityPausedSignal,
  pageActivityResumedSignal,
  pauseSignal,
  resumeSignal,
} from '../workflows/definitions';
import type { PageAttemptInfo } from '../dev/harness/mock-activities';
import { MockActivities } from '../dev/harness/mock-activities';
import type { InProcessEnv } from '../dev/harness/workflow-test';
import {
  history,
  inProcessEnv,
  pick,
  progress,
  scheduledActivities,
  signalIndexes,
  startRebuild,
  uniqueCatalog,
  waitForProgress,
  withWorker,
} from '../dev/harness/workflow-test';

let ctx: InProcessEnv;
before(async () => {
  ctx = await inProcessEnv();
});
after(async () => {
  await ctx?.env.teardown();
});

/** Sends a page activity's report to the run it belongs to, as copy-page.ts does. */
const report = (a: PageAttemptInfo, def: typeof pageActivityPausedSignal, workerIdentity = 'w1@host'): Promise<void> =>
  ctx.env.client.workflow
    .getHandle(a.workflowId, a.runId)
    .signal(def, { pageNo: a.pageNo, attempt: a.attempt, workerIdentity });

const paused = (h: WorkflowHandle, pages: number[]) =>
  waitForProgress(
    h,
    `operator-paused pages ${pages.join(', ') || 'none'}`,
    (p) => p.operatorPausedPages.join() === pages.join(),
  );

test('a page reporting an operator pause holds the window until it reports it runs again; progress names it', async () => {
  const catalog = uniqueCatalog('oppause');
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 5,
    onPageStart: (a) => (a.pageNo === 2 ? report(a, pageActivityPausedSignal) : undefined),
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 2 });
    const held = await paused(handle, [2]);
    assert.deepEqual(pick(held, ['paused', 'inFlight', 'draining']), { paused: false, inFlight: 2, draining: false });
    assert.equal(
      held.lastEvent,
      'page 2 paused by an operator (temporal activity pause; attempt 1 on w1@host): no new page starts until it is unpaused',
    );
    mock.release(1);
    const one = await waitForProgress(handle, 'page 1 committed', (p) => p.checkpoint === 1);
    assert.deepEqual(pick(one, ['inFlight', 'operatorPausedPages']), { inFlight: 1, operatorPausedPages: [2] });
    assert.deepEqual(
      scheduledActivities(await history(ctx, workflowId), 'copyPage').map((a) => a.activityId),
      ['page-1', 'page-2'],
      'no page starts while page 2 is paused by an operator',
    );

    const next: PageActivityReport = { pageNo: 2, attempt: 2, workerIdentity: 'w2@host' };
    await handle.signal(pageActivityResumedSignal, next);
    const again = await paused(handle, []);
    assert.equal(again.lastEvent, 'page 2 runs again (attempt 2 on w2@host) after an operator pause');
    await mock.waitForHeld(3);
    assert.deepEqual(mock.pagesStarted(), [1, 2, 3]);

    mock.releasePages(true);
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.equal(r.published, true);
    const events = await history(ctx, workflowId);
    const [pausedAt] = signalIndexes(events, 'pageActivityPaused');
    const [resumedAt] = signalIndexes(events, 'pageActivityResumed');
    assert.deepEqual(
      scheduledActivities(events, 'copyPage')
        .filter((a) => a.index > pausedAt && a.index < resumedAt)
        .map((a) => a.activityId),
      [],
    );
  });
});

test('stale and repeated reports change nothing; a paused page that commits releases its hold', async () => {
  const catalog = uniqueCatalog('opstale');
  const mock = new MockActivities({ catalog, source: 's', pages: 6 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 2 });
    await mock.waitForHeld(2);
    mock.release(1);
    await mock.waitForHeld(3); // in flight: 2 and 3
    const r = (pageNo: number) => ({ pageNo, attempt: 1, workerIdentity: 'w1@host' });
    await handle.signal(pageActivityPausedSignal, r(1)); // committed already
    await handle.signal(pageActivityPausedSignal, r(9)); // never started
    await handle.signal(pageActivityResumedSignal, r(3)); // never paused
    await handle.signal(pageActivityPausedSignal, r(3));
    await handle.signal(pageActivityPausedSignal, r(3)); // again
    await handle.signal(pageActivityPausedSignal, r(2));
    const both = await paused(handle, [2, 3]);
    assert.match(both.lastEvent, /^page 2 paused by an operator/);

    mock.release(3); // e.g. after `temporal activity reset`, its next attempt committed
    const after3 = await waitForProgress(handle, 'page 3 committed', (p) => p.pagesDone === 2);
    assert.deepEqual(pick(after3, ['operatorPausedPages', 'inFlight']), { operatorPausedPages: [2], inFlight: 1 });
    assert.deepEqual(
      scheduledActivities(await history(ctx, workflowId), 'copyPage').map((a) => a.activityId),
      ['page-1', 'page-2', 'page-3'],
      'page 2 still holds the window',
    );
    mock.release(2);
    await mock.waitForHeld(5);
    assert.deepEqual(pick(await progress(handle), ['operatorPausedPages', 'inFlight', 'checkpoint']), {
      operatorPausedPages: [],
      inFlight: 2,
      checkpoint: 3,
    });
    mock.releasePages(true);
    assert.equal(((await handle.result()) as RebuildCatalogResult).published, true);
  });
});

test('with both a pause signal and an operator pause, the window runs again only when both are lifted', async () => {
  const catalog = uniqueCatalog('opboth');
  const mock = new MockActivities({ catalog, source: 's', pages: 4 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 2 });
    await mock.waitForHeld(2);
    await handle.signal(pageActivityPausedSignal, { pageNo: 1, attempt: 1, workerIdentity: 'w1@host' });
    await handle.signal(pauseSignal);
    await waitForProgress(handle, 'paused both ways', (p) => p.paused && p.operatorPausedPages.join() === '1');
    mock.release(2);
    await waitForProgress(handle, 'page 2 committed', (p) => p.pagesDone === 1 && p.inFlight === 1);
    await handle.signal(resumeSignal);
    const resumed = await waitForProgress(handle, 'resumed', (p) => !p.paused);
    assert.deepEqual(resumed.operatorPausedPages, [1]);
    assert.deepEqual(
      scheduledActivities(await history(ctx, workflowId), 'copyPage').map((a) => a.activityId),
      ['page-1', 'page-2'],
      'the operator pause still holds after resume',
    );
    await handle.signal(pageActivityResumedSignal, { pageNo: 1, attempt: 2, workerIdentity: 'w1@host' });
    await mock.waitForHeld(3);
    assert.deepEqual(mock.pagesStarted(), [1, 2, 3]);
    mock.releasePages(true);
    assert.equal(((await handle.result()) as RebuildCatalogResult).published, true);
  });
});

test('Temporal activity pause and unpause on a page: the attempt reports the pause, the window holds, the next attempt commits', async () => {
  const catalog = uniqueCatalog('tpause');
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 4,
    onPageCancelled: async (a) => {
      if (Context.current().cancellationDetails?.paused) await report(a, pageActivityPausedSignal);
    },
    onPageStart: (a) => (a.pageNo === 2 && a.attempt > 1 ? report(a, pageActivityResumedSignal) : undefined),
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 2 });
    await mock.waitForHeld(2);
    const target = { namespace: 'default', execution: { workflowId }, id: 'page-2', identity: 'test' };
    await ctx.env.client.workflowService.pauseActivity({ ...target, reason: 'test', requestId: randomUUID() });
    const held = await paused(handle, [2]);
    assert.equal(held.inFlight, 2, 'the paused page is still in flight for the workflow');
    assert.deepEqual(
      mock
        .callsOf('copyPage')
        .filter((c) => c.input.pageNo === 2)
        .map((c) => [c.attempt, c.outcome]),
      [[1, 'cancelled']],
    );
    mock.release(1);
    await waitForProgress(handle, 'page 1 committed', (p) => p.checkpoint === 1);
    assert.deepEqual(mock.pagesStarted(), [1, 2]);

    mock.releasePages(true);
    await ctx.env.client.workflowService.unpauseActivity(target);
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.equal(r.published, true);
    assert.equal(r.retries, 1, 'page 2 committed on its second attempt');
    assert.deepEqual(mock.pagesStarted(), [1, 2, 2, 3, 4]);
    const events = await history(ctx, workflowId);
    assert.equal(signalIndexes(events, 'pageActivityPaused').length, 1);
    assert.equal(signalIndexes(events, 'pageActivityResumed').length, 1);
    assert.deepEqual(
      scheduledActivities(events, 'copyPage').map((a) => a.activityId),
      ['page-1', 'page-2', 'page-3', 'page-4'],
    );
  });
});
