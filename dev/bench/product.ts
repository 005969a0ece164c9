/**
 * The product's figure: the wall time of `catalog-rebuild start --catalog bench --source director
 * --wait` (the real CLI, bin/catalog-rebuild.js, as a child process) with default flags (no
 * --page-size unless the bench was given one, never --concurrency; --files with `bench --files`) against N worker processes
 * (the product entry, already polling), source and catalog on the same server. Also: the CPU of
 * every component, where a page's time goes, the Temporal round trip per page, the history sizes
 * and the workers' peak RSS over their process trees.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { projectRoot } from '../../lib/paths';
import type { RebuildCatalogResult } from '../../workflows/definitions';
import { rebuildWorkflowId } from '../../workflows/names';
import { median } from '../harness/faults';
import type { WorkerProcess } from '../harness/harness';
import { spawnWorker, temporalClient, testEnv, uniqueQueue, writeConfig } from '../harness/harness';
import { waitFor, within } from '../harness/wait';
import type { BenchContext } from './context';
import { fmtInt, fmtS, mean } from './context';
import { CpuSampler, cpuText } from './cpu';
import { allHistories } from './history';
import { productWorkerEnv } from '../harness/product-worker-env';

/** A worker's log line once its build is its deployment's current version (worker/deployment.ts `adoptionLine`). */
const CURRENT_BUILD = /this build is current now|this build is the current version/;

/**
 * Waits until every worker is ready as a long-running worker is: polling (spawnWorker) and its build
 * its deployment's current version. The first worker of a fresh deployment makes its build current
 * just after its first poll; until then a new rebuild's first workflow task waits (about 1 s here),
 * a cost of the worker's start, not of the rebuild.
 * @throws Error after 60 s without the worker's line.
 */
export async function workersReady(workers: WorkerProcess[]): Promise<void> {
  for (const w of workers)
    await waitFor('the worker to see its build current', () => CURRENT_BUILD.test(w.output()), { timeoutMs: 60_000 });
}

/** The catalog the bench rebuilds. */
export const CATALOG = 'bench';
/** Label of the workers' CPU. */
export const WORKER = 'worker';
/** The components a missed target is attributed to (the CLI and the bench process are listed but not among them). */
export const COMPONENTS = [WORKER, 'PostgreSQL catalog backends', 'PostgreSQL source backends', 'Temporal server'];

/** What the product measured, for the headline, the ratios and the equivalence check. */
export interface ProductOutcome {
  rows: number;
  /** Wall time of `start --wait` (ms). */
  ms: number;
  /** Rows per second over `ms`. */
  rate: number;
  /** Duration of the copy phase: first page started to last page committed (ms), NaN when unknown. */
  copyMs: number;
  /** The published version (its table holds the product's copy). */
  versionId: string;
  cpu: Record<string, number>;
  /** Highest worker peak RSS (MB, summed VmHWM over its process tree). */
  rssMb: number;
  /** Most events in one workflow run (the rebuild's runs and its children's). */
  maxEvents: number;
}

/** Epoch ms of the phases of a version, from its events, attempts and ledger (NaN where unknown). */
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
  firstRunId: string;
  started: number;
  ms: number;
  sampler: CpuSampler;
  cpu: Record<string, number>;
  phases: Phases;
  cliOutput: string;
}

type Tc = Awaited<ReturnType<typeof temporalClient>>;

async function phasesOf(ctx: BenchContext, versionId: string): Promise<Phases> {
  try {
    const { rows } = await ctx.dbs.catalogPool.query<Phases>(
      `SELECT (SELECT extract(epoch FROM min(created_at)) * 1000 FROM event WHERE version_id = $1 AND kind = 'planned')::float8 AS planned,
              (SELECT extract(epoch FROM min(started_at)) * 1000 FROM page_attempt WHERE version_id = $1)::float8 AS first_page,
              (SELECT extract(epoch FROM max(committed_at)) * 1000 FROM page WHERE version_id = $1)::float8 AS last_commit,
              (SELECT extract(epoch FROM max(created_at)) * 1000 FROM event WHERE version_id = $1 AND kind = 'reconciled')::float8 AS reconciled,
              (SELECT extract(epoch FROM max(created_at)) * 1000 FROM event WHERE version_id = $1 AND kind = 'published')::float8 AS published`,
      [versionId],
    );
    const p = rows[0];
    return Object.fromEntries(Object.entries(p).map(([k, v]) => [k, v ?? NaN])) as unknown as Phases;
  } catch {
    return { planned: NaN, first_page: NaN, last_commit: NaN, reconciled: NaN, published: NaN };
  }
}

