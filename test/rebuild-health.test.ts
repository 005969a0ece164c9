/**
 * The rebuild health check's verdict (`evaluateRebuildHealth`) on synthetic facts, without services:
 * every state and message, the thresholds at their edges, precedence, perfdata and the thresholds
 * read from the environment.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PendingActivityFact, RebuildFacts, RunFact } from '../client/rebuild-health';
import { evaluateRebuildHealth, formatPerfdata } from '../client/rebuild-health';
import { DEFAULT_REBUILD_THRESHOLDS, rebuildThresholds } from '../client/rebuild-thresholds';
import { deepestMessage } from '../client/temporal-facts';
import { commitRate } from '../client/rebuild-facts';
import type { RebuildCatalogResult } from '../workflows/definitions';

const NOW = Date.parse('2026-11-01T20:00:00Z');
const ago = (seconds: number): number => NOW - seconds * 1000;

function run(o: Partial<RunFact> = {}): RunFact {
  return {
    runId: 'r1',
    status: 'RUNNING',
    startedAtMs: ago(600),
    phase: 'copying',
    failure: null,
    result: null,
    workflowPause: null,
    ...o,
  };
}

/** A healthy copying rebuild: page 3 of 10, a poll 2 s ago, a commit 4 s ago, no worker answer. */
function facts(o: Partial<RebuildFacts> = {}): RebuildFacts {
  return {
    catalog: 'main',
    workflowId: 'catalog-rebuild/main',
    temporalError: null,
    run: run(),
    progress: null,
    activities: [],
    pollers: { taskQueue: 'catalog-rebuild', lastPollAtMs: ago(2), error: null },
    database: {
      versionId: '7',
      status: 'building',
      pagesTotal: 10,
      pagesDone: 3,
      lastCommitAtMs: ago(4),
      createdAtMs: ago(590),
      rowsPerSecond: 33,
      retries: 1,
      p99PageMs: 2_000,
      failureReason: null,
    },
    databaseError: null,
    ...o,
  };
}

function page(pageNo: number, o: Partial<PendingActivityFact> = {}): PendingActivityFact {
  return {
    workflowId: 'catalog-rebuild/main',
    activityId: `page-${pageNo}`,
    activityType: 'copyPage',
    pageNo,
    attempt: 2,
    state: 'SCHEDULED',
    paused: false,
    heartbeatTimeoutMs: 15_000,
    lastHeartbeatAtMs: ago(5),
    lastStartedAtMs: ago(6),
    nextAttemptAtMs: NOW + 5_000,
    lastFailure: null,
    ...o,
  };
}

const failing = (pageNo: number, message: string, type: string | null = 'DB_TRANSIENT') =>
  page(pageNo, { lastFailure: { message, type, timeout: false } });

const verdict = (f: RebuildFacts, t = DEFAULT_REBUILD_THRESHOLDS) => evaluateRebuildHealth(f, NOW, t);

test('UNKNOWN (3) when Temporal cannot be asked, or no rebuild ever ran; no perfdata', () => {
  const a = verdict(facts({ temporalError: 'connect ECONNREFUSED 127.0.0.1:7233', run: null }));
  assert.equal(a.code, 3);
  assert.equal(
    a.line,
    'REBUILD UNKNOWN - cannot ask Temporal about catalog-rebuild/main: connect ECONNREFUSED 127.0.0.1:7233',
  );
  const b = verdict(facts({ run: null, database: null }));
  assert.equal(b.state, 'UNKNOWN');
  assert.equal(
    b.line,
    'REBUILD UNKNOWN - no rebuild of catalog main has run (no workflow catalog-rebuild/main on the Temporal service)',
  );
  assert.equal(verdict(facts({ run: run({ status: 'UNSPECIFIED' }) })).state, 'UNKNOWN');
});

