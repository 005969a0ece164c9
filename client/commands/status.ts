/**
 * `catalog-rebuild status`: a rebuild as Temporal describes it, then
 * - closed (completed, failed, cancelled, terminated, timed out): its result or failure and the
 *   catalog database's view, at once, without the `progress` query;
 * - running: the workflow's `progress` query, else (no answer within 5 s) the catalog database;
 * - paused by Temporal's workflow pause: said so, with the catalog database's view;
 * with the page activities an operator paused and whether any worker polls the task queue.
 * `--follow` shows it live until the rebuild ends.
 */
import type { Pool } from 'pg';
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { RebuildProgress, TemporalSession } from '../index';
import { getProgress, rebuildHandle } from '../index';
import { catalogStatusFromDatabase, formatProgress, livePollers, liveWindowSeconds } from '../status';
import { followStatus } from '../follow-status';
import type { CommandContext } from './context';
import { ExitCode, withTemporal } from './context';
import { rebuildOutcome } from './outcome';
import type { WorkflowPause } from './status-report';
import {
  closedReport,
  closedReportLines,
  databaseView,
  operatorPauseLines,
  operatorPausedActivities,
  runKeyOf,
  workflowPauseOf,
  workflowPauseText,
} from './status-report';

/** Options of `status`. */
export interface StatusOptions {
  catalog: string;
  /** Print one JSON object. */
  json: boolean;
  /** Live progress until the rebuild ends. */
  follow: boolean;
  /** Warn when no page committed for this long (s). */
  stallAfter: number;
}

/** Milliseconds the `progress` query may take before the catalog database answers instead. */
const QUERY_TIMEOUT_MS = 5_000;

/** Temporal statuses of a closed workflow run. */
const CLOSED = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED', 'TIMED_OUT']);

/**
 * Prints the rebuild's status once (`--json`: one object whose `answeredBy` is `temporal` for a
 * closed rebuild, `workflow` when the query answered, `database` otherwise), or follows it.
 * @returns 0 whenever it can report, whatever the rebuild's outcome; with `follow`, 0 when the
 *   rebuild was published, 1 otherwise.
 * @throws ExitCode 2 for `--follow` with `--json`; ExitCode 1 when the catalog was never rebuilt
 *   (no workflow, no version) or nothing answers (Temporal unreachable and no catalog database).
 */
export async function statusCommand(ctx: CommandContext, o: StatusOptions): Promise<number> {
  if (o.follow && o.json) throw new ExitCode(2, '--follow and --json cannot be combined');
  if (o.follow) return withTemporal(ctx, (s) => followCommand(ctx, s, o));
  let session: TemporalSession | null = null;
  try {
    session = await ctx.connectTemporal();
  } catch (err) {
    return fromDatabaseOnly(ctx, o, { temporalError: (err as Error).message });
  }
  try {
    return await statusOnce(ctx, session, o);
  } finally {
    await session.close();
  }
}

/** `status --follow`: live progress; the catalog database pool is opened only when needed. */
async function followCommand(ctx: CommandContext, s: TemporalSession, o: StatusOptions): Promise<number> {
  const handle = rebuildHandle(s.client, o.catalog);
  let pool: Pool | null = null;
  try {
    return await followStatus(
      {
        query: () => getProgress(handle, QUERY_TIMEOUT_MS),
        fromDatabase: () => {
          pool ??= ctx.catalogPool({ purpose: 'cli', max: 1 });
          return catalogStatusFromDatabase(pool, o.catalog);
        },
        pollers: async () => (await livePollers(s)).length,
        outcome: rebuildOutcome(s, o.catalog, ctx),
      },
      { catalog: o.catalog, taskQueue: s.taskQueue, out: ctx.out, tty: ctx.tty, stallAfterMs: o.stallAfter * 1000 },
    );
  } finally {
    await (pool as Pool | null)?.end().catch(() => undefined);
  }
}

/** `status` without `--follow`: describe the workflow, then report it by its state. */
async function statusOnce(ctx: CommandContext, s: TemporalSession, o: StatusOptions): Promise<number> {
  const handle = rebuildHandle(s.client, o.catalog);
  let desc: WorkflowExecutionDescription;
  try {
    desc = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return fromDatabaseOnly(ctx, o, { notFound: handle.workflowId });
    return fromDatabaseOnly(ctx, o, {
      temporalError: `Temporal did not describe ${handle.workflowId}: ${(err as Error).message}`,
    });
  }
  if (CLOSED.has(desc.status.name)) return closedStatus(ctx, s, o, desc);
  return openStatus(ctx, s, o, desc);
}

/** A closed rebuild: Temporal's result or failure and the catalog database, read at the same time. */
async function closedStatus(
  ctx: CommandContext,
  s: TemporalSession,
  o: StatusOptions,
  desc: WorkflowExecutionDescription,
): Promise<number> {
  const [outcome, db] = await Promise.all([
    rebuildOutcome(s, o.catalog).catch((err: Error) => ({
      code: 1,
      lines: [],
      failure: `the result of ${desc.workflowId} could not be read: ${err.message}`,
      reason: err.message,
    })),
    databaseView(ctx, o.catalog, runKeyOf(desc)),
  ]);
  const report = closedReport(o.catalog, desc, outcome, db);
  if (o.json) ctx.out(JSON.stringify(report));
  else for (const l of closedReportLines(report, outcome)) ctx.out(l);
  return 0;
}

