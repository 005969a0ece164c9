/**
 * The rebuild health check's verdict (`catalog-rebuild check --catalog C --rebuild`): a pure function
 * from the facts gathered about the latest `RebuildCatalog` run of a catalog (`client/rebuild-check.ts`)
 * to one Nagios status line. Precedence CRITICAL > WARNING > OK; UNKNOWN when no rebuild ever ran or
 * Temporal cannot be reached. CRITICAL: the rebuild failed (or was terminated, timed out), or it runs
 * and no worker polled its task queue for 75 s. WARNING: copying, not paused, no commit for
 * max(2 min, 10 × p99 page time); in other phases an activity not heartbeating for 2 × its heartbeat
 * timeout; three or more pages failing with the same non-timeout error; cancelled; the catalog
 * database unreadable while running. OK: progressing, paused (said in the text), or published.
 * Perfdata `pages_done`, `pages_total`, `rows_per_second`, `retries`, `seconds_since_commit` (`U`
 * when unknown); the worker exports the same figures as gauges (worker/metrics.ts).
 */
import type { NagiosCode } from './check';
import { NagiosState } from './check';
import type { RebuildThresholds } from './rebuild-thresholds';
import { DEFAULT_REBUILD_THRESHOLDS } from './rebuild-thresholds';

/** A pending activity of the rebuild or of one of its children, from `describe()`. */
export interface PendingActivityFact {
  /** Workflow that scheduled it: the rebuild, or a child (`…/bucket-<day>/r<n>`, `…/publish`). */
  workflowId: string;
  activityId: string;
  /** Activity type: copyPage, reconcile, repairBucket, … */
  activityType: string;
  /** Page number of a copyPage activity when known (activity id `page-<n>` or heartbeat details). */
  pageNo: number | null;
  /** Current attempt, from 1. */
  attempt: number;
  /** Temporal's pending state: SCHEDULED, STARTED, CANCEL_REQUESTED, PAUSE_REQUESTED, PAUSED. */
  state: string;
  /** Paused by an operator (`temporal activity pause`). */
  paused: boolean;
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
  /** Temporal status: RUNNING, PAUSED, COMPLETED, FAILED, CANCELLED, TERMINATED, TIMED_OUT, … */
  status: string;
  /** Start of this run (ms since epoch). */
  startedAtMs: number;
  /** The `RebuildPhase` search attribute (planning, copying, …); null when unset. */
  phase: string | null;
  /** Reason of a failed, terminated or timed-out run (deepest cause's message). */
  failure: string | null;
  /** Result of a completed run. */
  result: null | {
    published: boolean;
    cancelled: boolean;
    versionId: string;
    pagesTotal: number;
    rowsUpserted: number;
    retries: number;
  };
  /** Temporal's own workflow pause (`temporal workflow pause`), when the run is paused so. */
  workflowPause: null | { identity: string; reason: string; pausedAtMs: number | null };
}

/** The `progress` query's answer (the fields the check reads). */
export interface ProgressFact {
  phase: string;
  paused: boolean;
  pagesDone: number;
  pagesTotal: number;
  rowsPerSecond: number;
  retries: number;
}

/** What the catalog database says about the version the rebuild builds. */
export interface DatabaseFact {
  versionId: string;
  /** Version status: building, verifying, active, failed, abandoned, … */
  status: string;
  pagesTotal: number;
  /** Committed pages (ledger). */
  pagesDone: number;
  /** When the newest page committed / the version was planned (ms since epoch, this machine's clock). */
  lastCommitAtMs: number | null;
  createdAtMs: number;
  /** Rows committed in the last minute / 60. */
  rowsPerSecond: number;
  /** Attempts beyond the first of each page (`page_attempt`). */
  retries: number;
  /** 99th percentile of recent page times (ms); null before the first commit. */
  p99PageMs: number | null;
  failureReason: string | null;
}

