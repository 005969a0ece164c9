/**
 * One view of a rebuild: {@link readRebuildFacts} reads, once and mostly at the same time, what
 * Temporal and the catalog database know about a catalog's latest rebuild. `status`, `status
 * --follow` and `check --rebuild` are formatters of these facts (client/commands/status.ts,
 * client/follow-status.ts, client/rebuild-health.ts):
 * - Temporal: one `describe()` of the latest run of `catalog-rebuild/<catalog>` (status, the
 *   `RebuildPhase` search attribute, the memo with the pause state, the build the run is pinned to,
 *   Temporal's workflow pause, pending activities and those of running children), the result or
 *   failure of a closed run, and the pollers of its task queue with the build each polls as;
 * - the `progress` query when a worker of the rebuild's build answers within a short timeout;
 * - the catalog database: the version this rebuild planned with its ledger (pages, checkpoint,
 *   rows, rejects, retries, commit rate over a recent window, p99 page time), its latest
 *   reconciliation, the active version, the newest event and, once published, its publish report.
 * The pause state comes from the query when a worker answers, else from the memo; nothing reads the
 * history.
 */
import type { WorkflowExecutionDescription } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Pool } from 'pg';
import { readLedgerProgress, readPageTimeP99 } from '../lib/catalog';
import type { RenumberedJobsReport } from '../lib/catalog/event-reads';
import { readRenumberedJobs } from '../lib/catalog/event-reads';
import type { RebuildCatalogResult, RebuildMemo, RebuildProgress } from '../workflows/definitions';
import { rebuildWorkflowId } from '../workflows/names';
import type { TemporalSession } from './index';
import { getProgress } from './index';
import type { DatabaseStatus } from './status';
import { catalogStatusFromDatabase } from './status';
import { DEFAULT_REBUILD_THRESHOLDS } from './rebuild-thresholds';
import { closedOutcome, describeLatest, listPollers, message, pendingActivities, runFact } from './temporal-facts';

/** Window of the catalog database's commit rate (s): rows of the pages committed in it / its length. */
export const RATE_WINDOW_SECONDS = 60;
/** Recent committed pages whose times give the p99 page time. */
export const P99_PAGES = 200;
/**
 * A rate reads 0 once no page committed for max(this floor, {@link RATE_IDLE_P99_FACTOR} × p99 page
 * time) (s): the window's rows are history then, not a rate.
 */
export const RATE_IDLE_FLOOR_SECONDS = 5;
/** Multiple of the p99 page time after which a silent ledger's rate reads 0. */
export const RATE_IDLE_P99_FACTOR = 2;

/** The Worker Deployment build a run is pinned to (or runs on), from Temporal's versioning info. */
export interface PinnedBuild {
  deploymentName: string;
  buildId: string;
  /** PINNED or AUTO_UPGRADE (rebuilds are pinned). */
  behavior: string;
  /** Set by a versioning override (`temporal workflow update-options --versioning-override-…`). */
  override: boolean;
}

/** A pending activity of the rebuild or of one of its running children. */
export interface PendingActivityFact {
  /** The workflow it belongs to (the rebuild or a child). */
  workflowId: string;
  activityId: string;
  activityType: string;
  /** The page it copies, when known (activity id `page-<n>` or heartbeat details). */
  pageNo: number | null;
  /** Current attempt, from 1. */
  attempt: number;
  /** Temporal's pending state: SCHEDULED, STARTED, CANCEL_REQUESTED, PAUSE_REQUESTED, PAUSED. */
  state: string;
  /** Paused by an operator (`temporal activity pause`). */
  paused: boolean;
  /** Who paused it, why and when (ms since epoch), when paused; unknown parts are null. */
  pausedBy?: { identity: string | null; reason: string | null; atMs: number | null } | null;
  /** Heartbeat timeout (ms); null when the activity has none. */
  heartbeatTimeoutMs: number | null;
  /** Times (ms since epoch): last heartbeat, start of the current or last attempt, next attempt. */
  lastHeartbeatAtMs: number | null;
  lastStartedAtMs: number | null;
  nextAttemptAtMs: number | null;
  /** Failure of the latest finished attempt; null when no attempt failed. */
  lastFailure: null | {
    message: string;
    /** ApplicationFailure type (e.g. DB_TRANSIENT), null for other failures. */
    type: string | null;
    /** A timeout (heartbeat, start-to-close, …), e.g. a worker that died. */
    timeout: boolean;
  };
}

