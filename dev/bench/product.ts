/**
 * Variant (a), the product: `RebuildCatalog` with default settings (page size 2,000 unless
 * --page-size is given, 4 pages in flight) and ONE worker process on the private Temporal dev
 * server; rows/s from `start` to published (reconciliation and publish included), the CPU of every
 * component, where a page's time goes, the Temporal round trip per page, history sizes and the
 * worker's peak RSS.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { startRebuild, waitForResult } from '../../client';
import type { RebuildCatalogResult } from '../../workflows/definitions';
import { median } from '../harness/faults';
import type { WorkerProcess } from '../harness/harness';
import { spawnWorker, temporalClient, testEnv, uniqueQueue, writeConfig } from '../harness/harness';
import { within } from '../harness/wait';
import type { BenchContext } from './context';
import { fmtInt, fmtS, mean } from './context';
import { CpuSampler, cpuText, memoryOf } from './cpu';
import { allHistories } from './history';

/** What (a) measured, for the ratios and the equivalence check. */
export interface ProductOutcome {
  /** Rows per second from start to published. */
  rate: number;
  /** Duration of the copy phase: first page started to last page committed (ms). */
  copyMs: number;
  /** The published version (its table holds (a)'s copy). */
  versionId: string;
}

/** Epoch ms of the phases of a version, from its events, attempts and ledger. */
interface Phases {
  planned: number;
  first_page: number;
  last_commit: number;
  reconciled: number;
  published: number;
}

/** A finished rebuild and everything sampled while it ran. */
interface Run {
  result: RebuildCatalogResult;
  handle: WorkflowHandle;
  started: number;
  ms: number;
  sampler: CpuSampler;
  cpu: Record<string, number>;
  /** The worker's memory right after the rebuild ended. */
  mem: ReturnType<typeof memoryOf>;
  phases: Phases;
}

async function phasesOf(ctx: BenchContext, versionId: string): Promise<Phases> {
  const { rows } = await ctx.dbs.catalogPool.query<Phases>(
    `SELECT (SELECT extract(epoch FROM min(created_at)) * 1000 FROM event WHERE version_id = $1 AND kind = 'planned')::float8 AS planned,
            (SELECT extract(epoch FROM min(started_at)) * 1000 FROM page_attempt WHERE version_id = $1)::float8 AS first_page,
            (SELECT extract(epoch FROM max(committed_at)) * 1000 FROM page WHERE version_id = $1)::float8 AS last_commit,
            (SELECT extract(epoch FROM max(created_at)) * 1000 FROM event WHERE version_id = $1 AND kind = 'reconciled')::float8 AS reconciled,
            (SELECT extract(epoch FROM max(created_at)) * 1000 FROM event WHERE version_id = $1 AND kind = 'published')::float8 AS published`,
    [versionId],
  );
  return rows[0];
}

/** Where a page's time goes (ledger timestamps: attempt registered → ledger row inserted = read; → committed = write transaction). */
async function pageTimesOf(
  ctx: BenchContext,
  versionId: string,
): Promise<{ read_ms: number; write_ms: number; total_ms: number }[]> {
  const { rows } = await ctx.dbs.catalogPool.query<{ read_ms: number; write_ms: number; total_ms: number }>(
    `SELECT extract(epoch FROM p.started_at - a.started_at)::float8 * 1000 AS read_ms,
            extract(epoch FROM p.committed_at - p.started_at)::float8 * 1000 AS write_ms,
            extract(epoch FROM p.committed_at - a.started_at)::float8 * 1000 AS total_ms
     FROM page p JOIN page_attempt a ON a.version_id = p.version_id AND a.page_no = p.page_no AND a.attempt = p.attempt
     WHERE p.version_id = $1`,
    [versionId],
  );
  return rows;
}

/** Starts the rebuild of catalog `bench` and waits for it, sampling CPU and the worker's memory. */
async function rebuild(
  ctx: BenchContext,
  temporalPid: number,
  worker: WorkerProcess,
  tc: Awaited<ReturnType<typeof temporalClient>>,
  taskQueue: string,
): Promise<Run> {
  const sampler = new CpuSampler(
    ctx.admin,
    { worker: worker.pid, 'Temporal server': temporalPid },
    [
      { label: 'PostgreSQL catalog backends', datname: ctx.catalogDb, appPrefix: 'catalog-rebuild:worker:' },
      { label: 'PostgreSQL source backends', datname: ctx.sourceDb, appPrefix: 'catalog-rebuild:source:' },
    ],
    [worker.pid],
  );
  await sampler.start();
  const started = Date.now();
  const { handle } = await startRebuild(
    tc.client,
    { catalog: 'bench', source: 'director', ...(ctx.o.pageSize !== undefined ? { pageSize: ctx.o.pageSize } : {}) },
    { taskQueue },
  );
  const result = await waitForResult(handle);
  const ms = Date.now() - started;
  const cpu = await sampler.stop();
  const mem = memoryOf(worker.pid);
  if (!result.published) throw new Error(`(a) ended unpublished: ${JSON.stringify(result)}`);
  return { result, handle, started, ms, sampler, cpu, mem, phases: await phasesOf(ctx, result.versionId) };
}