test('CRITICAL (2) when the latest rebuild failed, naming the reason (Temporal, else the catalog database)', () => {
  const failed = facts({
    run: run({ status: 'FAILED', failure: 'reconciliation found 2 mismatched buckets: 2026-10-01, none' }),
  });
  const v = verdict(failed);
  assert.equal(v.code, 2);
  assert.equal(
    v.line,
    'REBUILD CRITICAL - rebuild of main failed: reconciliation found 2 mismatched buckets: 2026-10-01, none | ' +
      'pages_done=3 pages_total=10 rows_per_second=0 retries=1 seconds_since_commit=0',
  );
  const fromDb = facts({ run: run({ status: 'FAILED' }) });
  fromDb.database!.failureReason = 'reject threshold exceeded';
  assert.equal(verdict(fromDb).text, 'rebuild of main failed: reject threshold exceeded');
  assert.equal(
    verdict(facts({ run: run({ status: 'FAILED' }), database: null })).text,
    'rebuild of main failed: no reason recorded',
  );
  assert.equal(
    verdict(facts({ run: run({ status: 'TERMINATED', failure: 'operator gave up' }) })).text,
    'rebuild of main failed: terminated (operator gave up)',
  );
  assert.equal(verdict(facts({ run: run({ status: 'TIMED_OUT' }) })).text, 'rebuild of main failed: timed out');
  const multiline = verdict(facts({ run: run({ status: 'FAILED', failure: 'line one\nline | two' }) }));
  assert.equal(multiline.text, 'rebuild of main failed: line one line two');
});

test('WARNING (1) when the latest rebuild was cancelled; OK (0) when it published, whatever its retries', () => {
  const result = { versionId: '7', pagesTotal: 10, rowsUpserted: 1000, retries: 4 };
  const cancelled = verdict(
    facts({
      run: run({
        status: 'COMPLETED',
        result: { ...result, published: false, cancelled: true } as RebuildCatalogResult,
      }),
    }),
  );
  assert.equal(cancelled.code, 1);
  assert.equal(
    cancelled.line,
    'REBUILD WARNING - rebuild of main was cancelled after 3 of 10 pages: version 7 abandoned, the active version is unchanged | ' +
      'pages_done=3 pages_total=10 rows_per_second=0 retries=4 seconds_since_commit=0',
  );
  // This build's cancelled rebuild ends CANCELLED with its result (from the memo): the same verdict.
  const ended = verdict(
    facts({
      run: run({
        status: 'CANCELLED',
        result: { ...result, published: false, cancelled: true } as RebuildCatalogResult,
      }),
    }),
  );
  assert.equal(ended.line, cancelled.line);
  // Cancelled before its plan stored a version: nothing was written, no version to name.
  const unplanned = verdict(
    facts({
      run: run({
        status: 'CANCELLED',
        phase: 'planning',
        result: {
          versionId: '',
          pagesTotal: 0,
          rowsUpserted: 0,
          retries: 0,
          published: false,
          cancelled: true,
        } as RebuildCatalogResult,
      }),
      database: null,
    }),
  );
  assert.equal(unplanned.state, 'WARNING');
  assert.match(
    unplanned.line,
    /^REBUILD WARNING - rebuild of main was cancelled before a version was planned: nothing was written \| /,
  );
  // Without a result (an earlier build, cancelled through Temporal): WARNING all the same.
  assert.equal(
    verdict(facts({ run: run({ status: 'CANCELLED' }) })).text,
    'rebuild of main was cancelled (Temporal cancellation request)',
  );

  const published = facts({
    run: run({ status: 'COMPLETED', result: { ...result, published: true, cancelled: false } as RebuildCatalogResult }),
  });
  published.database = { ...published.database!, status: 'active', pagesDone: 10, lastCommitAtMs: ago(300) };
  const ok = verdict(published);
  assert.equal(ok.code, 0);
  assert.equal(
    ok.line,
    'REBUILD OK - rebuild of main published version 7: 10 pages, 1000 rows, 4 retries | ' +
      'pages_done=10 pages_total=10 rows_per_second=0 retries=4 seconds_since_commit=0',
  );
  // Without the catalog database the result still gives the figures it has.
  const bare = verdict({ ...published, database: null, databaseError: 'ECONNREFUSED' });
  assert.deepEqual(
    [bare.state, formatPerfdata(bare.perfdata)],
    ['OK', 'pages_done=10 pages_total=10 rows_per_second=0 retries=4 seconds_since_commit=0'],
  );
  assert.equal(verdict(facts({ run: run({ status: 'COMPLETED', result: null }) })).state, 'UNKNOWN');
  // A refresh that found nothing changed made no version: it says which one stays.
  const upToDate = verdict(
    facts({
      run: run({
        status: 'COMPLETED',
        result: {
          ...result,
          versionId: '',
          pagesTotal: 0,
          rowsUpserted: 0,
          published: false,
          cancelled: false,
          upToDate: true,
          refresh: { baseVersionId: '6', newJobs: 0, changedJobs: 0, deletedJobs: 0 },
        } as RebuildCatalogResult,
      }),
    }),
  );
  assert.equal(upToDate.state, 'OK');
  assert.match(
    upToDate.line,
    /^REBUILD OK - refresh of main found nothing changed in the source: version 6 stays active/,
  );
});

