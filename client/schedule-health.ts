/**
 * The schedule's part of `catalog-rebuild check --catalog C --rebuild`: a pure function from the
 * facts about the catalog's Temporal Schedule (paused, interval, newest run and its outcome, last
 * successful refresh) to a Nagios verdict fragment, and its merge into the rebuild's verdict.
 * CRITICAL: the newest scheduled refresh failed (or was terminated, timed out). WARNING: the
 * schedule is paused, or its newest run (its creation before the first) is older than twice its
 * interval, or the newest run was cancelled. OK otherwise. Perfdata `last_refresh_age_seconds`: the
 * age of the last successful scheduled refresh (published or up to date), `U` when none is known.
 * The worker exports the same age as the gauge `catalog_rebuild_last_refresh_age_seconds`.
 */
import type { NagiosCode } from './check';
import { formatDuration, NagiosState } from './check';
import type { ScheduleView } from './schedule';

/** The newest run of a schedule. */
export interface ScheduleRunFact {
  /** The launcher's workflow id (`catalog-rebuild/<catalog>/scheduled-<time>`). */
  workflowId: string;
  /** When the schedule took the action (ms since epoch). */
  takenAtMs: number;
  /** The launcher's Temporal status: RUNNING, COMPLETED, FAILED, TERMINATED, TIMED_OUT, CANCELED, UNKNOWN. */
  status: string;
  /** A completed launcher's outcome (published, up-to-date, not-published, skipped). */
  outcome: string | null;
  /** The outcome's or the failure's message. */
  message: string | null;
}

/** What the check knows about a catalog's schedule. */
export interface ScheduleFacts {
  /** `catalog-rebuild/<catalog>`. */
  scheduleId: string;
  paused: boolean;
  /** The schedule's note (e.g. the reason it was paused); null when none. */
  note: string | null;
  /** Interval between runs (s): the `--every` interval, or for a cron the gap between its next two runs; null when unknown. */
  intervalSeconds: number | null;
  /** When the schedule was created (ms since epoch): the reference for staleness before the first run. */
  createdAtMs: number;
  /** The newest run; null before the first. */
  newestRun: ScheduleRunFact | null;
  /** Close time of the newest successful scheduled refresh among the recent runs (ms since epoch); null when none. */
  lastSuccessAtMs: number | null;
}

/** The schedule's verdict fragment. */
export interface ScheduleVerdict {
  state: 'OK' | 'WARNING' | 'CRITICAL';
  /** One clause for the status line, e.g. `schedule catalog-rebuild/C is paused (maintenance)`. */
  text: string;
  /** Age of the last successful scheduled refresh (s); null when none is known. */
  lastRefreshAgeSeconds: number | null;
  /** `last_refresh_age_seconds=<n|U>`. */
  perfdata: string;
}

const FAILED = new Set(['FAILED', 'TERMINATED', 'TIMED_OUT']);
const SUCCESS = new Set(['published', 'up-to-date']);

/** The facts of a described schedule (pure). */
export function scheduleFactsOf(v: ScheduleView): ScheduleFacts {
  const newest = v.recent.at(-1) ?? null;
  const successes = v.recent.filter((r) => r.outcome !== null && SUCCESS.has(r.outcome) && r.closedAtMs !== null);
  const gap = v.nextRunsMs.length >= 2 ? Math.round((v.nextRunsMs[1] - v.nextRunsMs[0]) / 1000) : null;
  return {
    scheduleId: v.scheduleId,
    paused: v.paused,
    note: v.note,
    intervalSeconds: v.everySeconds ?? gap,
    createdAtMs: v.createdAtMs,
    newestRun: newest && {
      workflowId: newest.workflowId,
      takenAtMs: newest.takenAtMs,
      status: newest.status,
      outcome: newest.outcome,
      message: newest.message,
    },
    lastSuccessAtMs: successes.length ? Math.max(...successes.map((r) => r.closedAtMs!)) : null,
  };
}