/** The latest run of the rebuild workflow, from `describe()` and, once closed, its result or failure. */
export interface RunFact {
  runId: string;
  /** Run id of the rebuild's first run (keys the version it planned); default `runId`. */
  firstRunId?: string;
  /** Temporal status: RUNNING, PAUSED, COMPLETED, FAILED, CANCELLED, TERMINATED, TIMED_OUT, … */
  status: string;
  /** Start of this run (ms since epoch). */
  startedAtMs: number;
  /** Close of this run (ms since epoch); null or absent while it runs. */
  closedAtMs?: number | null;
  /** The run's task queue; absent: the session's. */
  taskQueue?: string;
  /** The `RebuildPhase` search attribute (planning, copying, …); null when unset. */
  phase: string | null;
  /** The memo (pause state as the workflow last recorded it); null or absent when none. */
  memo?: RebuildMemo | null;
  /** The build the run is pinned to; null or absent before its first workflow task completed. */
  build?: PinnedBuild | null;
  /** A workflow task is scheduled or running (e.g. a signal that no worker has run yet). */
  workflowTaskPending?: boolean;
  /** Reason of a failed, cancelled, terminated or timed-out run (deepest cause's message). */
  failure: string | null;
  /** Result of a completed run. */
  result: RebuildCatalogResult | null;
  /** Temporal's own workflow pause (`temporal workflow pause`), when the run is paused so. */
  workflowPause: null | { identity: string; reason: string; pausedAtMs: number | null };
}

/** The `progress` query's answer (the fields every formatter reads; `status` prints all of it). */
export type ProgressFact = Pick<
  RebuildProgress,
  'phase' | 'paused' | 'pagesDone' | 'pagesTotal' | 'rowsPerSecond' | 'retries'
> &
  Partial<RebuildProgress>;

/** What the catalog database says about the version the rebuild builds. */
export interface DatabaseFact {
  versionId: string;
  /** Version status: building, verifying, active, failed, abandoned, … */
  status: string;
  pagesTotal: number;
  /** Committed pages (ledger). */
  pagesDone: number;
  /** Rows of the committed pages (ledger). */
  rowsDone?: number;
  /** When the newest page committed / the version was planned (ms since epoch, this machine's clock). */
  lastCommitAtMs: number | null;
  createdAtMs: number;
  /**
   * Rows committed per second over the last {@link RATE_WINDOW_SECONDS}; 0 once no page committed
   * for max(5 s, 2 × p99 page time) ({@link commitRate}).
   */
  rowsPerSecond: number;
  /** Retries: for each committed page, the attempts before the one that committed it. */
  retries: number;
  /** 99th percentile of recent page times (ms); null before the first commit. */
  p99PageMs: number | null;
  failureReason: string | null;
}

/** A poller the server lists on the task queue. */
export interface PollerSeen {
  identity: string;
  /** The Worker Deployment build it polls as; null for an unversioned worker. */
  buildId: string | null;
  /** Its newest poll (ms since epoch, the server's clock); null when not recorded. */
  lastPollAtMs: number | null;
}

/** The task queue's pollers. */
export interface PollerFacts {
  taskQueue: string;
  /** The newest poll of any worker (ms since epoch); null when none is listed. */
  lastPollAtMs: number | null;
  /** Every poller listed (absent: not read). */
  seen?: PollerSeen[];
  /** Why the pollers could not be read; null when they were. */
  error: string | null;
}

