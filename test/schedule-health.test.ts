/**
 * The schedule's verdict in `check --rebuild` (`evaluateScheduleHealth`, `mergeScheduleVerdict`,
 * `scheduleFactsOf`) on synthetic facts, without services: every state, the staleness edge at twice
 * the interval, the perfdata, and the merge into the rebuild's status line.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ScheduleView } from '../client/schedule';
import type { CheckVerdict, ScheduleFacts } from '../client/schedule-health';
import { evaluateScheduleHealth, mergeScheduleVerdict, scheduleFactsOf } from '../client/schedule-health';

const NOW = Date.parse('2026-12-03T10:00:00Z');
const ago = (seconds: number): number => NOW - seconds * 1000;

/** An hourly schedule whose newest run, 20 min ago, published; created a day ago. */
function facts(o: Partial<ScheduleFacts> = {}): ScheduleFacts {
  return {
    scheduleId: 'catalog-rebuild/main',
    paused: false,
    note: null,
    intervalSeconds: 3600,
    createdAtMs: ago(86400),
    newestRun: {
      workflowId: 'catalog-rebuild/main/scheduled-2026-12-03T09:40:00Z',
      takenAtMs: ago(1200),
      status: 'COMPLETED',
      outcome: 'published',
      message: 'published version 7',
    },
    lastSuccessAtMs: ago(1140),
    ...o,
  };
}

test('OK with the age of the last successful refresh as perfdata', () => {
  const v = evaluateScheduleHealth(facts(), NOW);
  assert.equal(v.state, 'OK');
  assert.equal(v.lastRefreshAgeSeconds, 1140);
  assert.equal(v.perfdata, 'last_refresh_age_seconds=1140');
  assert.equal(
    v.text,
    'schedule catalog-rebuild/main: newest scheduled refresh published, last successful refresh 19m ago',
  );
});

test('CRITICAL when the newest scheduled refresh failed, terminated or timed out', () => {
  for (const status of ['FAILED', 'TERMINATED', 'TIMED_OUT']) {
    const v = evaluateScheduleHealth(
      facts({
        newestRun: { ...facts().newestRun!, status, outcome: null, message: 'source "ghost" is unreachable' },
      }),
      NOW,
    );
    assert.equal(v.state, 'CRITICAL', status);
    assert.match(
      v.text,
      /newest scheduled refresh catalog-rebuild\/main\/scheduled-\S+ (failed|terminated|timed out): source "ghost" is unreachable/,
    );
    assert.equal(v.perfdata, 'last_refresh_age_seconds=1140');
  }
});

test('WARNING when paused (with its note), when the newest run is older than twice the interval, or cancelled', () => {
  const paused = evaluateScheduleHealth(facts({ paused: true, note: 'director maintenance' }), NOW);
  assert.equal(paused.state, 'WARNING');
  assert.match(paused.text, /schedule is paused \(director maintenance\)/);

  const edge = evaluateScheduleHealth(facts({ newestRun: { ...facts().newestRun!, takenAtMs: ago(7200) } }), NOW);
  assert.equal(edge.state, 'OK', 'exactly twice the interval is not stale');
  const stale = evaluateScheduleHealth(facts({ newestRun: { ...facts().newestRun!, takenAtMs: ago(7201) } }), NOW);
  assert.equal(stale.state, 'WARNING');
  assert.match(stale.text, /newest scheduled run is 7201s old, more than twice its interval 1h/);

  const never = evaluateScheduleHealth(
    facts({ newestRun: null, lastSuccessAtMs: null, createdAtMs: ago(3 * 3600) }),
    NOW,
  );
  assert.equal(never.state, 'WARNING');
  assert.match(never.text, /schedule, without a run yet, is 3h old/);
  assert.equal(never.perfdata, 'last_refresh_age_seconds=U');

  const cancelled = evaluateScheduleHealth(facts({ newestRun: { ...facts().newestRun!, status: 'CANCELED' } }), NOW);
  assert.equal(cancelled.state, 'WARNING');
  // A paused schedule is not also stale: the pause says why no run came.
  const pausedLong = evaluateScheduleHealth(
    facts({ paused: true, newestRun: { ...facts().newestRun!, takenAtMs: ago(86400) } }),
    NOW,
  );
  assert.doesNotMatch(pausedLong.text, /twice/);
});