/** Where a page's time goes (ledger timestamps: attempt registered → ledger row inserted = read; → committed = write transaction). */
async function pageTimesOf(ctx: BenchContext, versionId: string): Promise<{ read_ms: number; write_ms: number }[]> {
  try {
    const { rows } = await ctx.dbs.catalogPool.query<{ read_ms: number; write_ms: number }>(
      `SELECT extract(epoch FROM p.started_at - a.started_at)::float8 * 1000 AS read_ms,
              extract(epoch FROM p.committed_at - p.started_at)::float8 * 1000 AS write_ms
       FROM page p JOIN page_attempt a ON a.version_id = p.version_id AND a.page_no = p.page_no AND a.attempt = p.attempt
       WHERE p.version_id = $1`,
      [versionId],
    );
    return rows;
  } catch {
    return [];
  }
}

/** Runs the CLI `start --wait` as a child process (its own process group); resolves when it exits. */
function runStart(
  env: NodeJS.ProcessEnv,
  args: string[],
  onSpawn: (pid: number) => void,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [path.join(projectRoot(), 'bin/catalog-rebuild.js'), ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  onSpawn(child.pid!);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output })));
}

/** Starts the rebuild with the CLI and waits for it, sampling CPU and the workers' memory. */
async function rebuild(
  ctx: BenchContext,
  temporalPid: number,
  workers: WorkerProcess[],
  tc: Tc,
  env: NodeJS.ProcessEnv,
): Promise<Run> {
  const bench = ['catalog-rebuild:bench', 'catalog-rebuild:test'];
  const sampler = new CpuSampler(
    ctx.admin,
    { [COMPONENTS[0]]: workers.map((w) => w.pid), [COMPONENTS[3]]: [temporalPid] },
    [
      { label: 'CLI', datname: ctx.catalogDb, appPrefix: 'catalog-rebuild:cli:' },
      { label: COMPONENTS[1], datname: ctx.catalogDb, excludeAppPrefixes: [...bench, 'catalog-rebuild:cli:'] },
      { label: COMPONENTS[2], datname: ctx.sourceDb, excludeAppPrefixes: bench },
    ],
    workers.map((w) => w.pid),
  );
  await sampler.start();
  const args = ['start', '--catalog', CATALOG, '--source', 'director', '--wait'];
  if (ctx.o.pageSize !== undefined) args.push('--page-size', String(ctx.o.pageSize));
  if (ctx.o.files !== undefined) args.push('--files');
  const started = Date.now();
  const { code, output } = await runStart(env, args, (pid) => sampler.addTree('CLI', pid));
  const ms = Date.now() - started;
  const cpu = await sampler.stop();
  if (code !== 0) throw new Error(`catalog-rebuild ${args.join(' ')} exited with ${code}:\n${output}`);
  const handle = tc.client.workflow.getHandle(rebuildWorkflowId(CATALOG));
  const described = await handle.describe();
  const firstRunId = described.raw.workflowExecutionInfo?.firstRunId || described.runId;
  const result = (await handle.result()) as RebuildCatalogResult;
  if (!result.published) throw new Error(`the product's rebuild ended unpublished: ${JSON.stringify(result)}`);
  return {
    result,
    handle,
    firstRunId,
    started,
    ms,
    sampler,
    cpu,
    phases: await phasesOf(ctx, result.versionId),
    cliOutput: output,
  };
}

/** Prints the product's rate with its phases, and CPU (whole run, copy phase, rest). */
function reportRate(ctx: BenchContext, run: Run): { rate: number; copyMs: number } {
  const { figures, o } = ctx;
  const { result, phases, started, ms } = run;
  const rows = result.rowsUpserted;
  const rate = rows / (ms / 1000);
  const copyMs = phases.last_commit - phases.first_page;
  figures.add(
    'product (catalog-rebuild start --wait)',
    `${fmtInt(rate)} rows/s (${fmtInt(rows)} rows in ${fmtS(ms)}, wall time of the CLI child process; ${o.workers} worker process(es), ` +
      `${o.pageSize !== undefined ? `--page-size ${o.pageSize}` : 'default flags'}; plan ${fmtS(phases.planned - started)}, ` +
      `copy phase ${fmtS(copyMs)} = ${fmtInt(rows / (copyMs / 1000))} rows/s, seal + reconcile ${fmtS(phases.reconciled - phases.last_commit)}, ` +
      `publish ${fmtS(phases.published - phases.reconciled)}, to exit ${fmtS(started + ms - phases.published)}; ` +
      `${fmtInt(result.pagesTotal)} pages, ${result.retries} retries, ${result.runs} run(s))`,
    {
      rows,
      ms,
      rowsPerSecond: Math.round(rate),
      workers: o.workers,
      pageSize: o.pageSize ?? null,
      pagesTotal: result.pagesTotal,
      copyMs: Number.isFinite(copyMs) ? Math.round(copyMs) : null,
      copyRowsPerSecond: Number.isFinite(copyMs) ? Math.round(rows / (copyMs / 1000)) : null,
      retries: result.retries,
      runs: result.runs,
    },
  );
  figures.add('product CPU', cpuText(run.cpu, rows), run.cpu);
  if (Number.isFinite(phases.last_commit)) {
    const copyCpu = run.sampler.totalsAt(phases.last_commit);
    const restCpu = Object.fromEntries(Object.entries(run.cpu).map(([k, v]) => [k, v - (copyCpu[k] ?? 0)]));
    figures.add('product CPU until the last page committed', cpuText(copyCpu, rows), copyCpu);
    figures.add('product CPU after it (seal, reconcile, publish)', cpuText(restCpu, rows), restCpu);
  }
  return { rate, copyMs };
}