/** Prints the figures of (a) from start to published: rows/s with the phases, and CPU (whole run, copy phase, rest). */
function reportRate(ctx: BenchContext, run: Run): { rate: number; copyMs: number } {
  const { o, figures } = ctx;
  const { result, phases, started, ms } = run;
  const rate = o.jobs / (ms / 1000);
  const copyMs = phases.last_commit - phases.first_page;
  figures.add(
    '(a) catalog-rebuild, 1 worker',
    `${fmtInt(rate)} rows/s (${fmtInt(result.rowsUpserted)} rows in ${fmtS(ms)} from start to published; plan ${fmtS(phases.planned - started)}, ` +
      `copy phase ${fmtS(copyMs)} = ${fmtInt(o.jobs / (copyMs / 1000))} rows/s, seal + reconcile ${fmtS(phases.reconciled - phases.last_commit)}, ` +
      `publish ${fmtS(phases.published - phases.reconciled)}, to result ${fmtS(started + ms - phases.published)}; ${result.retries} retries, ${result.runs} run(s))`,
    {
      rowsPerSecond: Math.round(rate),
      ms,
      copyMs: Math.round(copyMs),
      copyRowsPerSecond: Math.round(o.jobs / (copyMs / 1000)),
      retries: result.retries,
      runs: result.runs,
    },
  );
  figures.add('(a) CPU', cpuText(run.cpu, o.jobs), run.cpu);
  const copyCpu = run.sampler.totalsAt(phases.last_commit);
  const restCpu = Object.fromEntries(Object.entries(run.cpu).map(([k, v]) => [k, v - (copyCpu[k] ?? 0)]));
  figures.add('(a) CPU until the last page committed', cpuText(copyCpu, o.jobs), copyCpu);
  figures.add('(a) CPU after it (seal, reconcile, publish)', cpuText(restCpu, o.jobs), restCpu);
  return { rate, copyMs };
}

/** Prints where a page's time goes, the Temporal round trip per page and the history sizes. */
async function reportPagesAndHistory(
  ctx: BenchContext,
  run: Run,
  copyMs: number,
  tc: Awaited<ReturnType<typeof temporalClient>>,
): Promise<void> {
  const { o, figures, concurrency } = ctx;
  const pageTimes = await pageTimesOf(ctx, run.result.versionId);
  const firstRunId =
    (run.handle as WorkflowHandle & { firstExecutionRunId?: string }).firstExecutionRunId ??
    (await run.handle.describe()).runId;
  const hist = await allHistories(tc.client, run.handle.workflowId, firstRunId);
  const parentEvents = hist.runs.map((r) => r.events);
  const maxPerRun = Math.max(...parentEvents);
  const allEvents = parentEvents.reduce((a, b) => a + b, 0) + hist.children.reduce((a, c) => a + c.events, 0);
  const dispatch = hist.runs.flatMap((r) => r.dispatchMs);
  const reaction = hist.runs.flatMap((r) => r.reactionMs);
  const activity = hist.runs.flatMap((r) => r.activityMs);
  const pagesTotal = run.result.pagesTotal;
  const cycleMs = (copyMs * concurrency) / pagesTotal;
  const roundTrip = mean(dispatch) + mean(reaction);
  figures.add(
    'page time',
    `activity ${mean(activity).toFixed(1)} ms per page (median ${median(activity).toFixed(1)}): source read ${mean(pageTimes.map((p) => p.read_ms)).toFixed(1)} ms, ` +
      `page transaction ${mean(pageTimes.map((p) => p.write_ms)).toFixed(1)} ms (ledger timestamps)`,
    {
      activityMs: +mean(activity).toFixed(1),
      readMs: +mean(pageTimes.map((p) => p.read_ms)).toFixed(1),
      writeMs: +mean(pageTimes.map((p) => p.write_ms)).toFixed(1),
    },
  );
  figures.add(
    'temporal round trip per page',
    `${roundTrip.toFixed(1)} ms (history: scheduled → completed minus the activity's own time ${mean(dispatch).toFixed(1)} ms, ` +
      `completion → next workflow task completed ${mean(reaction).toFixed(1)} ms); cross-check: copy phase × ${concurrency} in flight / ${pagesTotal} pages − activity time = ` +
      `${(cycleMs - mean(activity)).toFixed(1)} ms`,
    {
      ms: +roundTrip.toFixed(1),
      dispatchMs: +mean(dispatch).toFixed(1),
      reactionMs: +mean(reaction).toFixed(1),
      cycleEstimateMs: +(cycleMs - mean(activity)).toFixed(1),
    },
  );
  const childText = [...new Set(hist.children.map((c) => c.workflowType))]
    .map((type) => {
      const xs = hist.children.filter((c) => c.workflowType === type);
      return `${xs.length} ${type} (max ${fmtInt(Math.max(...xs.map((c) => c.events)))} events)`;
    })
    .join(', ');
  figures.add(
    'history events per run',
    `max ${fmtInt(maxPerRun)} over ${hist.runs.length} RebuildCatalog run(s) [${parentEvents.map(fmtInt).join(', ')}] (target < 10,000: ${maxPerRun < 10_000 ? 'met' : 'MISSED'}); children: ${childText || 'none'}`,
    { maxPerRun, runs: parentEvents, children: hist.children.map((c) => ({ type: c.workflowType, events: c.events })) },
  );
  figures.add(
    'history events per million jobs',
    `${fmtInt((allEvents / o.jobs) * 1e6)} (${fmtInt(allEvents)} events in all runs and children for ${fmtInt(o.jobs)} jobs)`,
    Math.round((allEvents / o.jobs) * 1e6),
  );
}