test('OK while running and progressing: figures from the progress query, else from the catalog database', () => {
  const fromDb = verdict(facts());
  assert.equal(
    fromDb.line,
    'REBUILD OK - rebuild of main is copying at page 3/10, 33 rows/s | ' +
      'pages_done=3 pages_total=10 rows_per_second=33 retries=1 seconds_since_commit=4',
  );
  const fromQuery = verdict(
    facts({
      progress: { phase: 'copying', paused: false, pagesDone: 4, pagesTotal: 10, rowsPerSecond: 120, retries: 2 },
    }),
  );
  assert.equal(
    fromQuery.line,
    'REBUILD OK - rebuild of main is copying at page 4/10, 120 rows/s | ' +
      'pages_done=4 pages_total=10 rows_per_second=120 retries=2 seconds_since_commit=4',
  );
  const planning = verdict(facts({ run: run({ phase: 'planning' }), database: null }));
  assert.equal(
    planning.line,
    'REBUILD OK - rebuild of main is planning at page ?/? | pages_done=U pages_total=U rows_per_second=U retries=U seconds_since_commit=U',
  );
  assert.equal(
    verdict(facts({ run: run({ phase: 'reconciling' }) })).text,
    'rebuild of main is reconciling at page 3/10',
  );
});

test('CRITICAL when no worker polled the task queue for more than 75 s, with where the rebuild stands', () => {
  const stale = facts({ pollers: { taskQueue: 'q1', lastPollAtMs: ago(85), error: null } });
  const v = verdict(stale);
  assert.equal(v.code, 2);
  assert.match(
    v.line,
    /^REBUILD CRITICAL - no worker has polled task queue q1 for 85 s; rebuild of main is copying at page 3\/10, 33 rows\/s \| pages_done=3 /,
  );
  assert.equal(verdict(facts({ pollers: { taskQueue: 'q1', lastPollAtMs: ago(75), error: null } })).state, 'OK');
  // No poller listed at all: counted from the start of the run.
  const none = verdict(facts({ pollers: { taskQueue: 'q1', lastPollAtMs: null, error: null } }));
  assert.match(none.text, /^no worker has polled task queue q1 since this run started 600 s ago; /);
  const young = facts({
    run: run({ startedAtMs: ago(10) }),
    pollers: { taskQueue: 'q1', lastPollAtMs: null, error: null },
  });
  assert.equal(verdict(young).state, 'OK');
  // Pollers unknown (describeTaskQueue failed): no verdict on them.
  assert.equal(verdict(facts({ pollers: { taskQueue: 'q1', lastPollAtMs: null, error: 'boom' } })).state, 'OK');
  // Paused rebuilds need workers too.
  const paused = verdict({ ...stale, run: run({ memo: { paused: true, pauseChangedAt: null } }) });
  assert.equal(paused.state, 'CRITICAL');
  assert.match(paused.text, /; rebuild of main is paused \(pause signal\), copying at page 3\/10$/);
});

