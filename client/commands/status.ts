/**
 * `catalog-rebuild status`: the facts of a rebuild (client/rebuild-facts.ts, read once) formatted by
 * the rebuild's state:
 * - closed (completed, failed, cancelled, terminated, timed out): its result or failure and the
 *   catalog database's view, at once, without the `progress` query;
 * - running: the workflow's `progress` query, else (no answer within 5 s) the catalog database with
 *   the pause state of the memo;
 * - paused by Temporal's workflow pause: said so, with the catalog database's view;
 * with the build the rebuild is pinned to, the page activities an operator paused and whether a
 * worker of that build polls the task queue. `--follow` shows it live until the rebuild ends.
 */
import type { Pool } from 'pg';
import type { TemporalSession } from '../index';
import { formatProgress, liveWindowSeconds } from '../status';
import { followSampleOf, followStatus } from '../follow-status';
import type { RebuildFacts } from '../rebuild-facts';
import { livePollersOf, readRebuildFacts } from '../rebuild-facts';
import { retriedStepWarnings } from '../rebuild-warnings';
import type { CommandContext } from './context';
import { ExitCode, withTemporal } from './context';
import { rebuildOutcome } from './outcome';
import type { OpenState } from './status-report';
import {
  buildLines,
  closedReport,
  closedReportLines,
  closedOutcomeOf,
  databaseLines,
  memoPauseLine,
  openStateOf,
  operatorPauseLines,
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
  let temporalError: string | undefined;
  try {
    session = await ctx.connectTemporal();
  } catch (err) {
    temporalError = (err as Error).message;
  }
  let pool: Pool | null = null;
  let poolError: string | null = null;
  try {
    pool = ctx.catalogPool({ purpose: 'cli', max: 2 });
  } catch (err) {
    poolError = (err as Error).message;
  }
  try {
    const facts = await readRebuildFacts(session, pool, o.catalog, {
      temporalError,
      poolError,
      queryTimeoutMs: QUERY_TIMEOUT_MS,
      queryOnlyWithPollers: false,
      noPollerSeconds: liveWindowSeconds(),
      publishReport: true,
    });
    return printStatus(ctx, o, facts, session !== null);
  } finally {
    await pool?.end().catch(() => undefined);
    await session?.close();
  }
}

/** `status --follow`: the facts every second, until the rebuild closes. */
async function followCommand(ctx: CommandContext, s: TemporalSession, o: StatusOptions): Promise<number> {
  let pool: Pool | null = null;
  let poolError: string | null = null;
  try {
    return await followStatus(
      {
        sample: async () => {
          if (!pool && !poolError) {
            try {
              pool = ctx.catalogPool({ purpose: 'cli', max: 2 });
            } catch (err) {
              poolError = (err as Error).message;
            }
          }
          const facts = await readRebuildFacts(s, pool, o.catalog, {
            poolError,
            queryTimeoutMs: QUERY_TIMEOUT_MS,
            queryOnlyWithPollers: false,
            noPollerSeconds: liveWindowSeconds(),
          });
          return followSampleOf(facts, liveWindowSeconds());
        },
        outcome: rebuildOutcome(s, o.catalog, ctx),
      },
      { catalog: o.catalog, taskQueue: s.taskQueue, out: ctx.out, tty: ctx.tty, stallAfterMs: o.stallAfter * 1000 },
    );
  } finally {
    await (pool as Pool | null)?.end().catch(() => undefined);
  }
}

