/**
 * `catalog-rebuild start`: checks first that a live worker of the task queue serves the source (from
 * the workers' source records in the catalog database; the CLI never reads `sources` itself), then
 * starts a rebuild, or attaches to the running one of the catalog, and prints a receipt once it is
 * planned.
 */
import type { Pool } from 'pg';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import type { TemporalSession } from '../index';
import { beingCancelled, getProgress, rebuildHandle, startRebuild } from '../index';
import type { LastWorkerSourceRecord } from '../../lib/catalog';
import { lastWorkerSourceRecord, recentWorkerSourceNames } from '../../lib/catalog';
import type { RebuildCatalogInput } from '../../workflows/definitions';
import type { Receipt } from '../receipt';
import { awaitPlan, buildReceipt, formatReceipt, planOfVersionRow } from '../receipt';
import { planRetryLine } from '../temporal-facts';
import type { CommandContext } from './context';
import { ExitCode, withTemporal } from './context';
import { formatDryRun, runDryRun } from './dry-run';
import { waitAndReport } from './outcome';
import type { StartCheckSettings } from './start-settings';
import { startCheckSettings } from './start-settings';
import type { PollerWatchMemory } from './start-watch';
import { interruptedLines, onInterrupt, whileWatchingPollers } from './start-watch';
export { interruptedLines, noPollerLine } from './start-watch';
export { START_ENV, startCheckSettings } from './start-settings';
export type { StartCheckSettings } from './start-settings';

/** Options of `start` (parsed and range-checked by the CLI). */
export interface StartOptions {
  catalog: string;
  source: string;
  /** Jobs per page (`--page-size`); absent: the plan sizes pages from measured cost. */
  pageSize?: number;
  /** Pages in flight. */
  concurrency: number;
  allowShrink: boolean;
  /** Rebuild each job's file records too (`--files`). */
  files?: boolean;
  /** Build the next version from the active one plus what changed (`--refresh`). */
  refresh?: boolean;
  /** Print what the rebuild would do and change nothing (`--dry-run`). */
  dryRun?: boolean;
  /** `--verify full`: re-read everything (a refresh becomes a full rebuild), and hash the catalog's rows in the reconciliation. */
  verify?: 'full';
  /** Retired versions kept with their rows after the publish. */
  retention: number;
  maxPagesPerRun?: number;
  /** Page heartbeat timeout (ms). */
  heartbeatTimeoutMs?: number;
  /** Wait for the rebuild to end. */
  wait: boolean;
  /** Print the receipt as one JSON object (and nothing else on stdout). */
  json?: boolean;
}

/** What the catalog database says about a task queue's workers. */
export interface SourceRecords {
  /** Source names recorded within the settings' `recordMaxAgeMs` (any order, may repeat). */
  recentNames: string[];
  /** The newest record of the task queue; null when none. */
  last: LastWorkerSourceRecord | null;
  /** The catalog database has no `worker_source` table (its schema predates migration 3). */
  noTable?: boolean;
}

/** What `start` does next. */
export type StartDecision =
  | { kind: 'accept' }
  | { kind: 'unknown-source'; exitCode: 2; message: string }
  | { kind: 'wait'; message: string }
  | { kind: 'no-worker'; exitCode: 1; message: string };

/** `ms` as `N s` below two minutes, else `N min` (rounded). */
export function formatWait(ms: number): string {
  return ms < 120_000 ? `${Math.round(ms / 100) / 10} s` : `${Math.round(ms / 6_000) / 10} min`;
}

/**
 * The start check, a pure function: accept a source recorded for the task queue recently; refuse
 * any other (exit 2, naming the sources the workers serve, sorted); with no recent record, wait up
 * to `workerWaitMs` for a worker, then give up (exit 1, naming the task queue and `npm run worker`).
 * @param o.waitedMs time spent waiting for a worker so far (ms).
 */