/** Prints the worker's peak RSS (VmHWM), its RSS when the rebuild started and at its highest sample. */
function reportMemory(ctx: BenchContext, run: Run, worker: WorkerProcess): void {
  const mem = run.mem;
  const rss = run.sampler.rss.get(worker.pid);
  const rssAtStartKb = rss?.startKb ?? NaN;
  const rssMaxAt = rss?.maxRssAt ?? NaN;
  const nodeOptions = ctx.o.workerNodeOptions;
  ctx.figures.add(
    'worker peak RSS',
    mem
      ? `${(mem.hwmKb / 1024).toFixed(0)} MB (VmHWM of worker pid ${worker.pid}${nodeOptions ? `, NODE_OPTIONS=${nodeOptions}` : ''}; RSS when the rebuild started ${(rssAtStartKb / 1024).toFixed(0)} MB, ` +
          `highest sample at +${fmtS(rssMaxAt - run.started)} (${rssMaxAt <= run.phases.last_commit ? 'copy phase' : 'after the copy phase'}), at the end ${(mem.rssKb / 1024).toFixed(0)} MB; target < 300 MB: ${mem.hwmKb / 1024 < 300 ? 'met' : 'MISSED'})`
      : 'unavailable (no /proc)',
    mem ? Math.round(mem.hwmKb / 1024) : null,
  );
}

/**
 * Runs (a) on the Temporal server at `temporal.address` (process `temporal.pid`, sampled for CPU)
 * with one worker, prints its figures, and stops the worker (SIGTERM, SIGKILL after 10 s).
 */
export async function runProduct(
  ctx: BenchContext,
  temporal: { address: string; pid: number },
): Promise<ProductOutcome> {
  await ctx.checkpoint();
  const taskQueue = uniqueQueue('bench');
  const extra: Record<string, string> = ctx.o.workerNodeOptions ? { NODE_OPTIONS: ctx.o.workerNodeOptions } : {};
  const worker = await spawnWorker(
    testEnv({ address: temporal.address, configFile: writeConfig(ctx.dbs), taskQueue, extra }),
    { entry: 'product' },
  );
  let tc: Awaited<ReturnType<typeof temporalClient>> | undefined;
  try {
    tc = await temporalClient(temporal.address);
    const run = await rebuild(ctx, temporal.pid, worker, tc, taskQueue);
    const { rate, copyMs } = reportRate(ctx, run);
    await reportPagesAndHistory(ctx, run, copyMs, tc);
    reportMemory(ctx, run, worker);
    worker.kill('SIGTERM');
    await within(worker.exited, 10_000);
    return { rate, copyMs, versionId: run.result.versionId };
  } finally {
    worker.kill('SIGKILL');
    await tc?.close().catch(() => undefined);
  }
}
