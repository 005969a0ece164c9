/**
 * RebuildCatalog with mocked activities on a real (local) Temporal server: plan before pages,
 * sliding window, exact checkpoint, pause/resume, cancel, repair rounds, failure, continue-as-new.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Context } from '@temporalio/activity';
import { CancelledFailure, WorkflowFailedError } from '@temporalio/client';
import type { Activities } from '../activities';
import type {
  CopyPageInput,
  CopyPageResult,
  RebuildCatalogResult,
  RebuildMemo,
  ReconcileSummary,
} from '../workflows/definitions';
import { pauseSignal, progressQuery, resumeSignal, cancelSignal, setThrottleUpdate } from '../workflows/definitions';
import { heldWindow } from '../dev/harness/observe';
import { waitFor } from '../dev/harness/wait';
import type { InProcessEnv } from '../dev/harness/workflow-test';
import { inProcessEnv, withWorker as withTestWorker } from '../dev/harness/workflow-test';

let ctx: InProcessEnv;
let env: TestWorkflowEnvironment;
before(async () => {
  ctx = await inProcessEnv();
  env = ctx.env;
});
after(async () => {
  await env?.teardown();
});

interface Mock {
  activities: Partial<Activities>;
  calls: { name: string; input: unknown }[];
  inFlightMax: number;
  release(pageNo?: number): void;
}

/** Mocked activities: pages complete when released (or at once when `autoRelease`). */
function mockActivities(opts: {
  pages: number;
  autoRelease?: boolean;
  reconcile?: (round: number) => ReconcileSummary;
}): Mock {
  const calls: Mock['calls'] = [];
  const waiting = new Map<number, () => void>();
  let inFlight = 0;
  const m: Mock = {
    calls,
    inFlightMax: 0,
    release(pageNo?: number) {
      for (const [p, fn] of [...waiting]) {
        if (pageNo === undefined || p === pageNo) {
          waiting.delete(p);
          fn();
        }
      }
    },
    activities: {
      async planRebuild(input) {
        calls.push({ name: 'planRebuild', input });
        return {
          versionId: '7',
          pagesTotal: opts.pages,
          pageSize: input.pageSize ?? 31_250,
          pageSizing: input.pageSize === undefined ? ('auto' as const) : ('fixed' as const),
          sourceRows: String(opts.pages * 10),
          watermark: { jobKey: '999', time: '2026-11-01T00:00:00.000000Z' },
          timezone: 'UTC',
        };
      },
      async copyPage(input: CopyPageInput): Promise<CopyPageResult> {
        calls.push({ name: 'copyPage', input });
        inFlight++;
        m.inFlightMax = Math.max(m.inFlightMax, inFlight);
        // Released by the test, or cancelled (worker shutdown after a failed assertion).
        if (!opts.autoRelease)
          await Promise.race([new Promise<void>((r) => waiting.set(input.pageNo, r)), Context.current().cancelled]);
        inFlight--;
        return {
          pageNo: input.pageNo,
          rows: 10,
          rejects: 0,
          checksum: 'x',
          attempt: 1,
          activityAttempt: 1,
          alreadyCommitted: false,
          durationMs: 5,
          previousFailure: null,
        };
      },
      async sealVersion(input) {
        calls.push({ name: 'sealVersion', input });
        return { missingPages: [] };
      },
      async indexVersion(input) {
        calls.push({ name: 'indexVersion', input });
      },
      async reconcile(input) {
        calls.push({ name: 'reconcile', input });
        return opts.reconcile
          ? opts.reconcile(input.round)
          : {
              round: input.round,
              ok: true,
              buckets: 3,
              sourceRows: opts.pages * 10,
              catalogRows: opts.pages * 10,
              rejects: 0,
              mismatched: [],
              delta: 0,
              duplicateJobNames: 0,
              sampleMismatches: 0,
              sampled: 5,
            };
      },
      async repairBucket(input) {
        calls.push({ name: 'repairBucket', input });
        return { bucket: input.bucket, upserted: 1, deleted: 0, ok: true };
      },
      async publishVersion(input) {
        calls.push({ name: 'publishVersion', input });
        return { previousVersionId: null };
      },
      async retireVersions(input) {
        calls.push({ name: 'retireVersions', input });
        return [];
      },
      async endVersion(input) {
        calls.push({ name: 'endVersion', input });
        return input.versionId ?? null;
      },
      async recordEvent(input) {
        calls.push({ name: 'recordEvent', input });
      },
      // As the worker's: through the Temporal client.
      async cancelRun(input) {
        calls.push({ name: 'cancelRun', input });
        await env.client.workflow.getHandle(input.workflowId, input.runId).cancel();
      },
    },
  };
  return m;
}