test('WARNING when copying, not paused, and no page committed for max(2 min, 10 × p99 page time)', () => {
  const stalled = facts();
  stalled.database = { ...stalled.database!, lastCommitAtMs: ago(121), p99PageMs: 1_000 };
  const v = verdict(stalled);
  assert.equal(v.code, 1);
  assert.equal(
    v.line,
    'REBUILD WARNING - no page committed for 121 s (limit 120 s); rebuild of main is copying at page 3/10, 33 rows/s | ' +
      'pages_done=3 pages_total=10 rows_per_second=33 retries=1 seconds_since_commit=121',
  );
  stalled.database.lastCommitAtMs = ago(120);
  assert.equal(verdict(stalled).state, 'OK', 'at the limit');
  // Slow pages: 10 × p99 (30 s) = 300 s.
  stalled.database = { ...stalled.database, lastCommitAtMs: ago(299), p99PageMs: 30_000 };
  assert.equal(verdict(stalled).state, 'OK');
  stalled.database.lastCommitAtMs = ago(301);
  assert.equal(verdict(stalled).text.split(';')[0], 'no page committed for 301 s (limit 300 s)');
  // Nothing committed yet: counted from the plan.
  const none = facts();
  none.database = { ...none.database!, pagesDone: 0, lastCommitAtMs: null, createdAtMs: ago(130), p99PageMs: null };
  assert.match(verdict(none).text, /^no page committed in the 130 s since the plan \(limit 120 s\); /);
  assert.equal(verdict(none).perfdata.seconds_since_commit, 130, 'counted from the plan before the first commit');
  // Not in the copy phase, or no longer building: no stall.
  assert.equal(verdict({ ...stalled, run: run({ phase: 'reconciling' }) }).state, 'OK');
  assert.equal(verdict({ ...stalled, database: { ...stalled.database, status: 'verifying' } }).state, 'OK');
  // A shorter floor (CATALOG_REBUILD_CHECK_STALL_SECONDS) applies.
  const quick = facts();
  quick.database = { ...quick.database!, lastCommitAtMs: ago(11), p99PageMs: 100 };
  assert.equal(verdict(quick, { ...DEFAULT_REBUILD_THRESHOLDS, stallFloorSeconds: 10 }).state, 'WARNING');
});

test('OK when paused, said in the text: pause signal, Temporal workflow pause, a page paused by an operator', () => {
  const stalled = facts();
  stalled.database = { ...stalled.database!, lastCommitAtMs: ago(900) };
  const bySignalProgress = {
    phase: 'copying' as const,
    paused: true,
    pagesDone: 3,
    pagesTotal: 10,
    rowsPerSecond: 0,
    retries: 1,
  };
  const bySignal = verdict({ ...stalled, progress: bySignalProgress });
  assert.equal(bySignal.code, 0);
  assert.equal(bySignal.text, 'rebuild of main is paused (pause signal), copying at page 3/10');
  // Without a worker, from the memo.
  const memo = (paused: boolean) => run({ memo: { paused, pauseChangedAt: '2026-11-01T19:50:00.000Z' } });
  assert.equal(verdict({ ...stalled, run: memo(true) }).text, bySignal.text);
  assert.equal(verdict({ ...stalled, run: memo(false) }).state, 'WARNING', 'the memo says not paused');
  assert.equal(verdict({ ...stalled, run: run({ memo: null }) }).state, 'WARNING', 'no memo: not paused');
  // The query's answer wins over the memo (a signal the workflow has run but not yet put in the memo).
  assert.equal(verdict({ ...stalled, run: memo(false), progress: { ...bySignalProgress } }).text, bySignal.text);

  const byTemporal = verdict({
    ...stalled,
    run: run({ status: 'PAUSED', workflowPause: { identity: 'ops@host', reason: 'maintenance', pausedAtMs: ago(60) } }),
  });
  assert.equal(byTemporal.state, 'OK');
  assert.equal(
    byTemporal.text,
    "rebuild of main is paused by Temporal's workflow pause (maintenance, by ops@host), copying at page 3/10",
  );
  assert.equal(
    verdict({ ...stalled, run: run({ status: 'PAUSED' }) }).text,
    "rebuild of main is paused by Temporal's workflow pause, copying at page 3/10",
  );

  const byOperator = verdict({
    ...stalled,
    activities: [page(7, { paused: true, state: 'PAUSED' }), page(8, { state: 'STARTED', attempt: 1 })],
  });
  assert.equal(byOperator.state, 'OK');
  assert.equal(
    byOperator.text,
    'rebuild of main is copying at page 3/10, 33 rows/s; page 7 paused by an operator (temporal activity pause)',
  );
});

