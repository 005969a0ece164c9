/**
 * RebuildCatalog's continue-as-new in process, over mocked activities: a run that scheduled its
 * share of pages continues as new once its window drained, carrying the plan, the checkpoint, the
 * counts, the retries, the throttle and a pause; the next run goes on from there without planning
 * again.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/client';
import type { RebuildCatalogResult } from '../workflows/definitions';
import { pauseSignal, resumeSignal, setThrottleUpdate } from '../workflows/definitions';
import { MockActivities } from '../dev/harness/mock-activities';
import type { InProcessEnv } from '../dev/harness/workflow-test';
import {
  continuedAsNew,
  history,
  inProcessEnv,
  pick,
  progress,
  scheduledActivities,
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

test('continue-as-new every 3 pages carries a pause, the throttle, the checkpoint, counts and retries; the plan is made once', async () => {
  const catalog = uniqueCatalog('can');
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 8,
    pageFailure: (pageNo, attempt) =>
      pageNo === 1 && attempt === 1 ? ApplicationFailure.retryable('connection reset', 'DB_TRANSIENT') : undefined,
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, {
      catalog,
      source: 's',
      concurrency: 2,
      maxPagesPerRun: 3,
    });
    const firstRunId = (await handle.describe()).runId;
    await mock.waitForHeld(2);
    await handle.executeUpdate(setThrottleUpdate, { args: [{ concurrency: 3 }] });
    await mock.waitForHeld(3);
    await handle.signal(pauseSignal);
    await waitForProgress(handle, 'paused', (p) => p.paused);
    await mock.waitForHeld(1); // its second attempt
    mock.releasePages();

    const run2 = await waitForProgress(handle, 'the second run', (p) => p.run === 2);
    assert.deepEqual(
      pick(run2, [
        'phase',
        'paused',
        'checkpoint',
        'pagesDone',
        'rowsUpserted',
        'retries',
        'concurrency',
        'inFlight',
        'versionId',
        'pagesTotal',
        'lastEvent',
      ]),
      {
        phase: 'copying',
        paused: true,
        checkpoint: 3,
        pagesDone: 3,
        rowsUpserted: 30,
        retries: 1,
        concurrency: 3,
        inFlight: 0,
        versionId: '7',
        pagesTotal: 8,
        lastEvent: 'continuing as new at checkpoint 3 (run 2)',
      },
    );
    const run1Events = await history(ctx, workflowId, firstRunId);
    const can = continuedAsNew(run1Events);
    assert.ok(can, 'run 1 ends by continuing as new');
    assert.deepEqual(
      scheduledActivities(run1Events, 'copyPage').map((a) => a.activityId),
      ['page-1', 'page-2', 'page-3'],
    );
    assert.equal(can.input?.maxPagesPerRun, 3, 'the input is carried');
    assert.deepEqual(
      pick(can.input!.carried!, [
        'versionId',
        'pagesTotal',
        'checkpoint',
        'rowsUpserted',
        'retries',
        'paused',
        'concurrency',
        'runs',
      ]),
      {
        versionId: '7',
        pagesTotal: 8,
        checkpoint: 3,
        rowsUpserted: 30,
        retries: 1,
        paused: true,
        concurrency: 3,
        runs: 1,
      },
    );
    // Run 2 answered the query, so its first workflow task is done: a page it had started would be there.
    const run2Events = await history(ctx, workflowId, can.newRunId);
    assert.deepEqual(
      scheduledActivities(run2Events).map((a) => a.type),
      [],
      'run 2 neither plans again nor starts a page while paused',
    );

    await handle.signal(resumeSignal);
    await mock.waitForCalls('copyPage', 7); // 1 (twice), 2, 3 and run 2's 4, 5, 6
    assert.equal((await progress(handle)).inFlight, 3, 'the carried window of 3');
    mock.releasePages(true);
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.deepEqual(pick(r, ['published', 'runs', 'rowsUpserted', 'retries', 'pagesTotal', 'versionId']), {
      published: true,
      runs: 3,
      rowsUpserted: 80,
      retries: 1,
      pagesTotal: 8,
      versionId: '7',
    });
    assert.equal(mock.callsOf('planRebuild').length, 1, 'planned once across runs');
    const byRun = new Map<string, number[]>();
    for (const c of mock.callsOf('copyPage'))
      if (c.outcome === 'returned') byRun.set(c.runId, [...(byRun.get(c.runId) ?? []), c.input.pageNo as number]);
    assert.deepEqual(
      [...byRun.values()].map((pages) => pages.sort((a, b) => a - b)),
      [
        [1, 2, 3],
        [4, 5, 6],
        [7, 8],
      ],
      'each run copies its share of pages, above the carried checkpoint',
    );
    const copied = mock.callsOf('recordEvent').find((c) => c.input.kind === 'copied');
    assert.deepEqual(pick(copied!.input.details as Record<string, number>, ['runs', 'rowsUpserted', 'retries']), {
      runs: 3,
      rowsUpserted: 80,
      retries: 1,
    });
    assert.deepEqual(mock.inputErrors, []);
  });
});

test('a run continues as new only once its window drained: no page of the next run starts while one of this run is in flight', async () => {
  const catalog = uniqueCatalog('candrain');
  const mock = new MockActivities({ catalog, source: 's', pages: 4 });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, {
      catalog,
      source: 's',
      concurrency: 2,
      maxPagesPerRun: 2,
    });
    const firstRunId = (await handle.describe()).runId;
    await mock.waitForHeld(2);
    mock.release(1);
    const full = await waitForProgress(handle, 'page 1 committed', (p) => p.checkpoint === 1);
    assert.deepEqual(pick(full, ['run', 'inFlight', 'paused']), { run: 1, inFlight: 1, paused: false });
    const run1 = await history(ctx, workflowId, firstRunId);
    assert.equal(continuedAsNew(run1), null, 'still the first run');
    assert.deepEqual(
      scheduledActivities(run1, 'copyPage').map((a) => a.activityId),
      ['page-1', 'page-2'],
      'a full run starts no page although the window has room',
    );
    mock.release(2);
    const pages = await mock.waitForCalls('copyPage', 4);
    const next = await progress(handle);
    assert.deepEqual(pick(next, ['run', 'checkpoint', 'inFlight']), { run: 2, checkpoint: 2, inFlight: 2 });
    const runOf = (page: number) => pages.find((c) => c.input.pageNo === page)?.runId;
    assert.equal(runOf(2), firstRunId);
    assert.notEqual(runOf(3), firstRunId, 'page 3 is the next run’s');
    assert.equal(runOf(4), runOf(3));
    mock.releasePages(true);
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.equal(r.runs, 2);
    assert.equal(r.published, true);
  });
});