/** Prints the status of the facts (a pure formatter but for `ctx.out`). */
function printStatus(ctx: CommandContext, o: StatusOptions, facts: RebuildFacts, connected: boolean): number {
  const run = facts.run;
  if (!run) return fromDatabaseOnly(ctx, o, facts, connected);
  if (CLOSED.has(run.status)) {
    const outcome = closedOutcomeOf(facts);
    const report = closedReport(facts, outcome);
    if (o.json) ctx.out(JSON.stringify(report));
    else for (const l of closedReportLines(report, outcome)) ctx.out(l);
    return 0;
  }
  const st = openStateOf(facts, Date.now(), liveWindowSeconds());
  if (st.progress) {
    if (o.json)
      ctx.out(
        JSON.stringify({
          answeredBy: 'workflow',
          workersPolling: st.workers,
          build: st.build,
          ...st.progress,
          ...st.paused,
        }),
      );
    else for (const l of [formatProgress(st.progress), ...openExtraLines(facts, st)]) ctx.out(l);
    return 0;
  }
  const fromDb = facts.view?.status ?? null;
  const dbError = facts.databaseError ?? '';
  const note = st.queryError;
  const why = st.workflowPause
    ? `${workflowPauseText(facts.workflowId, st.workflowPause)}; this is the catalog database's view of the latest version`
    : `no worker answered the progress query within 5 s${note && !note.startsWith('no worker answered') ? ` (${note})` : ''}; this is the catalog database's view of the latest version`;
  const state = { workflowStatus: run.status, ...(st.workflowPause ? { workflowPause: st.workflowPause } : {}) };
  if (o.json) {
    ctx.out(
      JSON.stringify({
        answeredBy: 'database',
        note: why,
        workersPolling: st.workers,
        queryError: note,
        build: st.build,
        memo: run.memo ?? null,
        ...state,
        ...st.paused,
        ...(fromDb ?? { catalog: o.catalog, databaseError: dbError }),
      }),
    );
  } else {
    ctx.out(`${why}:`);
    for (const l of fromDb
      ? databaseLines(o.catalog, fromDb)
      : [`the catalog database did not answer either: ${dbError}`])
      ctx.out(l);
    const pause = memoPauseLine(facts, st);
    for (const l of [...(pause ? [pause] : []), ...openExtraLines(facts, st)]) ctx.out(l);
  }
  return 0;
}

/**
 * The lines after a running rebuild's figures: operator pauses, steps Temporal retries after a
 * failure (a plan whose source cannot be reached), its build, no polling worker.
 */
function openExtraLines(facts: RebuildFacts, st: OpenState): string[] {
  const q = facts.pollers.taskQueue;
  const build = st.build ? ` (build ${st.build.buildId})` : '';
  return [
    ...operatorPauseLines(facts.workflowId, st.paused.operatorPausedPages, st.paused.pausedActivities),
    ...retriedStepWarnings(facts.activities).map((w) => `warning: ${w}`),
    ...buildLines(st),
    ...(st.workers === 0
      ? [`warning: no worker polled task queue ${q} in the last ${liveWindowSeconds()} s${build}`]
      : []),
  ];
}

/**
 * The catalog database's view when Temporal has no workflow of the catalog or cannot be asked.
 * @throws ExitCode 1 when the catalog database has no version of the catalog or cannot be read either.
 */
function fromDatabaseOnly(ctx: CommandContext, o: StatusOptions, facts: RebuildFacts, connected: boolean): number {
  const fromDb = facts.view?.status ?? null;
  const dbError = facts.databaseError ?? '';
  const notFound = facts.temporalError === null;
  const temporalError = notFound
    ? ''
    : connected
      ? `Temporal did not describe ${facts.workflowId}: ${facts.temporalError}`
      : facts.temporalError!;
  if (notFound && !fromDb?.latest) {
    throw new ExitCode(
      1,
      `no rebuild of catalog ${o.catalog} has been started (no workflow ${facts.workflowId}, ${fromDb ? 'no version in the catalog database' : `catalog database not readable: ${dbError}`}); start one with: catalog-rebuild start --catalog ${o.catalog} --source NAME`,
    );
  }
  if (!notFound && !fromDb) {
    throw new ExitCode(1, `nothing answers about catalog ${o.catalog}: ${temporalError}; catalog database: ${dbError}`);
  }
  if (!fromDb?.latest) {
    throw new ExitCode(
      1,
      `catalog ${o.catalog} has no version in the catalog database, and Temporal cannot tell about its rebuild (${temporalError})`,
    );
  }
  const note = notFound
    ? `no workflow ${facts.workflowId} on the Temporal service (its history may be past the namespace's retention); this is the catalog database's view of the latest version`
    : `${temporalError}; this is the catalog database's view of the latest version`;
  if (o.json) ctx.out(JSON.stringify({ answeredBy: 'database', note, ...fromDb }));
  else {
    ctx.out(`${note}:`);
    for (const l of databaseLines(o.catalog, fromDb)) ctx.out(l);
  }
  return 0;
}