/** Everything the check knows about a catalog's latest rebuild. */
export interface RebuildFacts {
  catalog: string;
  /** `catalog-rebuild/<catalog>`. */
  workflowId: string;
  /** Set when Temporal could not be reached or asked (the verdict is UNKNOWN). */
  temporalError: string | null;
  /** The latest run; null when the workflow does not exist (no rebuild ever ran, or past retention). */
  run: RunFact | null;
  /** The `progress` query's answer; null when no worker answered in time (or not asked). */
  progress: ProgressFact | null;
  /** Paused by the `pause` signal per the run's history, when the query did not answer; null when unknown. */
  signalPaused: boolean | null;
  /** Pending activities of the run and of its running children. */
  activities: PendingActivityFact[];
  /** The workflow's task queue and the newest poll seen on it (workflow or activity tasks; ms since epoch, null: none listed). */
  pollers: { taskQueue: string; lastPollAtMs: number | null; error: string | null };
  /** The rebuild's version in the catalog database; null when not planned yet or unreadable. */
  database: DatabaseFact | null;
  /** Why the catalog database could not be read; null when it was. */
  databaseError: string | null;
}

/** State names of the verdict. */
export type RebuildState = 'OK' | 'WARNING' | 'CRITICAL' | 'UNKNOWN';

/** Perfdata values; null is printed as `U`. */
export interface RebuildPerfdata {
  pages_done: number | null;
  pages_total: number | null;
  rows_per_second: number | null;
  retries: number | null;
  seconds_since_commit: number | null;
}

/** The verdict: state, exit code, text and perfdata, and the one status line. */
export interface RebuildHealth {
  state: RebuildState;
  code: NagiosCode;
  /** The text after `REBUILD <STATE> - ` (no newline, no `|`). */
  text: string;
  perfdata: RebuildPerfdata;
  /** `REBUILD <STATE> - <text> | <perfdata>` (UNKNOWN: without perfdata). */
  line: string;
}

/** Formats perfdata as `pages_done=3 pages_total=10 … seconds_since_commit=U` (in the interface's order). */
export function formatPerfdata(p: RebuildPerfdata): string {
  const keys = ['pages_done', 'pages_total', 'rows_per_second', 'retries', 'seconds_since_commit'] as const;
  return keys.map((k) => `${k}=${p[k] === null ? 'U' : p[k]}`).join(' ');
}

/** One line: no newline, no `|` (the perfdata separator), single spaces. */
const clean = (text: string): string => text.replace(/[\r\n|\s]+/g, ' ').trim();

/** Status line of an UNKNOWN verdict (no perfdata): `REBUILD UNKNOWN - <message>`. */
export function rebuildUnknownLine(message: string): string {
  return `REBUILD UNKNOWN - ${clean(message)}`;
}

function verdict(state: RebuildState, text: string, perfdata: RebuildPerfdata): RebuildHealth {
  const t = clean(text);
  const line = state === 'UNKNOWN' ? rebuildUnknownLine(t) : `REBUILD ${state} - ${t} | ${formatPerfdata(perfdata)}`;
  return { state, code: NagiosState[state], text: t, perfdata, line };
}

const secondsSince = (nowMs: number, atMs: number): number => Math.max(0, Math.round((nowMs - atMs) / 1000));

const RUNNING = new Set(['RUNNING', 'PAUSED']);

/**
 * The perfdata figures: the workflow's own (query, result) first, the catalog database's otherwise.
 * Seconds since commit count from the plan before the first commit; a closed rebuild has rows per
 * second and seconds since commit 0 (as the worker's gauges once its version left `building`).
 */
function perfdataOf(f: RebuildFacts, nowMs: number): RebuildPerfdata {
  const p = f.progress;
  const d = f.database;
  const r = f.run?.result ?? null;
  const running = !!f.run && RUNNING.has(f.run.status);
  return {
    pages_done: p?.pagesDone ?? d?.pagesDone ?? (r?.published ? r.pagesTotal : null),
    pages_total: p?.pagesTotal ?? d?.pagesTotal ?? r?.pagesTotal ?? null,
    rows_per_second: running ? (p?.rowsPerSecond ?? d?.rowsPerSecond ?? null) : 0,
    retries: p?.retries ?? r?.retries ?? d?.retries ?? null,
    seconds_since_commit: !running ? 0 : d ? secondsSince(nowMs, d.lastCommitAtMs ?? d.createdAtMs) : null,
  };
}

/**
 * The verdict on a catalog's latest rebuild from `facts`, at time `nowMs` (ms since epoch).
 * Pure: no I/O, no clock.
 * @param t thresholds; default {@link DEFAULT_REBUILD_THRESHOLDS}.
 */
