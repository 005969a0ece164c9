/**
 * RebuildCatalog's verify-and-publish phases in process, over mocked activities: reconcile rounds
 * that start one RepairBucket child per mismatched bucket, repairs exhausted, a failing repair, a
 * cancel during repairs, and the publish through the PublishCatalog child with the shrink guard's
 * refusal and `allowShrink`.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, WorkflowFailedError } from '@temporalio/client';
import type { RebuildCatalogResult } from '../workflows/definitions';
import { cancelSignal } from '../workflows/definitions';
import { waitForResult } from '../client';
import { publishWorkflowId, repairWorkflowId } from '../workflows/names';
import type { PublishVersionInput } from '../workflows/activity-types';
import { MockActivities } from '../dev/harness/mock-activities';
import type { InProcessEnv } from '../dev/harness/workflow-test';
import {
  history,
  inProcessEnv,
  pick,
  progress,
  startRebuild,
  startedChildren,
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

/** The status name of workflow `workflowId` (a child, by its id). */
const statusOf = async (workflowId: string) =>
  (await ctx.env.client.workflow.getHandle(workflowId).describe()).status.name;

/** The failure chain of a rejected rebuild, outermost first: [class name, message, type]. */
function chain(err: unknown): [string, string, string | undefined][] {
  const out: [string, string, string | undefined][] = [];
  for (let e = (err as Error).cause; e instanceof Error; e = e.cause)
    out.push([e.constructor.name, e.message, e instanceof ApplicationFailure ? (e.type ?? undefined) : undefined]);
  return out;
}

test('mismatched buckets: one RepairBucket child each, 4 at once, then reconcile again and publish through the PublishCatalog child', async () => {
  const catalog = uniqueCatalog('repair');
  const buckets = ['2026-01-01', '2026-01-02', '2026-01-03', '2026-01-04', '2026-01-05', 'none'];
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 2,
    holdPages: false,
    holdRepairs: true,
    reconcile: (round) => ({ mismatched: round === 1 ? buckets : [] }),
    publish: () => ({ previousVersionId: '5' }),
    retired: ['4'],
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', retention: 3 });
    await mock.waitForCalls('repairBucket', 4);
    const repairing = await waitForProgress(handle, 'repairing', (p) => p.phase === 'repairing');
    assert.deepEqual(pick(repairing.reconciliation!, ['round', 'ok', 'mismatched']), {
      round: 1,
      ok: false,
      mismatched: buckets,
    });
    assert.equal(repairing.lastEvent, 'reconcile round 1: 6 buckets differ');
    const atFour = startedChildren(await history(ctx, workflowId));
    assert.deepEqual(
      atFour.map((c) => c.workflowId),
      buckets.slice(0, 4).map((b) => repairWorkflowId(workflowId, b, 1)),
      'four children at once, in the order reconcile named the buckets',
    );
    mock.release('repair:2026-01-01');
    await mock.waitForHeld('repair:2026-01-05');
    mock.releaseRepairs();
    await mock.waitForHeld('repair:none');
    mock.release('repair:none');

    const r = (await handle.result()) as RebuildCatalogResult;
    assert.deepEqual(pick(r, ['published', 'previousVersionId', 'versionId']), {
      published: true,
      previousVersionId: '5',
      versionId: '7',
    });
    assert.deepEqual(pick(r.reconciliation!, ['round', 'ok']), { round: 2, ok: true });
    assert.equal(mock.maxRepairsRunning, 4);
    assert.deepEqual(
      mock.callsOf('reconcile').map((c) => c.input),
      [1, 2].map((round) => ({ catalog, source: 's', versionId: '7', round })),
    );
    const repairs = mock.callsOf('repairBucket').map((c) => c.input);
    const wanted = buckets.map((b) => ({ catalog, source: 's', versionId: '7', bucket: b === 'none' ? null : b }));
    const byBucket = (a: { bucket?: unknown }, b: { bucket?: unknown }) =>
      String(a.bucket).localeCompare(String(b.bucket));
    assert.deepEqual(repairs.slice(0, 4).sort(byBucket), wanted.slice(0, 4), 'the first four at once');
    assert.deepEqual(repairs.slice(4), wanted.slice(4), 'then one as each ends');
    const steps = mock.calls.map((c) => c.name).filter((n) => !['planRebuild', 'copyPage', 'recordEvent'].includes(n));
    // The reader index is built beside the reconciliation rounds, in any order with them.
    assert.deepEqual(
      mock.callsOf('indexVersion').map((c) => c.input),
      [{ versionId: '7' }],
    );
    assert.deepEqual(
      steps.filter((n) => n !== 'indexVersion'),
      [
        'sealVersion',
        'reconcile',
        ...buckets.map(() => 'repairBucket'),
        'reconcile',
        'publishVersion',
        'retireVersions',
      ],
    );
    assert.deepEqual(
      mock.callsOf('publishVersion').map((c) => c.input),
      [{ catalog, versionId: '7', allowShrink: false }],
    );
    assert.deepEqual(
      mock.callsOf('retireVersions').map((c) => c.input),
      [{ catalog, retention: 3 }],
    );

    const children = startedChildren(await history(ctx, workflowId));
    assert.deepEqual(
      children.map((c) => [c.type, c.workflowId]),
      [
        ...buckets.map((b) => ['RepairBucket', repairWorkflowId(workflowId, b, 1)]),
        ['PublishCatalog', publishWorkflowId(workflowId)],
      ],
    );
    assert.deepEqual(children[children.length - 1].input, {
      catalog,
      versionId: '7',
      allowShrink: false,
      retention: 3,
      // Its publish and retirement heartbeat with twice the rebuild's page heartbeat timeout.
      heartbeatTimeoutMs: 15_000,
    });
    const publishChild = await ctx.env.client.workflow.getHandle(publishWorkflowId(workflowId)).result();
    assert.deepEqual(publishChild, { versionId: '7', previousVersionId: '5', retired: ['4'] });
    const child = await ctx.env.client.workflow.getHandle(repairWorkflowId(workflowId, null, 1)).describe();
    assert.deepEqual(
      [child.type, child.status.name, child.parentExecution?.workflowId],
      ['RepairBucket', 'COMPLETED', workflowId],
    );
    const p = await progress(handle);
    assert.deepEqual(pick(p, ['phase', 'etaSeconds', 'lastEvent']), {
      phase: 'done',
      etaSeconds: 0,
      lastEvent: 'published version 7 (replacing 5)',
    });
    assert.deepEqual(mock.inputErrors, []);
  });
});