/** Runs `fn` while a versioned in-process worker serves `mock`'s activities (dev/harness/workflow-test.ts). */
function withWorker<T>(mock: Mock, fn: (taskQueue: string) => Promise<T>): Promise<T> {
  return withTestWorker(ctx, mock.activities as Activities, fn, 60_000);
}

test('progress shows the plan (pagesTotal, checkpoint 0) before any page commits; window bounded; checkpoint exact', async () => {
  const mock = mockActivities({ pages: 10 });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c1', source: 's', concurrency: 3, pageSize: 100 }],
    });
    await waitFor('progress pagesTotal 10', async () => (await h.query(progressQuery)).pagesTotal === 10);
    const p0 = await h.query(progressQuery);
    assert.equal(p0.checkpoint, 0);
    assert.equal(p0.pagesDone, 0);
    assert.equal(p0.phase, 'copying');
    assert.equal(p0.versionId, '7');
    assert.equal(p0.pageSizing, 'fixed');
    assert.equal(p0.pageSize, 100);
    await waitFor('3 copyPage calls', () => mock.calls.filter((c) => c.name === 'copyPage').length === 3);
    // Complete page 2 before page 1: the checkpoint stays 0, pagesDone 1.
    mock.release(2);
    await waitFor('progress pagesDone 1', async () => (await h.query(progressQuery)).pagesDone === 1);
    assert.equal((await h.query(progressQuery)).checkpoint, 0);
    mock.release(1);
    await waitFor('progress checkpoint 2', async () => (await h.query(progressQuery)).checkpoint === 2);
    const releaser = setInterval(() => mock.release(), 20);
    const r = (await h.result()) as RebuildCatalogResult;
    clearInterval(releaser);
    assert.equal(mock.inFlightMax, 3);
    assert.equal(r.published, true);
    assert.equal(r.rowsUpserted, 100);
    assert.equal(r.pagesTotal, 10);
    const pages = mock.calls.filter((c) => c.name === 'copyPage').map((c) => (c.input as CopyPageInput).pageNo);
    assert.deepEqual(
      [...pages].sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      'each page scheduled exactly once',
    );
    const order = mock.calls.map((c) => c.name).filter((n) => n !== 'copyPage');
    assert.deepEqual(order.slice(0, 3), ['planRebuild', 'recordEvent', 'sealVersion']);
    // The reader index is built beside the reconciliation, both before the publish.
    assert.deepEqual(order.slice(3, 5).sort(), ['indexVersion', 'reconcile']);
    assert.deepEqual(order.slice(5), ['publishVersion', 'retireVersions']);
    assert.deepEqual(mock.calls.find((c) => c.name === 'sealVersion')?.input, { versionId: '7' });
    const copied = mock.calls.find((c) => c.name === 'recordEvent')?.input as {
      kind: string;
      details: { rowsUpserted: number };
    };
    assert.equal(copied.kind, 'copied', 'the end of the copy phase is an event');
    assert.equal(copied.details.rowsUpserted, 100);
  });
});

test('without a page size the plan sizes pages: progress shows pageSizing auto and the size chosen', async () => {
  const mock = mockActivities({ pages: 2, autoRelease: true });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c-auto', source: 's', concurrency: 3 }],
    });
    const before = await h.query(progressQuery);
    assert.equal(before.pageSizing, 'auto');
    await h.result();
    const p = await h.query(progressQuery);
    assert.equal(p.pageSizing, 'auto');
    assert.equal(p.pageSize, 31_250);
    const planned = mock.calls.find((c) => c.name === 'planRebuild')?.input as {
      pageSize?: number;
      concurrency?: number;
    };
    assert.equal(planned.pageSize, undefined, 'the plan sizes the pages');
    assert.equal(planned.concurrency, 3, 'for the pages in flight');
  });
});

test('a seal that finds planned pages without a ledger row: they are copied again and recorded, then the seal holds', async () => {
  const mock = mockActivities({ pages: 3, autoRelease: true });
  let seals = 0;
  mock.activities.sealVersion = async (input) => {
    mock.calls.push({ name: 'sealVersion', input });
    return { missingPages: ++seals === 1 ? [2] : [] };
  };
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c-seal', source: 's', pageSize: 100 }],
    });
    const r = await h.result();
    assert.equal(r.published, true);
    const names = mock.calls.map((c) =>
      c.name === 'copyPage' ? `copyPage ${(c.input as CopyPageInput).pageNo}` : c.name,
    );
    const firstSeal = names.indexOf('sealVersion');
    assert.deepEqual(names.slice(firstSeal, firstSeal + 4), [
      'sealVersion',
      'recordEvent',
      'copyPage 2',
      'sealVersion',
    ]);
    const recopied = mock.calls.find(
      (c) => c.name === 'recordEvent' && (c.input as { kind: string }).kind === 'pages_recopied',
    )?.input as { details: { pages: number[] } };
    assert.deepEqual(recopied.details.pages, [2]);
  });
});