export function evaluateRebuildHealth(
  f: RebuildFacts,
  nowMs: number,
  t: RebuildThresholds = DEFAULT_REBUILD_THRESHOLDS,
): RebuildHealth {
  const perf = perfdataOf(f, nowMs);
  const c = f.catalog;
  if (f.temporalError) return verdict('UNKNOWN', `cannot ask Temporal about ${f.workflowId}: ${f.temporalError}`, perf);
  const run = f.run;
  if (!run) {
    return verdict(
      'UNKNOWN',
      `no rebuild of catalog ${c} has run (no workflow ${f.workflowId} on the Temporal service)`,
      perf,
    );
  }
  switch (run.status) {
    case 'FAILED':
      return verdict('CRITICAL', `rebuild of ${c} failed: ${failureReason(f)}`, perf);
    case 'TERMINATED':
      return verdict('CRITICAL', `rebuild of ${c} failed: terminated (${failureReason(f)})`, perf);
    case 'TIMED_OUT':
      return verdict('CRITICAL', `rebuild of ${c} failed: timed out`, perf);
    case 'CANCELLED':
      return verdict('WARNING', `rebuild of ${c} was cancelled (Temporal cancellation request)`, perf);
    case 'COMPLETED':
      return completedVerdict(f, perf);
    case 'RUNNING':
    case 'PAUSED':
      return runningVerdict(f, run, nowMs, t, perf);
    default:
      return verdict('UNKNOWN', `workflow ${f.workflowId} is ${run.status}`, perf);
  }
}

function failureReason(f: RebuildFacts): string {
  return f.run?.failure || f.database?.failureReason || 'no reason recorded';
}

function completedVerdict(f: RebuildFacts, perf: RebuildPerfdata): RebuildHealth {
  const r = f.run?.result;
  const c = f.catalog;
  if (!r) return verdict('UNKNOWN', `rebuild of ${c} completed without a readable result`, perf);
  if (r.cancelled)
    return verdict(
      'WARNING',
      `rebuild of ${c} was cancelled: version ${r.versionId || '-'} abandoned, the active version is unchanged`,
      perf,
    );
  return verdict(
    'OK',
    `rebuild of ${c} published version ${r.versionId}: ${r.pagesTotal} pages, ${r.rowsUpserted} rows, ${r.retries} retries`,
    perf,
  );
}

/** Page numbers (or activity ids) of activities, as `page 3, 7` / `pages 3, 7, 9`. */
function pageList(acts: PendingActivityFact[]): string {
  const names = acts.map((a) => (a.pageNo !== null ? String(a.pageNo) : a.activityId));
  return `${names.length === 1 ? 'page' : 'pages'} ${names.join(', ')}`;
}

function runningVerdict(
  f: RebuildFacts,
  run: RunFact,
  nowMs: number,
  t: RebuildThresholds,
  perf: RebuildPerfdata,
): RebuildHealth {
  const c = f.catalog;
  const phase = f.progress?.phase ?? run.phase ?? 'running';
  const at = `page ${perf.pages_done ?? '?'}/${perf.pages_total ?? '?'}`;
  const signalPaused = f.progress?.paused ?? f.signalPaused ?? false;
  const wfPause =
    run.status === 'PAUSED' ? (run.workflowPause ?? { identity: '', reason: '', pausedAtMs: null }) : null;
  const pagesPaused = f.activities.filter((a) => a.activityType === 'copyPage' && a.paused);

  let context: string;
  if (wfPause) {
    const why = [wfPause.reason, wfPause.identity && `by ${wfPause.identity}`].filter(Boolean).join(', ');
    context = `rebuild of ${c} is paused by Temporal's workflow pause${why ? ` (${why})` : ''}, ${phase} at ${at}`;
  } else if (signalPaused) {
    context = `rebuild of ${c} is paused (pause signal), ${phase} at ${at}`;
  } else {
    const rate = phase === 'copying' && perf.rows_per_second !== null ? `, ${perf.rows_per_second} rows/s` : '';
    context = `rebuild of ${c} is ${phase} at ${at}${rate}`;
  }
  if (pagesPaused.length) context += `; ${pageList(pagesPaused)} paused by an operator (temporal activity pause)`;

  const critical: string[] = [];
  const warning: string[] = [];
  const poll = f.pollers;
  if (!poll.error) {
    const idle = secondsSince(nowMs, poll.lastPollAtMs ?? run.startedAtMs);
    if (idle > t.noPollerSeconds) {
      critical.push(
        poll.lastPollAtMs !== null
          ? `no worker has polled task queue ${poll.taskQueue} for ${idle} s`
          : `no worker has polled task queue ${poll.taskQueue} since this run started ${idle} s ago`,
      );
    }
  }
  if (f.databaseError) warning.push(`cannot read the catalog database: ${f.databaseError}`);
  const paused = !!wfPause || signalPaused || pagesPaused.length > 0;
  if (phase === 'copying' && !paused) {
    const stall = stallWarning(f.database, nowMs, t);
    if (stall) warning.push(stall);
  }
  if (phase !== 'copying') warning.push(...heartbeatWarnings(f, nowMs, t));
  const same = sameErrorWarning(f.activities, t);
  if (same) warning.push(same);

  if (critical.length) return verdict('CRITICAL', [...critical, context].join('; '), perf);
  if (warning.length) return verdict('WARNING', [...warning, context].join('; '), perf);
  return verdict('OK', context, perf);
}