/** Everything known about a catalog's latest rebuild. */
export interface RebuildFacts {
  catalog: string;
  /** `catalog-rebuild/<catalog>`. */
  workflowId: string;
  /** Set when Temporal could not be reached or asked (the verdict is UNKNOWN). */
  temporalError: string | null;
  /** The latest run; null when the workflow does not exist (no rebuild ever ran, or past retention). */
  run: RunFact | null;
  /** The `progress` query's answer; null when no worker answered in time (or it was not asked). */
  progress: ProgressFact | null;
  /** Why the query has no answer (`not asked: …` when it was not sent); absent or null when it answered. */
  queryError?: string | null;
  /** Pending activities of the run and of its running children. */
  activities: PendingActivityFact[];
  pollers: PollerFacts;
  /** The rebuild's version in the catalog database; null when not planned yet or unreadable. */
  database: DatabaseFact | null;
  /** Why the catalog database could not be read; null when it was. */
  databaseError: string | null;
  /**
   * The catalog database's view as `status` prints it (the rebuild's version, or the latest version
   * when Temporal has no run) and, once published, the renumbered job ids; absent or null when unread.
   */
  view?: { status: DatabaseStatus; renumbered: RenumberedJobsReport | null } | null;
}

/** Options of {@link readRebuildFacts}. */
export interface ReadFactsOptions {
  /** Why the catalog database is not open (pool null); default `not configured`. */
  poolError?: string | null;
  /** How long the `progress` query may take (ms); 0: not asked. Default 2,000. */
  queryTimeoutMs?: number;
  /** Polls older than this count as no worker (s); default 75. */
  noPollerSeconds?: number;
  /** Ask the query only when a worker of the rebuild's build polled within the window (default true). */
  queryOnlyWithPollers?: boolean;
  /** Temporal could not be connected: only the catalog database is read. */
  temporalError?: string;
  /** Read the publish report (renumbered job ids) of a closed rebuild (default false). */
  publishReport?: boolean;
}

/**
 * A rate of committed rows: `rowsInWindow / windowSeconds`, rounded, or 0 when the newest commit is
 * older than max({@link RATE_IDLE_FLOOR_SECONDS}, {@link RATE_IDLE_P99_FACTOR} × `p99PageMs`): a
 * ledger that stopped moving has no rate (a worker died, the rebuild is paused), whatever the window
 * still holds. Pure.
 */
export function commitRate(
  rowsInWindow: number,
  windowSeconds: number,
  secondsSinceLastCommit: number | null,
  p99PageMs: number | null,
): number {
  if (secondsSinceLastCommit === null) return 0;
  const idleLimit = Math.max(RATE_IDLE_FLOOR_SECONDS, (RATE_IDLE_P99_FACTOR * (p99PageMs ?? 0)) / 1000);
  return secondsSinceLastCommit > idleLimit ? 0 : Math.round(rowsInWindow / windowSeconds);
}

/**
 * The pollers that count as the rebuild's workers at `nowMs`: those of the build the run is pinned
 * to (any build when not known) whose newest poll is within `windowSeconds`. Pure.
 */
export function livePollersOf(
  f: Pick<RebuildFacts, 'run' | 'pollers'>,
  nowMs: number,
  windowSeconds: number,
): PollerSeen[] {
  const build = f.run?.build?.buildId ?? null;
  return (f.pollers.seen ?? []).filter(
    (p) =>
      (build === null || p.buildId === build) &&
      (p.lastPollAtMs === null || nowMs - p.lastPollAtMs <= windowSeconds * 1000),
  );
}

/**
 * Reads the facts about the latest rebuild of `catalog` (see the module comment). Never throws:
 * what Temporal cannot answer is `temporalError`, what the catalog database cannot answer is
 * `databaseError`. `session` null (with `opts.temporalError`) reads only the catalog database;
 * `pool` null (with `opts.poolError`) only Temporal.
 */
