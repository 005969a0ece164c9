/**
 * RebuildCatalog in process, over mocked activities: the `pause`, `resume` and `cancel` signals (also
 * while the plan runs or is retried) and Temporal cancellation. What the window schedules is read from the history, what the rebuild shows
 * from the `progress` query, what it does to its version from the recorded activity calls.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/activity';
import { WorkflowFailedError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { RebuildCatalogResult } from '../workflows/definitions';
import { cancelSignal, pauseSignal, resumeSignal } from '../workflows/definitions';
import { waitForResult } from '../client';
import { MockActivities } from '../dev/harness/mock-activities';
import { waitFor } from '../dev/harness/wait';
import type { InProcessEnv } from '../dev/harness/workflow-test';
import {
  cancelRequestedActivities,
  history,
  inProcessEnv,
  phaseAttribute,
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

const WINDOW = ['phase', 'paused', 'draining', 'pagesDone', 'checkpoint', 'inFlight', 'rowsUpserted'] as const;
const pageIds = (n: number) => Array.from({ length: n }, (_, i) => `page-${i + 1}`);

test('pause with pages in flight: they drain, no page is scheduled while paused, resume goes on from the checkpoint', async () => {
  const catalog = uniqueCatalog('pause');
  const mock = new MockActivities({ catalog, source: 's', pages: 6 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, {
      catalog,
      source: 's',
      concurrency: 2,
      pageSize: 100,
    });
    const running = await waitForProgress(handle, '2 pages in flight', (p) => p.inFlight === 2);
    assert.deepEqual(pick(running, WINDOW), {
      phase: 'copying',
      paused: false,
      draining: false,
      pagesDone: 0,
      checkpoint: 0,
      inFlight: 2,
      rowsUpserted: 0,
    });
    assert.deepEqual(pick(running, ['pagesTotal', 'concurrency', 'run', 'versionId']), {
      pagesTotal: 6,
      concurrency: 2,
      run: 1,
      versionId: '7',
    });

    await handle.signal(pauseSignal);
    const paused = await waitForProgress(handle, 'paused', (p) => p.paused);
    assert.deepEqual(pick(paused, WINDOW), { ...pick(running, WINDOW), paused: true, draining: true });
    assert.equal(paused.lastEvent, 'paused by signal');
    // The memo carries the pause to readers that ask Temporal, not a worker.
    const memo = (await handle.describe()).memo as { paused?: boolean; pauseChangedAt?: string };
    assert.equal(memo.paused, true);
    assert.match(String(memo.pauseChangedAt), /^\d{4}-\d\d-\d\dT/);

    // Page 2 commits first: counted, but the checkpoint waits for page 1.
    mock.release(2);
    const one = await waitForProgress(handle, 'page 2 committed', (p) => p.pagesDone === 1);
    assert.deepEqual(pick(one, WINDOW), { ...pick(paused, WINDOW), pagesDone: 1, inFlight: 1, rowsUpserted: 10 });
    mock.release(1);
    const drained = await waitForProgress(handle, 'the window drained', (p) => p.inFlight === 0);
    assert.deepEqual(pick(drained, WINDOW), {
      phase: 'copying',
      paused: true,
      draining: false,
      pagesDone: 2,
      checkpoint: 2,
      inFlight: 0,
      rowsUpserted: 20,
    });
    // The workflow task that took page 1's result is complete (the query saw it): a page it had
    // scheduled would be in the history now.
    const atRest = scheduledActivities(await history(ctx, workflowId), 'copyPage');
    assert.deepEqual(
      atRest.map((a) => a.activityId),
      ['page-1', 'page-2'],
      'no page scheduled while paused',
    );
    assert.deepEqual(mock.pagesStarted(), [1, 2]);

    await handle.signal(pauseSignal); // a second pause changes nothing (it does not toggle)
    await handle.signal(resumeSignal);
    const resumed = await waitForProgress(
      handle,
      'resumed with 2 pages in flight',
      (p) => !p.paused && p.inFlight === 2,
    );
    assert.equal(resumed.lastEvent, 'resumed by signal at checkpoint 2');
    await mock.waitForCalls('copyPage', 4);
    assert.deepEqual(mock.pagesStarted(), [1, 2, 3, 4], 'resumed above the checkpoint');

    assert.equal(((await handle.describe()).memo as { paused?: boolean }).paused, false);
    mock.releasePages(true);
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.equal(r.published, true);
    assert.equal(r.rowsUpserted, 60);
    assert.deepEqual(
      mock
        .callsOf('recordEvent')
        .filter((c) => c.input.kind !== 'copied')
        .map((c) => [c.input.kind, c.input.message]),
      [
        ['paused', 'paused by signal at checkpoint 0'],
        ['resumed', 'resumed by signal at checkpoint 2'],
      ],
      'each pause and resume is an event of the catalog; the repeated pause is not',
    );
    const events = await history(ctx, workflowId);
    const pauses = signalIndexes(events, 'pause');
    const [resumeAt] = signalIndexes(events, 'resume');
    assert.equal(pauses.length, 2);
    const pages = scheduledActivities(events, 'copyPage');
    assert.deepEqual(
      pages.filter((a) => a.index > pauses[0] && a.index < resumeAt).map((a) => a.activityId),
      [],
      'no copyPage scheduled between pause and resume',
    );
    assert.deepEqual(
      pages.map((a) => a.activityId),
      pageIds(6),
      'each page scheduled once, in order',
    );
    assert.deepEqual(mock.inputErrors, []);
  });
});

test('a pause that arrives while the plan runs holds the first page until resume', async () => {
  const catalog = uniqueCatalog('pauseplan');
  const mock = new MockActivities({ catalog, source: 's', pages: 2, holdPlan: true, holdPages: false });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    await mock.waitForHeld('plan');
    const planning = await progress(handle);
    assert.deepEqual(pick(planning, ['phase', 'pagesTotal', 'versionId', 'paused']), {
      phase: 'planning',
      pagesTotal: 0,
      versionId: null,
      paused: false,
    });
    await handle.signal(pauseSignal);
    await waitForProgress(handle, 'paused', (p) => p.paused);
    mock.release('plan');
    const planned = await waitForProgress(handle, 'planned', (p) => p.pagesTotal === 2);
    assert.deepEqual(pick(planned, ['phase', 'paused', 'inFlight', 'versionId']), {
      phase: 'copying',
      paused: true,
      inFlight: 0,
      versionId: '7',
    });
    assert.deepEqual(scheduledActivities(await history(ctx, workflowId), 'copyPage'), []);
    await handle.signal(resumeSignal);
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.equal(r.published, true);
    assert.deepEqual(mock.pagesStarted(), [1, 2]);
  });
});

test('cancel signal with pages in flight: their activities are cancelled, the version abandoned, nothing sealed or published', async () => {
  const catalog = uniqueCatalog('cancel');
  const mock = new MockActivities({ catalog, source: 's', pages: 5 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 2 });
    await mock.waitForCalls('copyPage', 2);
    await handle.signal(cancelSignal, { reason: 'operator said so' });
    const r = await waitForResult(handle);
    assert.deepEqual(pick(r, ['published', 'cancelled', 'versionId', 'pagesTotal', 'rowsUpserted', 'runs']), {
      published: false,
      cancelled: true,
      versionId: '7',
      pagesTotal: 5,
      rowsUpserted: 0,
      runs: 1,
    });
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input),
      [{ catalog, versionId: '7', status: 'abandoned', reason: 'cancelled by signal' }],
    );
    assert.deepEqual(
      [...new Set(mock.calls.map((c) => c.name))],
      ['planRebuild', 'copyPage', 'recordEvent', 'endVersion', 'cancelRun'],
    );
    assert.deepEqual(
      mock.callsOf('recordEvent').map((c) => [c.input.kind, c.input.message]),
      [['cancel_requested', 'cancel requested by signal: operator said so']],
      'the cancel is an event of the catalog',
    );
    assert.deepEqual(mock.pagesStarted(), [1, 2]);

    const events = await history(ctx, workflowId);
    assert.deepEqual(cancelRequestedActivities(events).sort(), ['page-1', 'page-2']);
    const [cancelAt] = signalIndexes(events, 'cancel');
    assert.deepEqual(
      scheduledActivities(events)
        .filter((a) => a.index > cancelAt)
        .map((a) => a.type),
      ['recordEvent', 'endVersion', 'cancelRun'],
      'after the cancel the event is recorded, the version ended, and Temporal asked to cancel the run',
    );
    assert.ok(events[events.length - 1].workflowExecutionCanceledEventAttributes, 'the run ends CANCELLED');
    assert.equal((await handle.describe()).status.name, 'CANCELLED', 'not a green COMPLETED in the Web UI');
    // The new path (patch marker, memo, cancelRun, the cancellation) replays on this build.
    const recorded = await ctx.env.client.workflow.getHandle(workflowId).fetchHistory();
    await Worker.runReplayHistory({ workflowBundle: ctx.bundle }, recorded, workflowId);
    const p = await progress(handle);
    assert.deepEqual(pick(p, ['phase', 'inFlight', 'draining']), { phase: 'cancelled', inFlight: 0, draining: false });
    assert.equal(p.lastEvent, 'cancelled: version abandoned, active version unchanged');
    assert.equal(await phaseAttribute(handle), 'cancelled');
  });
});

test('cancel signal while paused and drained: the version is abandoned, no activity was in flight to cancel', async () => {
  const catalog = uniqueCatalog('cancelpaused');
  const mock = new MockActivities({ catalog, source: 's', pages: 4 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 1 });
    await mock.waitForHeld(1);
    await handle.signal(pauseSignal);
    await waitForProgress(handle, 'paused', (p) => p.paused);
    mock.release(1);
    await waitForProgress(handle, 'drained', (p) => p.inFlight === 0 && p.checkpoint === 1);
    await handle.signal(cancelSignal);
    const r = await waitForResult(handle);
    assert.equal(r.cancelled, true);
    assert.equal(r.rowsUpserted, 10);
    assert.deepEqual(mock.pagesStarted(), [1]);
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input.status),
      ['abandoned'],
    );
    assert.deepEqual(cancelRequestedActivities(await history(ctx, workflowId)), []);
  });
});

test('cancel signal while the plan runs: its attempt runs on to its commit, then the version it returned is abandoned, no page starts, the run ends CANCELLED', async () => {
  const catalog = uniqueCatalog('cancelplan');
  // As a real plan attempt: told of the cancel, it still runs on to its commit.
  const mock = new MockActivities({ catalog, source: 's', pages: 3, holdPlan: 'past a cancel' });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    await mock.waitForHeld('plan');
    await handle.signal(cancelSignal);
    await waitForProgress(handle, 'the cancel recorded', (p) => p.lastEvent === 'cancel requested');
    await waitFor('the cancel at the plan attempt', () => mock.planCancelSeen);
    mock.release('plan');
    const r = await waitForResult(handle);
    assert.deepEqual(pick(r, ['cancelled', 'published', 'versionId']), {
      cancelled: true,
      published: false,
      versionId: '7',
    });
    const events = await history(ctx, workflowId);
    assert.deepEqual(
      scheduledActivities(events).map((a) => a.type),
      ['planRebuild', 'recordEvent', 'endVersion', 'cancelRun'],
    );
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input),
      [{ catalog, versionId: '7', status: 'abandoned', reason: 'cancelled by signal' }],
      'the planned version is abandoned, not left building',
    );
    assert.deepEqual(
      mock.callsOf('recordEvent').map((c) => [c.input.kind, c.input.versionId]),
      [['cancel_requested', null]],
      'the cancel is an event of the catalog, before any version',
    );
    assert.equal(cancelRequestedActivities(events).length, 1, 'the plan activity was told of the cancel');
    assert.deepEqual(mock.pagesStarted(), []);
    assert.equal((await handle.describe()).status.name, 'CANCELLED');
  });
});

test('cancel signal while the plan fails and is retried (an unreachable source): the attempt in flight ends, none follows, what it may have committed is looked up by the rebuild ids', async () => {
  const catalog = uniqueCatalog('cancelretry');
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 3,
    holdPlan: true,
    planFailure: (attempt) =>
      attempt === 1 ? ApplicationFailure.retryable('connect ECONNREFUSED 127.0.0.1:1', 'DB_TRANSIENT') : undefined,
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    await mock.waitForHeld('plan'); // the second attempt, after the first failed
    await handle.signal(cancelSignal);
    const r = await waitForResult(handle);
    assert.deepEqual(pick(r, ['cancelled', 'published']), { cancelled: true, published: false });
    assert.deepEqual(
      mock.callsOf('planRebuild').map((c) => [c.attempt, c.outcome]),
      [
        [1, 'failed'],
        [2, 'cancelled'],
      ],
      'no attempt after the cancel',
    );
    const { runId } = await handle.describe(); // the first run: the plan's
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input),
      [{ catalog, plannedBy: { workflowId, firstRunId: runId }, status: 'abandoned', reason: 'cancelled by signal' }],
    );
    assert.deepEqual(mock.pagesStarted(), []);
    assert.equal((await handle.describe()).status.name, 'CANCELLED');
  });
});

test('cancel signal while publishing is too late: the publish runs to its end and the rebuild completes published', async () => {
  const catalog = uniqueCatalog('cancelpub');
  const mock = new MockActivities({ catalog, source: 's', pages: 2, holdPages: false, holdPublish: true });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    await mock.waitForHeld('publish');
    await handle.signal(cancelSignal, { reason: 'late' });
    await waitForProgress(handle, 'the cancel recorded', (p) => /^cancel requested: late: too late/.test(p.lastEvent));
    mock.release('publish');
    const r = await waitForResult(handle);
    assert.deepEqual(pick(r, ['published', 'cancelled', 'versionId']), {
      published: true,
      cancelled: false,
      versionId: '7',
    });
    assert.equal((await handle.describe()).status.name, 'COMPLETED');
    assert.equal(mock.callsOf('endVersion').length, 0, 'the published version is not abandoned');
    assert.equal(mock.callsOf('cancelRun').length, 0);
    const events = await history(ctx, workflowId);
    assert.deepEqual(cancelRequestedActivities(events), [], 'nothing of the publish was cancelled');
    assert.ok(
      !events.some((e) => e.requestCancelExternalWorkflowExecutionInitiatedEventAttributes),
      'the PublishCatalog child was not asked to cancel',
    );
  });
});

test('Temporal cancellation with pages in flight: pages cancelled, version abandoned as "workflow cancelled", the run ends CANCELLED', async () => {
  const catalog = uniqueCatalog('tcancel');
  const mock = new MockActivities({ catalog, source: 's', pages: 5 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', concurrency: 3 });
    await mock.waitForCalls('copyPage', 3);
    await handle.cancel();
    await assert.rejects(handle.result(), (err: unknown) => err instanceof WorkflowFailedError);
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input),
      [{ catalog, versionId: '7', status: 'abandoned', reason: 'workflow cancelled' }],
    );
    assert.deepEqual(
      mock
        .callsOf('recordEvent')
        .map((c) => [c.input.kind, c.input.versionId, (c.input.details as { via?: string }).via]),
      [['cancel_requested', '7', 'temporal']],
      'the Temporal request is an event of the catalog, as the signal is',
    );
    const names = mock.calls.map((c) => c.name);
    assert.ok(names.indexOf('recordEvent') < names.indexOf('endVersion'), 'recorded before the version is abandoned');
    const events = await history(ctx, workflowId);
    assert.deepEqual(cancelRequestedActivities(events).sort(), ['page-1', 'page-2', 'page-3']);
    assert.ok(events[events.length - 1].workflowExecutionCanceledEventAttributes, 'the run ends cancelled');
    assert.equal((await handle.describe()).status.name, 'CANCELLED');
    assert.equal(mock.callsOf('cancelRun').length, 0, 'Temporal cancelled it already');
    assert.deepEqual(pick(await waitForResult(handle), ['cancelled', 'published', 'versionId', 'pagesTotal']), {
      cancelled: true,
      published: false,
      versionId: '7',
      pagesTotal: 5,
    });
    assert.equal(await phaseAttribute(handle), 'cancelled');
    assert.equal(
      mock.callsOf('sealVersion').length + mock.callsOf('publishVersion').length,
      0,
      'nothing sealed or published',
    );
  });
});