export function decideStart(o: {
  source: string;
  taskQueue: string;
  records: SourceRecords;
  waitedMs: number;
  settings: StartCheckSettings;
}): StartDecision {
  const { source, taskQueue: q, records, settings } = o;
  const names = [...new Set(records.recentNames)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (names.length) {
    if (names.includes(source)) return { kind: 'accept' };
    return {
      kind: 'unknown-source',
      exitCode: 2,
      message: `unknown source "${source}"; the workers of task queue ${q} serve: ${names.join(', ')}`,
    };
  }
  const upTo = formatWait(settings.workerWaitMs);
  if (o.waitedMs >= settings.workerWaitMs) {
    const old = records.noTable
      ? '; the catalog database has no worker_source table, so its workers predate migration 3 and do not record their sources: upgrade them'
      : '';
    return {
      kind: 'no-worker',
      exitCode: 1,
      message: `no worker of task queue ${q} appeared within ${upTo}: start one with \`npm run worker\` (CATALOG_REBUILD_TASK_QUEUE=${q}) and run start again${old}`,
    };
  }
  const why = records.noTable
    ? `the catalog database has no worker source records yet (schema before migration 3)`
    : records.last
      ? `no worker of task queue ${q} has recorded its sources within the last ${formatWait(settings.recordMaxAgeMs)} (last at ${records.last.recordedAt})`
      : `no worker of task queue ${q} has recorded its sources yet`;
  return { kind: 'wait', message: `${why}; waiting up to ${upTo} for a worker of task queue ${q}` };
}

/**
 * The records of `taskQueue`.
 * @throws the database error, except 42P01 (no `worker_source` table), which reads as no records.
 */
async function readSourceRecords(pool: Pool, taskQueue: string, maxAgeMs: number): Promise<SourceRecords> {
  try {
    return {
      recentNames: await recentWorkerSourceNames(pool, taskQueue, maxAgeMs / 1000),
      last: await lastWorkerSourceRecord(pool, taskQueue),
    };
  } catch (err) {
    if ((err as { code?: string }).code === '42P01') return { recentNames: [], last: null, noTable: true };
    throw err;
  }
}

/**
 * Runs the start check until it accepts: prints the wait message once (on `note`) while no worker
 * has recorded.
 * @throws ExitCode 2 for a source no worker serves (its line printed on `note`), ExitCode 1 when no
 *   worker recorded within the wait.
 */
async function checkSource(
  pool: Pool,
  o: { source: string; taskQueue: string; settings: StartCheckSettings; note: (line: string) => void },
): Promise<void> {
  const t0 = Date.now();
  let announced = false;
  for (;;) {
    const records = await readSourceRecords(pool, o.taskQueue, o.settings.recordMaxAgeMs);
    const d = decideStart({ ...o, records, waitedMs: Date.now() - t0 });
    if (d.kind === 'accept') return;
    if (d.kind === 'unknown-source') {
      o.note(d.message);
      throw new ExitCode(d.exitCode);
    }
    if (d.kind === 'no-worker') throw new ExitCode(d.exitCode, d.message);
    if (!announced) o.note(d.message);
    announced = true;
    const left = o.settings.workerWaitMs - (Date.now() - t0);
    await new Promise((r) => setTimeout(r, Math.max(0, Math.min(o.settings.pollMs, left))));
  }
}

/** Whether the catalog's rebuild runs now (`start` then attaches). */
async function isRunning(handle: WorkflowHandle): Promise<boolean> {
  try {
    return (await handle.describe()).status.name === 'RUNNING';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * When the catalog's running rebuild is being cancelled (`cancel` signal or Temporal cancellation),
 * says so on `note` and waits up to `settings.cancelWaitMs` for it to end, so that `start` starts a
 * new rebuild instead of attaching to one about to end.
 * @returns true when such a rebuild ended (a new one may start), false when none is being cancelled.
 * @throws ExitCode 1 when it has not ended within the wait (naming `wait` to follow it).
 */
async function endCancelledRebuild(
  handle: WorkflowHandle,
  catalog: string,
  settings: StartCheckSettings,
  note: (line: string) => void,
): Promise<boolean> {
  if (!(await beingCancelled(handle))) return false;
  const seconds = Math.round(settings.cancelWaitMs / 1000);
  note(
    `the rebuild ${handle.workflowId} is being cancelled: waiting up to ${seconds} s for it to end before a new one starts`,
  );
  let timer: NodeJS.Timeout | undefined;
  const ended = await Promise.race([
    handle.result().then(
      () => 'ended' as const,
      () => 'ended' as const,
    ),
    new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), settings.cancelWaitMs))),
  ]).finally(() => clearTimeout(timer));
  if (ended === 'timeout' && (await isRunning(handle))) {
    throw new ExitCode(
      1,
      `the rebuild ${handle.workflowId} is being cancelled and did not end within ${seconds} s; start again once \`catalog-rebuild wait --catalog ${catalog}\` returns`,
    );
  }
  return true;
}