test('repairs exhausted: after maxRepairRounds rounds the rebuild fails NOT_PUBLISHABLE naming the buckets; the version failed, nothing published', async () => {
  const catalog = uniqueCatalog('exhausted');
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 1,
    holdPages: false,
    reconcile: () => ({ mismatched: ['2025-12-24', 'none'] }),
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's', maxRepairRounds: 2 });
    const message = 'reconciliation failed after 2 repair rounds; buckets still differing: 2025-12-24, none';
    let err: unknown;
    await assert.rejects(handle.result(), (e: unknown) => (err = e) instanceof WorkflowFailedError);
    assert.deepEqual(chain(err), [['ApplicationFailure', message, 'NOT_PUBLISHABLE']]);
    assert.equal(((err as Error).cause as ApplicationFailure).nonRetryable, true);
    assert.deepEqual(
      mock.callsOf('reconcile').map((c) => c.input.round),
      [1, 2, 3],
    );
    assert.deepEqual(
      startedChildren(await history(ctx, workflowId)).map((c) => c.workflowId),
      [1, 2].flatMap((round) => ['2025-12-24', null].map((b) => repairWorkflowId(workflowId, b, round))),
      'two repair rounds, no publish',
    );
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input),
      [{ catalog, versionId: '7', status: 'failed', reason: message }],
    );
    assert.equal(mock.callsOf('publishVersion').length, 0);
    const p = await progress(handle);
    assert.equal(p.phase, 'failed');
    assert.equal(p.reconciliation?.round, 3);
  });
});