test('pause stops scheduling; in-flight pages finish (draining); resume continues from the checkpoint', async () => {
  const mock = mockActivities({ pages: 6 });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c2', source: 's', concurrency: 2 }],
    });
    await waitFor('2 copyPage calls', () => mock.calls.filter((c) => c.name === 'copyPage').length === 2);
    await h.signal(pauseSignal);
    await waitFor('progress paused', async () => (await h.query(progressQuery)).paused);
    const p = await h.query(progressQuery);
    assert.equal(p.draining, true);
    mock.release();
    await waitFor('progress checkpoint 2', async () => (await h.query(progressQuery)).checkpoint === 2);
    assert.equal((await h.query(progressQuery)).draining, false);
    // The window ran again while paused (a setThrottle update) and scheduled nothing more.
    assert.equal((await heldWindow(h)).length, 2, 'no page scheduled while paused');
    assert.equal(mock.calls.filter((c) => c.name === 'copyPage').length, 2, 'no page starts while paused');
    await h.signal(resumeSignal);
    const releaser = setInterval(() => mock.release(), 20);
    const r = (await h.result()) as RebuildCatalogResult;
    clearInterval(releaser);
    assert.equal(r.published, true);
    assert.equal(mock.calls.filter((c) => c.name === 'copyPage').length, 6);
  });
});

test('setThrottle validates its input and widens the window', async () => {
  const mock = mockActivities({ pages: 8 });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c3', source: 's', concurrency: 1 }],
    });
    await waitFor('1 copyPage call', () => mock.calls.filter((c) => c.name === 'copyPage').length === 1);
    await assert.rejects(h.executeUpdate(setThrottleUpdate, { args: [{ concurrency: 0 }] }), (err: Error) =>
      /concurrency must be an integer from 1 to 64/.test(String((err.cause as Error | undefined)?.message)),
    );
    const s = await h.executeUpdate(setThrottleUpdate, { args: [{ concurrency: 4 }] });
    assert.deepEqual(s, { concurrency: 4, pauseBetweenPagesMs: 0 });
    await waitFor('4 copyPage calls', () => mock.calls.filter((c) => c.name === 'copyPage').length === 4);
    const releaser = setInterval(() => mock.release(), 20);
    await h.result();
    clearInterval(releaser);
    assert.equal(mock.inFlightMax, 4);
  });
});

test('cancel signal abandons the version and ends the workflow CANCELLED, its result in the memo', async () => {
  const mock = mockActivities({ pages: 5 });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c4', source: 's' }],
    });
    await waitFor('at least 1 copyPage call', () => mock.calls.filter((c) => c.name === 'copyPage').length >= 1);
    await h.signal(cancelSignal, { reason: 'test' });
    await assert.rejects(
      h.result(),
      (err: unknown) => err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure,
    );
    const desc = await h.describe();
    assert.equal(desc.status.name, 'CANCELLED');
    const r = (desc.memo as unknown as RebuildMemo).outcome!;
    assert.equal(r.published, false);
    assert.equal(r.cancelled, true);
    assert.equal(r.versionId, '7');
    assert.equal(r.pagesTotal, 5);
    const end = mock.calls.find((c) => c.name === 'endVersion');
    assert.deepEqual(end?.input, { catalog: 'c4', versionId: '7', status: 'abandoned', reason: 'cancelled by signal' });
    assert.deepEqual(mock.calls.find((c) => c.name === 'cancelRun')?.input, {
      workflowId: h.workflowId,
      runId: desc.runId,
    });
    assert.equal(
      mock.calls.some((c) => c.name === 'publishVersion'),
      false,
    );
  });
});