test('a skipped run is OK and says why; a running one is OK', () => {
  const skipped = evaluateScheduleHealth(
    facts({ newestRun: { ...facts().newestRun!, outcome: 'skipped', message: 'flags differ' } }),
    NOW,
  );
  assert.equal(skipped.state, 'OK');
  assert.match(skipped.text, /newest scheduled refresh skipped \(flags differ\)/);
  const running = evaluateScheduleHealth(
    facts({ newestRun: { ...facts().newestRun!, status: 'RUNNING', outcome: null } }),
    NOW,
  );
  assert.equal(running.state, 'OK');
  assert.match(running.text, /newest scheduled refresh running/);
});

test('the merge keeps the worse state, appends the clause and the perfdata; no schedule changes nothing', () => {
  const ok: CheckVerdict = {
    state: 'OK',
    code: 0,
    text: 'rebuild of main published version 7',
    line: 'REBUILD OK - rebuild of main published version 7 | pages_done=4 pages_total=4',
  };
  assert.equal(mergeScheduleVerdict(ok, null), ok);
  const warn = mergeScheduleVerdict(ok, evaluateScheduleHealth(facts({ paused: true }), NOW));
  assert.equal(warn.state, 'WARNING');
  assert.equal(warn.code, 1);
  assert.equal(
    warn.line,
    'REBUILD WARNING - rebuild of main published version 7; schedule catalog-rebuild/main: schedule is paused, newest scheduled refresh published, last successful refresh 19m ago | pages_done=4 pages_total=4 last_refresh_age_seconds=1140',
  );
  const critical: CheckVerdict = { ...ok, state: 'CRITICAL', code: 2, line: ok.line.replace('OK', 'CRITICAL') };
  assert.equal(mergeScheduleVerdict(critical, evaluateScheduleHealth(facts({ paused: true }), NOW)).state, 'CRITICAL');
  const unknown: CheckVerdict = { state: 'UNKNOWN', code: 3, text: 'no rebuild', line: 'REBUILD UNKNOWN - no rebuild' };
  const u = mergeScheduleVerdict(unknown, evaluateScheduleHealth(facts({ paused: true }), NOW));
  assert.equal(u.state, 'UNKNOWN');
  assert.doesNotMatch(u.line, /\|/);
});

test('facts of a described schedule: newest run, last success among the recent runs, cron interval from the next runs', () => {
  const run = (takenAtMs: number, status: string, outcome: string | null, closedAtMs: number | null) => ({
    workflowId: `catalog-rebuild/main/scheduled-${new Date(takenAtMs).toISOString()}`,
    runId: 'r',
    scheduledAtMs: takenAtMs,
    takenAtMs,
    status,
    closedAtMs,
    outcome: outcome as 'published' | null,
    message: null,
  });
  const view: ScheduleView = {
    scheduleId: 'catalog-rebuild/main',
    catalog: 'main',
    input: { catalog: 'main', source: 'director' },
    summary: '',
    taskQueue: 'q',
    paused: false,
    note: null,
    everySeconds: null,
    nextRunsMs: [ago(-3600), ago(-3600 - 86400)],
    recent: [
      run(ago(3 * 86400), 'COMPLETED', 'published', ago(3 * 86400 - 60)),
      run(ago(2 * 86400), 'COMPLETED', 'up-to-date', ago(2 * 86400 - 30)),
      run(ago(86400), 'FAILED', null, ago(86400 - 10)),
    ],
    running: [],
    createdAtMs: ago(10 * 86400),
    overlap: 'SKIP',
    catchupWindowMs: 86400000,
    skippedOverlap: 0,
    missedCatchup: 0,
  };
  const f = scheduleFactsOf(view);
  assert.equal(f.intervalSeconds, 86400);
  assert.equal(f.newestRun?.status, 'FAILED');
  assert.equal(f.lastSuccessAtMs, ago(2 * 86400 - 30), 'an up-to-date refresh is a success');
});