test('a plan whose retries run out (an unreachable source): the rebuild fails naming its plan as the step that gave up, not as a transient error', async () => {
  const catalog = uniqueCatalog('gaveup');
  const cause = 'transient database error: connect ECONNREFUSED 127.0.0.1:1';
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 1,
    // Retried at once instead of after the policy's backoff: the ten attempts take a second, not 2.5 minutes.
    planFailure: () => ApplicationFailure.create({ message: cause, type: 'DB_TRANSIENT', nextRetryDelay: '10 ms' }),
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    const message = `its plan gave up, its retries exhausted: ${cause}`;
    let err: unknown;
    await assert.rejects(handle.result(), (e: unknown) => (err = e) instanceof WorkflowFailedError);
    assert.deepEqual(chain(err), [['ApplicationFailure', message, 'DB_TRANSIENT']]);
    assert.equal(mock.callsOf('planRebuild').length, 10, 'the short retry policy: 10 attempts');
    const { runId } = await handle.describe();
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input),
      [{ catalog, plannedBy: { workflowId, firstRunId: runId }, status: 'failed', reason: message }],
    );
  });
});

test('a repair that fails (an unreadable bucket) fails the rebuild through its child; the version failed with the repair’s message', async () => {
  const catalog = uniqueCatalog('unreadable');
  const message =
    'bucket 2026-01-02 of source s is unreadable: timestamp out of range (SQLSTATE 22008); never counted as empty';
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 1,
    holdPages: false,
    reconcile: () => ({ mismatched: ['2026-01-01', '2026-01-02'] }),
    repairFailure: (b) =>
      b === '2026-01-02' ? ApplicationFailure.nonRetryable(message, 'NOT_PUBLISHABLE') : undefined,
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    let err: unknown;
    await assert.rejects(handle.result(), (e: unknown) => (err = e) instanceof WorkflowFailedError);
    const [childFailure, activityFailure, app] = chain(err);
    assert.equal(childFailure[0], ChildWorkflowFailure.name);
    assert.equal(activityFailure[0], ActivityFailure.name);
    assert.deepEqual(app, ['ApplicationFailure', message, 'NOT_PUBLISHABLE']);
    assert.equal(await statusOf(repairWorkflowId(workflowId, '2026-01-02', 1)), 'FAILED');
    assert.deepEqual(
      mock
        .callsOf('repairBucket')
        .filter((c) => c.input.bucket === '2026-01-02')
        .map((c) => c.attempt),
      [1],
      'not retried',
    );
    assert.equal(mock.callsOf('reconcile').length, 1, 'no second round');
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => pick(c.input, ['status', 'reason'])),
      [{ status: 'failed', reason: message }],
    );
    assert.equal(mock.callsOf('publishVersion').length, 0);
  });
});

test('cancel signal during a repair round: the RepairBucket children are cancelled, the version abandoned, nothing published', async () => {
  const catalog = uniqueCatalog('cancelrepair');
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 1,
    holdPages: false,
    holdRepairs: true,
    reconcile: () => ({ mismatched: ['2026-01-01', '2026-01-02'] }),
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    await mock.waitForCalls('repairBucket', 2);
    await handle.signal(cancelSignal, { reason: 'test' });
    const r = await waitForResult(handle);
    assert.deepEqual(pick(r, ['cancelled', 'published']), { cancelled: true, published: false });
    for (const b of ['2026-01-01', '2026-01-02'])
      assert.equal(await statusOf(repairWorkflowId(workflowId, b, 1)), 'CANCELLED', `child of ${b}`);
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => pick(c.input, ['status', 'reason'])),
      [{ status: 'abandoned', reason: 'cancelled by signal' }],
    );
    assert.equal(mock.callsOf('publishVersion').length, 0);
    assert.equal(mock.callsOf('reconcile').length, 1);
  });
});