/** WARNING text when no page committed for max(floor, factor × p99); null otherwise or without the database. */
function stallWarning(d: DatabaseFact | null, nowMs: number, t: RebuildThresholds): string | null {
  if (!d || d.status !== 'building') return null;
  const limit = Math.max(t.stallFloorSeconds, Math.ceil((t.stallP99Factor * (d.p99PageMs ?? 0)) / 1000));
  const idle = secondsSince(nowMs, d.lastCommitAtMs ?? d.createdAtMs);
  if (idle <= limit) return null;
  return d.lastCommitAtMs !== null
    ? `no page committed for ${idle} s (limit ${limit} s)`
    : `no page committed in the ${idle} s since the plan (limit ${limit} s)`;
}

/** WARNING texts for pending activities that have not heartbeated for factor × their heartbeat timeout. */
function heartbeatWarnings(f: RebuildFacts, nowMs: number, t: RebuildThresholds): string[] {
  const out: string[] = [];
  for (const a of f.activities) {
    if (a.paused || !a.heartbeatTimeoutMs) continue;
    const waitingForRetry = a.nextAttemptAtMs !== null && a.nextAttemptAtMs > nowMs;
    if (!(a.state === 'STARTED' || a.state === 'CANCEL_REQUESTED' || (a.state === 'SCHEDULED' && !waitingForRetry)))
      continue;
    const last = Math.max(a.lastHeartbeatAtMs ?? 0, a.lastStartedAtMs ?? 0);
    if (!last) continue;
    const idle = secondsSince(nowMs, last);
    const limitS = (t.heartbeatTimeoutFactor * a.heartbeatTimeoutMs) / 1000;
    if (idle <= limitS) continue;
    const where = a.workflowId === f.workflowId ? '' : ` in ${a.workflowId}`;
    out.push(
      `activity ${a.activityType} (attempt ${a.attempt}${where}) has not heartbeated for ${idle} s (heartbeat timeout ${a.heartbeatTimeoutMs / 1000} s)`,
    );
  }
  return out;
}

/** Failures that are not errors of the page: timeouts (a worker died) and cancellations (a worker shut down). */
function countsAsError(a: PendingActivityFact): boolean {
  const lf = a.lastFailure;
  return !!lf && !lf.timeout && lf.type !== 'PAGE_CANCELLED';
}

/**
 * WARNING text when at least `sameErrorPages` copyPage activities' latest attempts failed with the
 * same error (numbers in messages ignored when comparing), naming the error and the pages.
 */
function sameErrorWarning(acts: PendingActivityFact[], t: RebuildThresholds): string | null {
  const groups = new Map<string, PendingActivityFact[]>();
  for (const a of acts) {
    if (a.activityType !== 'copyPage' || !countsAsError(a)) continue;
    const key = `${a.lastFailure!.type ?? ''}|${a.lastFailure!.message.replace(/\d+/g, '#')}`;
    groups.set(key, [...(groups.get(key) ?? []), a]);
  }
  let worst: PendingActivityFact[] = [];
  for (const g of groups.values()) if (g.length > worst.length) worst = g;
  if (worst.length < t.sameErrorPages) return null;
  const lf = worst[0].lastFailure!;
  const message = lf.message.length > 200 ? `${lf.message.slice(0, 197)}...` : lf.message;
  const sorted = [...worst].sort((a, b) => (a.pageNo ?? 0) - (b.pageNo ?? 0));
  return `${worst.length} pages failing with the same error: ${lf.type ? `${lf.type}: ` : ''}${message} (${pageList(sorted)})`;
}