test('WARNING outside the copy phase when a pending activity has not heartbeated for 2 × its heartbeat timeout', () => {
  const reconcile = (o: Partial<PendingActivityFact>): PendingActivityFact => ({
    ...page(0),
    activityId: '12',
    activityType: 'reconcile',
    pageNo: null,
    attempt: 1,
    state: 'STARTED',
    heartbeatTimeoutMs: 30_000,
    nextAttemptAtMs: null,
    ...o,
  });
  const f = (a: PendingActivityFact) => facts({ run: run({ phase: 'reconciling' }), activities: [a] });
  assert.equal(verdict(f(reconcile({ lastHeartbeatAtMs: ago(60), lastStartedAtMs: ago(200) }))).state, 'OK');
  const v = verdict(f(reconcile({ lastHeartbeatAtMs: ago(61), lastStartedAtMs: ago(200) })));
  assert.equal(v.code, 1);
  assert.equal(
    v.text,
    'activity reconcile (attempt 1) has not heartbeated for 61 s (heartbeat timeout 30 s); rebuild of main is reconciling at page 3/10',
  );
  // Never heartbeated: counted from the attempt's start.
  assert.equal(verdict(f(reconcile({ lastHeartbeatAtMs: null, lastStartedAtMs: ago(90) }))).state, 'WARNING');
  // Timed out and not picked up again (scheduled, no backoff left), in a child.
  const child = verdict(
    facts({
      run: run({ phase: 'repairing' }),
      activities: [
        reconcile({
          workflowId: 'catalog-rebuild/main/bucket-2026-10-01/r1',
          activityType: 'repairBucket',
          state: 'SCHEDULED',
          attempt: 2,
          lastHeartbeatAtMs: ago(70),
          lastStartedAtMs: ago(100),
          nextAttemptAtMs: ago(35),
        }),
      ],
    }),
  );
  assert.match(
    child.text,
    /^activity repairBucket \(attempt 2 in catalog-rebuild\/main\/bucket-2026-10-01\/r1\) has not heartbeated for 70 s/,
  );
  // Waiting for its retry, paused by an operator, without a heartbeat timeout, or in the copy phase: no warning.
  const old = { lastHeartbeatAtMs: ago(500), lastStartedAtMs: ago(500) };
  assert.equal(verdict(f(reconcile({ ...old, state: 'SCHEDULED', nextAttemptAtMs: NOW + 1000 }))).state, 'OK');
  assert.equal(verdict(f(reconcile({ ...old, paused: true }))).state, 'OK');
  assert.equal(verdict(f(reconcile({ ...old, heartbeatTimeoutMs: null }))).state, 'OK');
  const copying = facts({ activities: [page(4, { state: 'STARTED', ...old, nextAttemptAtMs: null })] });
  assert.equal(verdict(copying).state, 'OK');
});