const age = (nowMs: number, atMs: number): number => Math.max(0, Math.round((nowMs - atMs) / 1000));

/**
 * The verdict on a schedule from `f` at `nowMs` (ms since epoch). Pure: no I/O, no clock.
 * Precedence CRITICAL > WARNING > OK; every finding is named in the text.
 */
export function evaluateScheduleHealth(f: ScheduleFacts, nowMs: number): ScheduleVerdict {
  const ageSeconds = f.lastSuccessAtMs === null ? null : age(nowMs, f.lastSuccessAtMs);
  const critical: string[] = [];
  const warning: string[] = [];
  const info: string[] = [];
  const run = f.newestRun;
  if (run && FAILED.has(run.status)) {
    critical.push(
      `newest scheduled refresh ${run.workflowId} ${run.status.toLowerCase().replace('_', ' ')}: ${run.message ?? 'no reason given'}`,
    );
  } else if (run && run.status === 'CANCELED') {
    warning.push(`newest scheduled refresh ${run.workflowId} was cancelled`);
  } else if (run) {
    const what = run.status === 'RUNNING' ? 'running' : (run.outcome ?? run.status.toLowerCase());
    info.push(`newest scheduled refresh ${what}${run.message && run.outcome === 'skipped' ? ` (${run.message})` : ''}`);
  }
  if (f.paused) warning.push(`schedule is paused${f.note ? ` (${f.note})` : ''}`);
  const since = run ? run.takenAtMs : f.createdAtMs;
  if (!f.paused && f.intervalSeconds !== null && age(nowMs, since) > 2 * f.intervalSeconds) {
    warning.push(
      `${run ? 'newest scheduled run' : 'schedule, without a run yet,'} is ${formatDuration(age(nowMs, since))} old, more than twice its interval ${formatDuration(f.intervalSeconds)}`,
    );
  }
  info.push(
    ageSeconds === null
      ? 'no successful scheduled refresh yet'
      : `last successful refresh ${formatDuration(ageSeconds)} ago`,
  );
  const state = critical.length ? 'CRITICAL' : warning.length ? 'WARNING' : 'OK';
  return {
    state,
    text: `schedule ${f.scheduleId}: ${[...critical, ...warning, ...info].join(', ')}`.replace(/[\r\n|]+/g, ' '),
    lastRefreshAgeSeconds: ageSeconds,
    perfdata: `last_refresh_age_seconds=${ageSeconds ?? 'U'}`,
  };
}

/** A Nagios verdict as the rebuild check prints it: `REBUILD <STATE> - <text> | <perfdata>`. */
export interface CheckVerdict {
  state: 'OK' | 'WARNING' | 'CRITICAL' | 'UNKNOWN';
  code: NagiosCode;
  text: string;
  line: string;
}

const RANK = { OK: 0, WARNING: 1, CRITICAL: 2 } as const;

/**
 * The rebuild's verdict with the schedule's merged in (pure): the worse state (an UNKNOWN rebuild
 * verdict stays UNKNOWN), the schedule's clause after the text, its perfdata after the perfdata.
 * Without a schedule (`v` null) the verdict is returned unchanged.
 */
export function mergeScheduleVerdict<T extends CheckVerdict>(h: T, v: ScheduleVerdict | null): T {
  if (!v) return h;
  const state = h.state === 'UNKNOWN' || RANK[h.state] >= RANK[v.state] ? h.state : v.state;
  const text = `${h.text}; ${v.text}`;
  const perf = h.line.includes(' | ') ? h.line.slice(h.line.indexOf(' | ') + 3) : '';
  const line =
    state === 'UNKNOWN'
      ? `REBUILD UNKNOWN - ${text}`
      : `REBUILD ${state} - ${text} | ${perf ? `${perf} ` : ''}${v.perfdata}`;
  return { ...h, state, code: NagiosState[state], text, line };
}