/**
 * A running rebuild: the `progress` query (5 s), else the catalog database; a rebuild paused by
 * Temporal's workflow pause answers no query, so the catalog database answers at once.
 */
async function openStatus(
  ctx: CommandContext,
  s: TemporalSession,
  o: StatusOptions,
  desc: WorkflowExecutionDescription,
): Promise<number> {
  const handle = rebuildHandle(s.client, o.catalog);
  const noPollers = `no worker polled task queue ${s.taskQueue} in the last ${liveWindowSeconds()} s`;
  const pause: WorkflowPause | null = desc.status.name === 'PAUSED' ? workflowPauseOf(desc.raw) : null;
  const activities = operatorPausedActivities(desc.raw);
  let note = '';
  const progress: RebuildProgress | null = pause
    ? null
    : await getProgress(handle, QUERY_TIMEOUT_MS).catch((e: Error) => {
        note = e.message;
        return null;
      });
  // Pollers and (without an answer from the query) the catalog database, at the same time.
  const [workers, view] = await Promise.all([
    livePollers(s)
      .then((p) => p.length)
      .catch(() => -1),
    progress ? null : databaseView(ctx, o.catalog, runKeyOf(desc)),
  ]);
  const fromQuery = progress?.operatorPausedPages ?? [];
  const pages = [...new Set([...fromQuery, ...activities.flatMap((a) => (a.pageNo === null ? [] : [a.pageNo]))])];
  pages.sort((a, b) => a - b);
  const paused = { operatorPausedPages: pages, pausedActivities: activities };
  const extraLines = (): string[] => [
    ...operatorPauseLines(desc.workflowId, pages, activities),
    ...(workers === 0 ? [`warning: ${noPollers}`] : []),
  ];
  if (progress) {
    if (o.json) ctx.out(JSON.stringify({ answeredBy: 'workflow', workersPolling: workers, ...progress, ...paused }));
    else for (const l of [formatProgress(progress), ...extraLines()]) ctx.out(l);
    return 0;
  }
  const fromDb = view?.status ?? null;
  const dbError = view?.error ?? '';
  const why = pause
    ? `${workflowPauseText(desc.workflowId, pause)}; this is the catalog database's view of the latest version`
    : `no worker answered the progress query within 5 s${note && !note.startsWith('no worker answered') ? ` (${note})` : ''}; this is the catalog database's view of the latest version`;
  const state = { workflowStatus: desc.status.name, ...(pause ? { workflowPause: pause } : {}) };
  if (o.json) {
    ctx.out(
      JSON.stringify({
        answeredBy: 'database',
        note: why,
        workersPolling: workers,
        queryError: note,
        ...state,
        ...paused,
        ...(fromDb ?? { catalog: o.catalog, databaseError: dbError }),
      }),
    );
  } else {
    ctx.out(`${why}:`);
    ctx.out(fromDb ? JSON.stringify(fromDb, null, 2) : `the catalog database did not answer either: ${dbError}`);
    for (const l of extraLines()) ctx.out(l);
  }
  return 0;
}

/** Why only the catalog database can answer: no workflow, or no answer from Temporal. */
type NoWorkflow = { notFound: string } | { temporalError: string };

/**
 * The catalog database's view when Temporal has no workflow of the catalog or cannot be asked.
 * @throws ExitCode 1 when the catalog database has no version of the catalog or cannot be read either.
 */
async function fromDatabaseOnly(ctx: CommandContext, o: StatusOptions, why: NoWorkflow): Promise<number> {
  const view = await databaseView(ctx, o.catalog);
  const fromDb = view.status;
  const dbError = view.error ?? '';
  if ('notFound' in why && !fromDb?.latest) {
    throw new ExitCode(
      1,
      `no rebuild of catalog ${o.catalog} has been started (no workflow ${why.notFound}, ${fromDb ? 'no version in the catalog database' : `catalog database not readable: ${dbError}`}); start one with: catalog-rebuild start --catalog ${o.catalog} --source NAME`,
    );
  }
  if ('temporalError' in why && !fromDb) {
    throw new ExitCode(
      1,
      `nothing answers about catalog ${o.catalog}: ${why.temporalError}; catalog database: ${dbError}`,
    );
  }
  if (!fromDb?.latest) {
    throw new ExitCode(
      1,
      `catalog ${o.catalog} has no version in the catalog database, and Temporal cannot tell about its rebuild (${(why as { temporalError: string }).temporalError})`,
    );
  }
  const note =
    'notFound' in why
      ? `no workflow ${why.notFound} on the Temporal service (its history may be past the namespace's retention); this is the catalog database's view of the latest version`
      : `${why.temporalError}; this is the catalog database's view of the latest version`;
  if (o.json) ctx.out(JSON.stringify({ answeredBy: 'database', note, ...fromDb }));
  else {
    ctx.out(`${note}:`);
    ctx.out(JSON.stringify(fromDb, null, 2));
  }
  return 0;
}