export async function readRebuildFacts(
  session: TemporalSession | null,
  pool: Pool | null,
  catalog: string,
  opts: ReadFactsOptions = {},
): Promise<RebuildFacts> {
  const workflowId = rebuildWorkflowId(catalog);
  const facts: RebuildFacts = {
    catalog,
    workflowId,
    temporalError: session ? null : (opts.temporalError ?? 'not connected'),
    run: null,
    progress: null,
    queryError: null,
    activities: [],
    pollers: { taskQueue: session?.taskQueue ?? '', lastPollAtMs: null, seen: [], error: null },
    database: null,
    databaseError: pool ? null : (opts.poolError ?? 'not configured'),
    view: null,
  };
  let desc: WorkflowExecutionDescription | null = null;
  if (session) {
    try {
      desc = await describeLatest(session.client, workflowId);
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) facts.temporalError = message(err);
    }
  }
  if (!session || !desc) {
    if (pool) await readDatabase(pool, facts, undefined, false);
    return facts;
  }
  const d = desc;
  const run = runFact(d);
  facts.run = run;
  facts.pollers.taskQueue = d.taskQueue;
  const open = run.status === 'RUNNING' || run.status === 'PAUSED';
  const windowS = opts.noPollerSeconds ?? DEFAULT_REBUILD_THRESHOLDS.noPollerSeconds;
  const polled = listPollers(session, d.taskQueue).then(
    (seen) => {
      facts.pollers.seen = seen;
      for (const p of seen)
        if (
          p.lastPollAtMs !== null &&
          (facts.pollers.lastPollAtMs === null || p.lastPollAtMs > facts.pollers.lastPollAtMs)
        )
          facts.pollers.lastPollAtMs = p.lastPollAtMs;
    },
    (err) => {
      facts.pollers.error = message(err);
    },
  );
  const query = async (): Promise<void> => {
    const timeoutMs = opts.queryTimeoutMs ?? 2_000;
    if (run.status === 'PAUSED') return void (facts.queryError = "not asked: Temporal's workflow pause");
    if (timeoutMs <= 0) return void (facts.queryError = 'not asked');
    if (opts.queryOnlyWithPollers !== false) {
      await polled;
      if (!facts.pollers.error && livePollersOf(facts, Date.now(), windowS).length === 0)
        return void (facts.queryError = `not asked: no worker polled within ${windowS} s`);
    }
    try {
      facts.progress = await getProgress(session.client.workflow.getHandle(d.workflowId, d.runId), timeoutMs);
    } catch (err) {
      facts.queryError = message(err);
    }
  };
  await Promise.all([
    polled,
    pool
      ? readDatabase(
          pool,
          facts,
          { workflowId, firstRunId: run.firstRunId ?? run.runId },
          !open && !!opts.publishReport,
        )
      : null,
    open ? null : closedOutcome(session.client, d, run),
    open ? pendingActivities(session.client, d).then((a) => (facts.activities = a)) : null,
    open ? query() : null,
  ]);
  return facts;
}

/**
 * Fills `view` and `database` from the catalog database: the version `run` planned (the latest
 * version when `run` is undefined), its ledger's rate and p99 page time, and with `publishReport`
 * the renumbered job ids of its publish. Errors go to `databaseError`.
 */
async function readDatabase(
  pool: Pool,
  facts: RebuildFacts,
  run: { workflowId: string; firstRunId: string } | undefined,
  publishReport: boolean,
): Promise<void> {
  try {
    const status = await catalogStatusFromDatabase(pool, facts.catalog, run);
    const l = status.latest;
    const renumbered = l && publishReport ? await readRenumberedJobs(pool, facts.catalog, l.versionId) : null;
    facts.view = { status, renumbered };
    if (!l) return;
    const ledger = await readLedgerProgress(pool, l.versionId, RATE_WINDOW_SECONDS);
    const p99 = await readPageTimeP99(pool, l.versionId, P99_PAGES);
    const now = Date.now();
    facts.database = {
      versionId: l.versionId,
      status: l.status,
      pagesTotal: l.pagesTotal,
      pagesDone: l.pagesCommitted,
      rowsDone: ledger.rows,
      lastCommitAtMs: ledger.secondsSinceLastCommit === null ? null : now - ledger.secondsSinceLastCommit * 1000,
      createdAtMs: now - l.secondsSinceCreated * 1000,
      rowsPerSecond: commitRate(ledger.rowsInWindow, RATE_WINDOW_SECONDS, ledger.secondsSinceLastCommit, p99),
      retries: l.retries,
      p99PageMs: p99,
      failureReason: l.failureReason,
    };
  } catch (err) {
    facts.databaseError = message(err);
  }
}