test('WARNING when three or more pages failed with the same error other than a timeout, naming it', () => {
  const msg = (n: number) => `transient database error: connect ECONNREFUSED 10.0.0.${n}:5432`;
  const two = facts({ activities: [failing(5, msg(1)), failing(2, msg(2))] });
  assert.equal(verdict(two).state, 'OK');
  const three = facts({ activities: [failing(5, msg(1)), failing(2, msg(2)), failing(9, msg(3)), page(4)] });
  const v = verdict(three);
  assert.equal(v.code, 1);
  assert.equal(
    v.text,
    '3 pages failing with the same error: DB_TRANSIENT: transient database error: connect ECONNREFUSED 10.0.0.1:5432 ' +
      '(pages 2, 5, 9); rebuild of main is copying at page 3/10, 33 rows/s',
  );
  // Different errors, timeouts (dead workers) and cancellations (worker shutdown) do not add up.
  const timedOut = (n: number) =>
    page(n, { lastFailure: { message: 'activity Heartbeat timeout', type: null, timeout: true } });
  const cancelled = (n: number) =>
    failing(n, `page ${n} given up before writing: activity cancelled`, 'PAGE_CANCELLED');
  const mixed = facts({
    activities: [failing(1, msg(1)), failing(2, 'source read failed'), failing(3, msg(3), 'OTHER')]
      .concat([4, 5, 6].map(timedOut))
      .concat([7, 8, 10].map(cancelled)),
  });
  assert.equal(verdict(mixed).state, 'OK');
  // Pages known only by activity id; long messages shortened.
  const long = 'x'.repeat(300);
  const byId = facts({
    activities: [1, 2, 3].map((n) => ({ ...failing(n, long, null), pageNo: null, activityId: String(10 + n) })),
  });
  assert.match(verdict(byId).text, /^3 pages failing with the same error: x{197}\.\.\. \(pages 11, 12, 13\); /);
});

test('WARNING while a step other than a page is retried after an error: the plan of an unreachable source, naming the attempt and the error', () => {
  const plan = (o: Partial<PendingActivityFact> = {}): PendingActivityFact => ({
    ...page(0, { activityId: '1', activityType: 'planRebuild', pageNo: null, attempt: 6 }),
    ...o,
  });
  const planning = (activities: PendingActivityFact[]) =>
    facts({ run: run({ phase: 'planning' }), database: null, activities });
  assert.equal(verdict(planning([plan()])).state, 'OK', 'a first attempt running');
  const refused = plan({
    lastFailure: {
      message: 'transient database error: connect ECONNREFUSED 127.0.0.1:1',
      type: 'DB_TRANSIENT',
      timeout: false,
    },
  });
  const v = verdict(planning([refused]));
  assert.equal(v.code, 1);
  assert.equal(
    v.text,
    'its plan is retried (attempt 6): transient database error: connect ECONNREFUSED 127.0.0.1:1; ' +
      'rebuild of main is planning at page ?/?',
  );
  // A timeout (a worker that died) is the heartbeat check's; a page's error the same-error check's.
  const timedOut = plan({ lastFailure: { message: 'activity Heartbeat timeout', type: null, timeout: true } });
  assert.equal(verdict(planning([timedOut])).state, 'OK');
  assert.equal(verdict(facts({ activities: [failing(4, 'boom')] })).state, 'OK');
  // Another step: its activity type named as the warnings name it.
  const seal = plan({
    activityType: 'sealVersion',
    attempt: 2,
    lastFailure: { message: 'boom', type: 'DB_ERROR', timeout: false },
  });
  assert.match(verdict(facts({ activities: [seal] })).text, /^its seal is retried \(attempt 2\): boom; /);
});

test('precedence: CRITICAL over WARNING over OK; every finding of the winning state is named', () => {
  const f = facts({
    pollers: { taskQueue: 'q1', lastPollAtMs: ago(200), error: null },
    activities: [failing(1, 'boom 1'), failing(2, 'boom 2'), failing(3, 'boom 3')],
  });
  f.database = { ...f.database!, lastCommitAtMs: ago(500) };
  const critical = verdict(f);
  assert.equal(critical.state, 'CRITICAL');
  assert.equal(
    critical.text,
    'no worker has polled task queue q1 for 200 s; rebuild of main is copying at page 3/10, 33 rows/s',
  );
  const warning = verdict({ ...f, pollers: { ...f.pollers, lastPollAtMs: ago(1) } });
  assert.equal(warning.state, 'WARNING');
  assert.equal(
    warning.text,
    'no page committed for 500 s (limit 120 s); 3 pages failing with the same error: DB_TRANSIENT: boom 1 (pages 1, 2, 3); ' +
      'rebuild of main is copying at page 3/10, 33 rows/s',
  );
  // The catalog database unreadable while the rebuild runs: WARNING.
  const noDb = verdict(facts({ database: null, databaseError: 'password authentication failed' }));
  assert.equal(noDb.state, 'WARNING');
  assert.match(noDb.text, /^cannot read the catalog database: password authentication failed; rebuild of main/);
  // A failed rebuild is CRITICAL whatever else holds.
  assert.equal(verdict({ ...f, run: run({ status: 'FAILED', failure: 'x' }) }).text, 'rebuild of main failed: x');
});