/** Waits for the plan (version row or `progress` query) and builds the receipt. */
async function receiptOf(
  s: TemporalSession,
  handle: WorkflowHandle,
  o: StartOptions & { attached: boolean; planWaitMs: number },
  pool: () => Pool,
): Promise<Receipt> {
  const desc = await handle.describe();
  const firstRunId = desc.raw.workflowExecutionInfo?.firstRunId || desc.runId;
  const plan = await awaitPlan(
    {
      readPlan: planOfVersionRow(pool, handle.workflowId, firstRunId),
      queryProgress: (ms) => getProgress(handle, ms),
      closed: async () => !(await isRunning(handle)),
    },
    o.planWaitMs,
  );
  return buildReceipt(
    {
      catalog: o.catalog,
      workflowId: handle.workflowId,
      taskQueue: s.taskQueue,
      attached: o.attached,
      files: !!o.files,
      refresh: !!o.refresh,
      pageSize: o.pageSize ?? null,
      pageSizing: o.pageSize === undefined ? 'auto' : 'fixed',
    },
    plan,
  );
}

/**
 * Checks the source (new starts only: attaching to the running rebuild behaves as before), starts
 * the rebuild (or attaches), prints the workflow id and the receipt (`json`: only the receipt, one
 * JSON object); with `wait`, then waits and prints the result (`json`: on `note`).
 * @param note diagnostics (stderr for the CLI): the wait message and the unknown source line.
 * @param env where the waits may be overridden ({@link START_ENV}).
 * Once the rebuild started: when its workflow task waits {@link StartCheckSettings.noPollerMs} for a
 * worker, prints {@link noPollerLine} on `note` within the plan wait; Ctrl-C prints
 * {@link interruptedLines} on `note` (the rebuild goes on) and ends the process as SIGINT does.
 * @returns 0 (also when the plan was not seen in time: the rebuild runs); with `wait`, 0 when
 *   published, 1 otherwise.
 * @throws ExitCode 2 for a source no live worker serves; ExitCode 1 when no worker of the task queue
 *   recorded its sources within the wait, when the running rebuild has different identifying flags
 *   (naming them), or when the rebuild failed (with `wait`).
 */