test('Temporal cancellation abandons the version and ends the workflow cancelled', async () => {
  const mock = mockActivities({ pages: 5 });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c5', source: 's' }],
    });
    await waitFor('at least 1 copyPage call', () => mock.calls.filter((c) => c.name === 'copyPage').length >= 1);
    await h.cancel();
    await assert.rejects(
      h.result(),
      (err: unknown) => err instanceof WorkflowFailedError && /cancel/i.test(String((err as Error).cause)),
    );
    const end = mock.calls.find((c) => c.name === 'endVersion');
    assert.equal((end?.input as { status: string }).status, 'abandoned');
    assert.equal(mock.calls.filter((c) => c.name === 'cancelRun').length, 0, 'already cancelled by Temporal');
    assert.equal((await h.describe()).status.name, 'CANCELLED');
    const r = ((await h.describe()).memo as unknown as RebuildMemo).outcome!;
    assert.equal(r.cancelled, true);
    assert.equal(r.versionId, '7');
  });
});

test('mismatched buckets get RepairBucket children, then reconcile passes and publishes', async () => {
  const mock = mockActivities({
    pages: 2,
    autoRelease: true,
    reconcile: (round) => ({
      round,
      ok: round > 1,
      buckets: 3,
      sourceRows: 20,
      catalogRows: round > 1 ? 20 : 18,
      rejects: 0,
      mismatched: round > 1 ? [] : ['2026-01-01', 'none'],
      delta: 0,
      duplicateJobNames: 0,
      sampleMismatches: 0,
      sampled: 5,
    }),
  });
  await withWorker(mock, async (taskQueue) => {
    const workflowId = `catalog-rebuild/c6-${randomBytes(3).toString('hex')}`;
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId,
      args: [{ catalog: 'c6', source: 's' }],
    });
    const r = (await h.result()) as RebuildCatalogResult;
    assert.equal(r.published, true);
    const repairs = mock.calls
      .filter((c) => c.name === 'repairBucket')
      .map((c) => (c.input as { bucket: string | null }).bucket);
    assert.deepEqual(repairs.sort(), ['2026-01-01', null].sort());
    const children = [];
    for await (const w of env.client.workflow.list({
      query: `RootWorkflowId = '${workflowId}' AND WorkflowType = 'RepairBucket'`,
    }))
      children.push(w.workflowId);
    // Visibility may lag; when listed, ids follow design.md.
    for (const id of children) assert.match(id, new RegExp(`^${workflowId}/bucket-(2026-01-01|none)/r1$`));
  });
});

test('a rebuild that never reconciles fails naming the buckets and marks its version failed', async () => {
  const mock = mockActivities({
    pages: 1,
    autoRelease: true,
    reconcile: (round) => ({
      round,
      ok: false,
      buckets: 1,
      sourceRows: 10,
      catalogRows: 9,
      rejects: 0,
      mismatched: ['2025-12-24'],
      delta: 0,
      duplicateJobNames: 0,
      sampleMismatches: 0,
      sampled: 1,
    }),
  });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c7', source: 's', maxRepairRounds: 1 }],
    });
    await assert.rejects(h.result(), (err: unknown) => {
      assert.ok(err instanceof WorkflowFailedError);
      assert.match(String(((err as Error).cause as Error | undefined)?.message), /2025-12-24/);
      return true;
    });
    const end = mock.calls.find((c) => c.name === 'endVersion');
    assert.equal((end?.input as { status: string }).status, 'failed');
    assert.equal(
      mock.calls.some((c) => c.name === 'publishVersion'),
      false,
    );
  });
});

test('continue-as-new every 3 pages carries checkpoint, counts and pause state', async () => {
  const mock = mockActivities({ pages: 10, autoRelease: true });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c8', source: 's', maxPagesPerRun: 3, concurrency: 2 }],
    });
    const r = (await h.result()) as RebuildCatalogResult;
    assert.equal(r.published, true);
    assert.equal(r.rowsUpserted, 100);
    assert.equal(r.runs, 4);
    assert.equal(mock.calls.filter((c) => c.name === 'planRebuild').length, 1, 'planned once across runs');
    const pages = mock.calls.filter((c) => c.name === 'copyPage').map((c) => (c.input as CopyPageInput).pageNo);
    assert.deepEqual(
      [...pages].sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    );
  });
});

test('invalid input fails fast with a message naming the field', async () => {
  const mock = mockActivities({ pages: 1, autoRelease: true });
  await withWorker(mock, async (taskQueue) => {
    const h = await env.client.workflow.start('RebuildCatalog', {
      taskQueue,
      workflowId: `t-${randomBytes(3).toString('hex')}`,
      args: [{ catalog: 'c9', source: 's', pageSize: 0 }],
    });
    await assert.rejects(h.result(), (err: unknown) =>
      /pageSize must be an integer from 1 to 100000/.test(String(((err as Error).cause as Error | undefined)?.message)),
    );
    assert.equal(mock.calls.length, 0);
  });
});