const ms1 = (x: number) => (Number.isFinite(x) ? +x.toFixed(1) : null);

/** Prints where a page's time goes, the Temporal round trip per page and the history sizes; returns the most events in one run. */
async function reportPagesAndHistory(ctx: BenchContext, run: Run, copyMs: number, tc: Tc): Promise<number> {
  const { figures } = ctx;
  const pageTimes = await pageTimesOf(ctx, run.result.versionId);
  const hist = await allHistories(tc.client, run.handle.workflowId, run.firstRunId);
  const parentEvents = hist.runs.map((r) => r.events);
  const childEvents = hist.children.map((c) => c.events);
  const maxPerRun = Math.max(...parentEvents, ...childEvents);
  const allEvents = [...parentEvents, ...childEvents].reduce((a, b) => a + b, 0);
  const dispatch = hist.runs.flatMap((r) => r.dispatchMs);
  const reaction = hist.runs.flatMap((r) => r.reactionMs);
  const activity = hist.runs.flatMap((r) => r.activityMs);
  const slots = ctx.concurrency * ctx.o.workers;
  const cycleMs = (copyMs * ctx.concurrency) / run.result.pagesTotal;
  const roundTrip = mean(dispatch) + mean(reaction);
  figures.add(
    'page time',
    `activity ${mean(activity).toFixed(1)} ms per copyPage (median ${median(activity).toFixed(1)}, ${activity.length} completions): ` +
      `source read ${mean(pageTimes.map((p) => p.read_ms)).toFixed(1)} ms, page transaction ${mean(pageTimes.map((p) => p.write_ms)).toFixed(1)} ms (ledger timestamps)`,
    {
      activityMs: ms1(mean(activity)),
      readMs: ms1(mean(pageTimes.map((p) => p.read_ms))),
      writeMs: ms1(mean(pageTimes.map((p) => p.write_ms))),
    },
  );
  figures.add(
    'temporal round trip per page',
    `${roundTrip.toFixed(1)} ms (history: scheduled → completed minus the activity's own time ${mean(dispatch).toFixed(1)} ms, ` +
      `completion → next workflow task completed ${mean(reaction).toFixed(1)} ms); cross-check at ${ctx.concurrency} in flight (${slots} activity slots): ` +
      `copy phase × ${ctx.concurrency} / ${run.result.pagesTotal} pages − activity time = ${(cycleMs - mean(activity)).toFixed(1)} ms`,
    {
      ms: ms1(roundTrip),
      dispatchMs: ms1(mean(dispatch)),
      reactionMs: ms1(mean(reaction)),
      cycleEstimateMs: ms1(cycleMs - mean(activity)),
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
    `max ${fmtInt(maxPerRun)} in any workflow run; ${hist.runs.length} RebuildCatalog run(s) [${parentEvents.map(fmtInt).join(', ')}]; children: ${childText || 'none'} (target < 10,000: ${maxPerRun < 10_000 ? 'met' : 'MISSED'})`,
    { maxPerRun, runs: parentEvents, children: hist.children.map((c) => ({ type: c.workflowType, events: c.events })) },
  );
  figures.add(
    'history events per million jobs',
    `${fmtInt((allEvents / run.result.rowsUpserted) * 1e6)} (${fmtInt(allEvents)} events in all runs and children)`,
    Math.round((allEvents / run.result.rowsUpserted) * 1e6),
  );
  return maxPerRun;
}

/** Prints each worker's peak RSS over its process tree; returns the highest (MB). */
function reportMemory(ctx: BenchContext, run: Run, workers: WorkerProcess[]): number {
  const mb = (kb: number) => Math.round(kb / 1024);
  const per = workers.map((w) => ({ pid: w.pid, m: run.sampler.memory.get(w.pid) }));
  const peaks = per.map((p) => (p.m ? mb(p.m.hwmSumKb) : NaN));
  const peak = Math.max(...peaks);
  const nodeOptions = ctx.o.workerNodeOptions;
  const text = per
    .map(({ pid, m }) =>
      m
        ? `pid ${pid}: ${mb(m.hwmSumKb)} MB over ${m.processes} process(es); sampled RSS sum ${mb(m.rssSumStartKb)} MB at the start, ` +
          `highest ${mb(m.rssSumMaxKb)} MB at +${fmtS(m.rssSumMaxAt - run.started)} (${m.rssSumMaxAt <= run.phases.last_commit ? 'copy phase' : 'after the copy phase'})`
        : `pid ${pid}: unavailable (no /proc)`,
    )
    .join('; ');
  ctx.figures.add(
    'worker peak RSS',
    `${peak} MB (per worker process tree: the sum over every process ever seen in the tree of its VmHWM, read every 200 ms; MALLOC_ARENA_MAX=${productWorkerEnv(process.env).MALLOC_ARENA_MAX} as deployed${nodeOptions ? `; NODE_OPTIONS=${nodeOptions}` : ''}; ` +
      `target < 300 MB: ${peak < 300 ? 'met' : 'MISSED'}) — ${text}`,
    {
      maxMb: Number.isFinite(peak) ? peak : null,
      method: 'sum of VmHWM of each process in the worker process tree, sampled every 200 ms',
      workers: per.map(({ pid, m }) => ({
        pid,
        hwmSumMb: m ? mb(m.hwmSumKb) : null,
        processes: m?.processes ?? null,
        rssSumStartMb: m ? mb(m.rssSumStartKb) : null,
        rssSumMaxMb: m ? mb(m.rssSumMaxKb) : null,
      })),
    },
  );
  return peak;
}

/**
 * Runs the product on the Temporal server at `temporal.address` (process `temporal.pid`, sampled
 * for CPU) with `--workers` worker processes, prints its figures, and stops the workers (SIGTERM,
 * SIGKILL after 10 s).
 */
export async function runProduct(
  ctx: BenchContext,
  temporal: { address: string; pid: number },
): Promise<ProductOutcome> {
  await ctx.checkpoint();
  const taskQueue = uniqueQueue('bench');
  const extra: Record<string, string> = ctx.o.workerNodeOptions ? { NODE_OPTIONS: ctx.o.workerNodeOptions } : {};
  const configFile = writeConfig(ctx.dbs);
  const workers: WorkerProcess[] = [];
  let tc: Tc | undefined;
  try {
    const spawnedAt: number[] = [];
    for (let i = 0; i < ctx.o.workers; i++) {
      spawnedAt.push(Date.now());
      workers.push(
        await spawnWorker(testEnv({ address: temporal.address, configFile, taskQueue, extra }), { entry: 'product' }),
      );
    }
    await workersReady(workers);
    tc = await temporalClient(temporal.address);
    const run = await rebuild(
      ctx,
      temporal.pid,
      workers,
      tc,
      testEnv({ address: temporal.address, configFile, taskQueue }),
    );
    const { rate, copyMs } = reportRate(ctx, run);
    const maxEvents = await reportPagesAndHistory(ctx, run, copyMs, tc);
    const rssMb = reportMemory(ctx, run, workers);
    if (ctx.o.workerLog) {
      const started = `# rebuild started at ${new Date(run.started).toISOString()}; last page committed at ${new Date(run.phases.last_commit).toISOString()}\n`;
      fs.writeFileSync(
        ctx.o.workerLog,
        started +
          workers
            .map((w, i) => `# worker pid ${w.pid} spawned at ${new Date(spawnedAt[i]).toISOString()}\n${w.output()}`)
            .join('\n'),
      );
    }
    for (const w of workers) w.kill('SIGTERM');
    for (const w of workers) await within(w.exited, 10_000);
    return {
      rows: run.result.rowsUpserted,
      ms: run.ms,
      rate,
      copyMs,
      versionId: run.result.versionId,
      cpu: run.cpu,
      rssMb,
      maxEvents,
    };
  } finally {
    for (const w of workers) w.kill('SIGKILL');
    await tc?.close().catch(() => undefined);
  }
}