export async function startCommand(
  ctx: CommandContext,
  o: StartOptions,
  note: (line: string) => void = ctx.out,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const settings = startCheckSettings(env);
  let stopInterrupt = (): void => undefined;
  return withTemporal(ctx, async (s) => {
    let pool: Pool | undefined;
    let started: WorkflowHandle | undefined;
    const pollerMemory: PollerWatchMemory = {};
    const catalogPool = () => (pool ??= ctx.catalogPool({ purpose: 'cli', max: 2 }));
    // What the plan is asked for, by a dry run as by the rebuild.
    const planned = {
      catalog: o.catalog,
      source: o.source,
      concurrency: o.concurrency,
      ...(o.files ? { files: true } : {}),
      ...(o.refresh ? { refresh: true } : {}),
      ...(o.verify === 'full' ? { verify: 'full' as const } : {}),
    };
    try {
      if (o.dryRun) {
        // A worker plans it (only workers hold the sources' settings): its source must be served.
        await checkSource(catalogPool(), { source: o.source, taskQueue: s.taskQueue, settings, note });
        const plan = await runDryRun(
          s,
          { ...planned, ...(o.pageSize !== undefined ? { pageSize: o.pageSize } : {}) },
          { ...settings, ...(o.json ? {} : { note }) },
        );
        for (const line of o.json ? [JSON.stringify(plan)] : formatDryRun(plan)) ctx.out(line);
        return 0;
      }
      const input: RebuildCatalogInput = {
        ...planned,
        pageSize: o.pageSize,
        allowShrink: o.allowShrink,
        retention: o.retention,
        maxPagesPerRun: o.maxPagesPerRun,
        heartbeatTimeoutMs: o.heartbeatTimeoutMs,
      };
      const check = () => checkSource(catalogPool(), { source: o.source, taskQueue: s.taskQueue, settings, note });
      const current = rebuildHandle(s.client, o.catalog);
      if (!(await isRunning(current))) await check();
      let r = await startRebuild(s.client, input);
      // Attached to a rebuild being cancelled: once it ended, a new rebuild starts (checked as any new one).
      if (r.attached && (await endCancelledRebuild(current, o.catalog, settings, note))) {
        await check();
        r = await startRebuild(s.client, input);
      }
      if (r.attached && r.conflicts.length) {
        throw new ExitCode(
          1,
          `a rebuild of ${o.catalog} is already running with different flags: ${r.conflicts.join('; ')}`,
        );
      }
      if (!o.json) {
        ctx.out(
          `${r.attached ? 'attached to running' : 'started'} rebuild ${r.handle.workflowId} (task queue ${s.taskQueue})`,
        );
      }
      started = r.handle;
      stopInterrupt = onInterrupt(interruptedLines(o.catalog, r.handle.workflowId), note);
      const t1 = Date.now();
      const watchOptions = { taskQueue: s.taskQueue, settings, note, memory: pollerMemory };
      const receipt: Receipt = await whileWatchingPollers(r.handle, watchOptions, () =>
        receiptOf(s, r.handle, { ...o, attached: r.attached, planWaitMs: settings.planWaitMs }, catalogPool),
      );
      // A rebuild that closed before its plan was seen (it failed planning, or a refresh found the
      // catalog up to date): its result, at once; with --json still one object on stdout.
      if (!receipt.planned && !(await isRunning(r.handle))) {
        if (o.json) ctx.out(JSON.stringify(receipt));
        return waitAndReport(s, o.catalog, o.json ? note : ctx.out);
      }
      const lines = formatReceipt(receipt, Date.now() - t1);
      // Not planned in time: say why when the plan is failing and retried.
      const retried = receipt.planned ? null : await planRetryLine(r.handle).catch(() => null);
      if (retried) lines[0] += `; ${retried}`;
      if (!o.json) for (const line of lines) ctx.out(line);
      else {
        ctx.out(JSON.stringify(receipt));
        if (!receipt.planned) note(lines[0]);
      }
    } finally {
      await (pool as Pool | undefined)?.end().catch(() => undefined);
    }
    try {
      // While it waits, a rebuild that no worker serves (the only one died) is named every minute.
      const watchWait = {
        taskQueue: s.taskQueue,
        settings,
        note,
        repeatMs: settings.noPollerRepeatMs,
        memory: pollerMemory,
      };
      return o.wait
        ? await whileWatchingPollers(started!, watchWait, () => waitAndReport(s, o.catalog, o.json ? note : ctx.out))
        : 0;
    } finally {
      stopInterrupt();
    }
  }).finally(() => stopInterrupt());
}