test('shrink guard: a refused publish fails the rebuild through PublishCatalog, once, nothing retired; with allowShrink it publishes', async () => {
  const message =
    'shrink guard: 3 buckets lost more than 10% and at least 5 jobs compared with active version 5: 2026-01-01 (40 → 20)';
  const publish = (input: PublishVersionInput) => {
    if (!input.allowShrink) throw ApplicationFailure.nonRetryable(message, 'NOT_PUBLISHABLE');
    return { previousVersionId: '5' };
  };
  const refused = uniqueCatalog('shrink');
  const mock = new MockActivities({ catalog: refused, source: 's', pages: 1, holdPages: false, publish });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, { catalog: refused, source: 's' });
    let err: unknown;
    await assert.rejects(handle.result(), (e: unknown) => (err = e) instanceof WorkflowFailedError);
    const [child, , app] = chain(err);
    assert.equal(child[0], ChildWorkflowFailure.name);
    assert.deepEqual(app, ['ApplicationFailure', message, 'NOT_PUBLISHABLE']);
    assert.equal(await statusOf(publishWorkflowId(workflowId)), 'FAILED');
    assert.deepEqual(
      mock.callsOf('publishVersion').map((c) => [c.attempt, c.input.allowShrink]),
      [[1, false]],
      'refused once, not retried',
    );
    assert.equal(mock.callsOf('retireVersions').length, 0, 'nothing retired');
    assert.deepEqual(
      mock.callsOf('endVersion').map((c) => c.input),
      [{ catalog: refused, versionId: '7', status: 'failed', reason: message }],
    );
    assert.deepEqual(pick(await progress(handle), ['phase', 'lastEvent']), {
      phase: 'failed',
      lastEvent: `failed: ${message}`,
    });
  });

  const allowed = uniqueCatalog('shrinkok');
  const ok = new MockActivities({ catalog: allowed, source: 's', pages: 1, holdPages: false, publish });
  await withWorker(ctx, ok.activities, async (taskQueue) => {
    const { handle, workflowId } = await startRebuild(ctx, taskQueue, {
      catalog: allowed,
      source: 's',
      allowShrink: true,
    });
    const r = (await handle.result()) as RebuildCatalogResult;
    assert.deepEqual(pick(r, ['published', 'previousVersionId']), { published: true, previousVersionId: '5' });
    assert.deepEqual(
      ok.callsOf('publishVersion').map((c) => c.input.allowShrink),
      [true],
    );
    const publishChild = startedChildren(await history(ctx, workflowId)).find((c) => c.type === 'PublishCatalog');
    assert.equal(publishChild?.input?.allowShrink, true);
    assert.equal(ok.callsOf('endVersion').length, 0);
  });
});

test('a Temporal cancellation request while publishing is too late, as the signal is: the rebuild completes published and records the request', async () => {
  const catalog = uniqueCatalog('tcancelpub');
  const mock = new MockActivities({ catalog, source: 's', pages: 2, holdPages: false, holdPublish: true });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    await mock.waitForHeld('publish');
    await handle.cancel();
    mock.release('publish');
    const r = await waitForResult(handle);
    assert.deepEqual(pick(r, ['published', 'cancelled', 'versionId']), {
      published: true,
      cancelled: false,
      versionId: '7',
    });
    assert.equal((await handle.describe()).status.name, 'COMPLETED');
    assert.equal(mock.callsOf('endVersion').length, 0, 'the published version is not abandoned');
    assert.deepEqual(
      mock
        .callsOf('recordEvent')
        .filter((c) => c.input.kind === 'cancel_requested')
        .map((c) => [c.input.kind, c.input.message]),
      [
        [
          'cancel_requested',
          'cancel requested through Temporal (a workflow cancellation request): too late, the rebuild was publishing and published',
        ],
      ],
    );
  });
});

test('a retirement that gives up after the flip does not fail the published rebuild: it completes published and records why', async () => {
  const catalog = uniqueCatalog('retirefail');
  const cause = 'transient database error: connection reset';
  const mock = new MockActivities({
    catalog,
    source: 's',
    pages: 1,
    holdPages: false,
    retireFailure: () => ApplicationFailure.create({ message: cause, type: 'DB_TRANSIENT', nextRetryDelay: '10 ms' }),
  });
  await withWorker(ctx, mock.activities, async (taskQueue) => {
    const { handle } = await startRebuild(ctx, taskQueue, { catalog, source: 's' });
    const r = await waitForResult(handle);
    assert.deepEqual(pick(r, ['published', 'versionId']), { published: true, versionId: '7' });
    assert.equal((await handle.describe()).status.name, 'COMPLETED');
    assert.equal(mock.callsOf('retireVersions').length, 10, 'retried as its policy says, then given up');
    assert.equal(mock.callsOf('endVersion').length, 0, 'the published version is left as it is');
    assert.deepEqual(
      mock
        .callsOf('recordEvent')
        .filter((c) => c.input.kind === 'retire_failed')
        .map((c) => c.input.message),
      [
        `version 7 published; retiring old versions failed, the next publish retires them: the retirement of old versions gave up, its retries exhausted: ${cause}`,
      ],
    );
  });
});