test('thresholds from the environment (for tests) and the failure chain reason', () => {
  assert.deepEqual(rebuildThresholds({}), DEFAULT_REBUILD_THRESHOLDS);
  assert.deepEqual(
    rebuildThresholds({ CATALOG_REBUILD_CHECK_NO_POLLER_SECONDS: '5', CATALOG_REBUILD_CHECK_STALL_SECONDS: '8' }),
    { ...DEFAULT_REBUILD_THRESHOLDS, noPollerSeconds: 5, stallFloorSeconds: 8 },
  );
  assert.deepEqual(rebuildThresholds({ CATALOG_REBUILD_CHECK_NO_POLLER_SECONDS: 'soon' }), DEFAULT_REBUILD_THRESHOLDS);
  assert.deepEqual(Object.values(DEFAULT_REBUILD_THRESHOLDS), [75, 120, 10, 2, 3], '75 s, 2 min, 10 × p99, 2 ×, 3');
  const chain = new Error('Workflow execution failed', {
    cause: new Error('Activity task failed', { cause: new Error('database error 3D000: database "x" does not exist') }),
  });
  assert.equal(deepestMessage(chain), 'database error 3D000: database "x" does not exist');
  assert.equal(deepestMessage('plain'), 'plain');
});

test('CRITICAL per build: the pinned build has no polling worker, even when another build polls; the text names the build', () => {
  const pinned = run({
    build: { deploymentName: 'catalog-rebuild', buildId: '0.1.0+b1', behavior: 'PINNED', override: false },
  });
  const seen = (b1Ago: number | null) => [
    { identity: '2@host', buildId: '0.1.0+b2', lastPollAtMs: ago(1) },
    ...(b1Ago === null ? [] : [{ identity: '1@host', buildId: '0.1.0+b1', lastPollAtMs: ago(b1Ago) }]),
  ];
  const gone = verdict(
    facts({ run: pinned, pollers: { taskQueue: 'q1', lastPollAtMs: ago(1), seen: seen(85), error: null } }),
  );
  assert.equal(gone.code, 2);
  assert.equal(
    gone.text,
    'no worker of build 0.1.0+b1 has polled task queue q1 for 85 s; rebuild of main is copying at page 3/10, 33 rows/s (build 0.1.0+b1)',
  );
  const never = verdict(
    facts({ run: pinned, pollers: { taskQueue: 'q1', lastPollAtMs: ago(1), seen: seen(null), error: null } }),
  );
  assert.match(
    never.text,
    /^no worker of build 0\.1\.0\+b1 has polled task queue q1 since this run started 600 s ago; /,
  );
  const live = verdict(
    facts({ run: pinned, pollers: { taskQueue: 'q1', lastPollAtMs: ago(1), seen: seen(30), error: null } }),
  );
  assert.equal(live.state, 'OK');
  assert.equal(live.text, 'rebuild of main is copying at page 3/10, 33 rows/s (build 0.1.0+b1)');
});

test('a commit rate reads 0 once the ledger stopped moving: max(5 s, 2 × p99 page time) without a commit', () => {
  assert.equal(commitRate(600, 60, 1, 200), 10);
  assert.equal(commitRate(600, 60, 5, 200), 10, 'at the floor');
  assert.equal(commitRate(600, 60, 6, 200), 0, 'past the floor: a dead worker shows no rate');
  assert.equal(commitRate(600, 60, 19, 10_000), 10, 'slow pages: 2 × p99 = 20 s');
  assert.equal(commitRate(600, 60, 21, 10_000), 0);
  assert.equal(commitRate(0, 60, null, null), 0, 'nothing committed yet');
});
