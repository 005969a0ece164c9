/**
 * The rebuild health check's verdict (`catalog-rebuild check --catalog C --rebuild`): a pure function
 * from the facts read about the latest `RebuildCatalog` run of a catalog (`client/rebuild-facts.ts`)
 * to one Nagios status line. Precedence CRITICAL > WARNING > OK; UNKNOWN when no rebuild ever ran or
 * Temporal cannot be reached. CRITICAL: the rebuild failed (or was terminated, timed out), or it runs
 * and no worker of the build it is pinned to polled its task queue for 75 s (workers of other builds
 * cannot run it; the build is named). A running rebuild's text names its build. Pause state: the
 * `progress` query's when a worker answered, else the memo's. WARNING: copying, not paused, no commit for
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
import type { PendingActivityFact, RebuildFacts, RunFact } from './rebuild-facts';
import {
  heartbeatWarnings,
  pageList,
  retriedStepWarnings,
  sameErrorWarning,
  secondsSince,
  stallWarning,
} from './rebuild-warnings';

export type { DatabaseFact, PendingActivityFact, ProgressFact, RebuildFacts, RunFact } from './rebuild-facts';

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
    pages_done: p?.pagesDone ?? d?.pagesDone ?? r?.pagesDone ?? (r?.published ? r.pagesTotal : null),
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
      // A rebuild of this build leaves its result in the memo: say how far it got, as after the signal.
      if (run.result?.cancelled) return completedVerdict(f, perf);
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
  if (r.cancelled) {
    if (!r.versionId)
      return verdict(
        'WARNING',
        `rebuild of ${c} was cancelled before a version was planned: nothing was written`,
        perf,
      );
    // Pages done, not pages planned: a cancelled rebuild copied only part of its plan. The ledger's
    // count first (the perfdata's): a page that committed as the cancel arrived is in it.
    const done = perf.pages_done ?? r.pagesDone;
    const after = done == null ? '' : ` after ${done} of ${r.pagesTotal} pages`;
    return verdict(
      'WARNING',
      `rebuild of ${c} was cancelled${after}: version ${r.versionId || '-'} abandoned, the active version is unchanged`,
      perf,
    );
  }
  if (r.upToDate)
    return verdict(
      'OK',
      `refresh of ${c} found nothing changed in the source: version ${r.refresh?.baseVersionId ?? '-'} stays active (up to date)`,
      perf,
    );
  return verdict(
    'OK',
    `rebuild of ${c} published version ${r.versionId}: ${r.pagesTotal} pages, ${r.rowsUpserted} rows, ${r.retries} retries`,
    perf,
  );
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
  // The workflow's own answer when a worker gave one, else the pause state it last put in the memo.
  const signalPaused = f.progress?.paused ?? run.memo?.paused ?? false;
  const build = run.build?.buildId ?? null;
  const onBuild = build ? ` (build ${build})` : '';
  const wfPause =
    run.status === 'PAUSED' ? (run.workflowPause ?? { identity: '', reason: '', pausedAtMs: null }) : null;
  const pagesPaused = f.activities.filter((a) => a.activityType === 'copyPage' && a.paused);

  let context: string;
  if (wfPause) {
    const why = [wfPause.reason, wfPause.identity && `by ${wfPause.identity}`].filter(Boolean).join(', ');
    context = `rebuild of ${c} is paused by Temporal's workflow pause${why ? ` (${why})` : ''}, ${phase} at ${at}${onBuild}`;
  } else if (signalPaused) {
    context = `rebuild of ${c} is paused (pause signal), ${phase} at ${at}${onBuild}`;
  } else {
    const rate = phase === 'copying' && perf.rows_per_second !== null ? `, ${perf.rows_per_second} rows/s` : '';
    context = `rebuild of ${c} is ${phase} at ${at}${rate}${onBuild}`;
  }
  if (pagesPaused.length) context += `; ${pageList(pagesPaused)} paused by an operator (temporal activity pause)`;

  const critical: string[] = [];
  const warning: string[] = [];
  const poll = f.pollers;
  if (!poll.error) {
    // Only a worker of the build the run is pinned to can run it: other builds' pollers do not count.
    const last = newestPollOfBuild(f);
    const idle = secondsSince(nowMs, last ?? run.startedAtMs);
    const who = build ? `no worker of build ${build}` : 'no worker';
    if (idle > t.noPollerSeconds) {
      critical.push(
        last !== null
          ? `${who} has polled task queue ${poll.taskQueue} for ${idle} s`
          : `${who} has polled task queue ${poll.taskQueue} since this run started ${idle} s ago`,
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
  warning.push(...retriedStepWarnings(f.activities));

  if (critical.length) return verdict('CRITICAL', [...critical, context].join('; '), perf);
  if (warning.length) return verdict('WARNING', [...warning, context].join('; '), perf);
  return verdict('OK', context, perf);
}

/**
 * The newest poll (ms since epoch) of a worker of the build the run is pinned to; of any worker when
 * the build is not known. Null when none is listed.
 */
export function newestPollOfBuild(f: Pick<RebuildFacts, 'run' | 'pollers'>): number | null {
  const build = f.run?.build?.buildId ?? null;
  if (build === null || !f.pollers.seen) return f.pollers.lastPollAtMs;
  let newest: number | null = null;
  for (const p of f.pollers.seen)
    if (p.buildId === build && p.lastPollAtMs !== null && (newest === null || p.lastPollAtMs > newest))
      newest = p.lastPollAtMs;
  return newest;
}
