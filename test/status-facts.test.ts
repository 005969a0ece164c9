/**
 * `status`, `status --follow` and the signal commands as formatters of a rebuild's facts
 * (client/rebuild-facts.ts), on synthetic facts without services: the build and its pollers, the
 * pause state of the memo with a signal no worker has run yet, the catalog database's view as text,
 * a cancelled rebuild's pages from the ledger, and the follow samples.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RebuildFacts, RunFact } from '../client/rebuild-facts';
import { livePollersOf } from '../client/rebuild-facts';
import {
  buildLines,
  closedOutcomeOf,
  closedReport,
  closedReportLines,
  databaseLines,
  memoPauseLine,
  openStateOf,
} from '../client/commands/status-report';
import { signalWaitsLine } from '../client/commands/signals';
import { followSampleOf, formatSample } from '../client/follow-status';
import type { DatabaseStatus } from '../client/status';
import type { RebuildCatalogResult } from '../workflows/definitions';

const NOW = Date.parse('2026-11-01T20:00:00Z');
const ago = (seconds: number): number => NOW - seconds * 1000;
const B1 = '0.1.0+5f6fef11f19a';

function run(o: Partial<RunFact> = {}): RunFact {
  return {
    runId: 'r1',
    status: 'RUNNING',
    startedAtMs: ago(600),
    phase: 'copying',
    memo: { paused: false, pauseChangedAt: null },
    build: { deploymentName: 'catalog-rebuild', buildId: B1, behavior: 'PINNED', override: false },
    workflowTaskPending: false,
    failure: null,
    result: null,
    workflowPause: null,
    ...o,
  };
}

const view: DatabaseStatus = {
  catalog: 'main',
  activeVersionId: '6',
  latest: {
    versionId: '7',
    status: 'building',
    pagesTotal: 10,
    pageSize: 100,
    pageSizing: 'fixed',
    pagesCommitted: 3,
    checkpoint: 3,
    rows: 300,
    rejects: 0,
    retries: 1,
    failureReason: null,
    lastCommitAt: '2026-11-01T19:59:48.000Z',
    secondsSinceProgress: 12,
    secondsSinceCreated: 590,
  },
  reconciliation: null,
  lastEvent: 'page 3 committed',
};

/** A copying rebuild pinned to b1 whose only b1 worker last polled `b1Ago` s ago, while a b2 worker polls. */
function facts(b1Ago: number, o: Partial<RebuildFacts> = {}): RebuildFacts {
  return {
    catalog: 'main',
    workflowId: 'catalog-rebuild/main',
    temporalError: null,
    run: run(),
    progress: null,
    queryError: 'no worker answered the progress query within 5000 ms',
    activities: [],
    pollers: {
      taskQueue: 'q1',
      lastPollAtMs: ago(1),
      seen: [
        { identity: '1@host', buildId: B1, lastPollAtMs: ago(b1Ago) },
        { identity: '2@host', buildId: '0.1.0+b2', lastPollAtMs: ago(1) },
      ],
      error: null,
    },
    database: null,
    databaseError: null,
    view: { status: view, renumbered: null },
    ...o,
  };
}

test('workers of the pinned build only: the build line counts them, and no worker of it is said so', () => {
  assert.equal(livePollersOf(facts(10), NOW, 75).length, 1);
  assert.equal(livePollersOf(facts(80), NOW, 75).length, 0, 'the b2 worker does not count');
  const st = openStateOf(facts(80), NOW, 75);
  assert.deepEqual(buildLines(st), [`build: ${B1} (pinned, deployment catalog-rebuild; 0 workers of this build poll)`]);
  assert.deepEqual(buildLines(openStateOf(facts(10), NOW, 75)), [
    `build: ${B1} (pinned, deployment catalog-rebuild; 1 worker of this build polls)`,
  ]);
  // Unknown build (before the first workflow task): any poller counts, no build line.
  const unknown = facts(80, { run: run({ build: null }) });
  assert.equal(livePollersOf(unknown, NOW, 75).length, 1);
  assert.deepEqual(buildLines(openStateOf(unknown, NOW, 75)), []);
});

test('pause state from the memo; a signal no worker has run yet is named as waiting for the build', () => {
  const waiting = facts(80, { run: run({ workflowTaskPending: true }) });
  assert.equal(
    memoPauseLine(waiting, openStateOf(waiting, NOW, 75)),
    `pause: not paused, as the rebuild last recorded it (memo); a pause, resume or cancel sent since takes effect, and shows here, when a worker of build ${B1} runs the rebuild`,
  );
  const paused = facts(10, { run: run({ memo: { paused: true, pauseChangedAt: '2026-11-01T19:50:00.000Z' } }) });
  assert.equal(
    memoPauseLine(paused, openStateOf(paused, NOW, 75)),
    'pause: paused by the pause signal since 2026-11-01T19:50:00.000Z, as the rebuild last recorded it (memo)',
  );
  assert.equal(
    signalWaitsLine('pause', waiting, NOW, 75),
    `pause requested: no worker of build ${B1} polls task queue q1; it takes effect, and status shows it, when one runs the rebuild`,
  );
  assert.equal(signalWaitsLine('pause', facts(10), NOW, 75), null, 'a worker of the build polls');
});

test('the catalog database view is text lines, not JSON', () => {
  assert.deepEqual(databaseLines('main', view), [
    'catalog database: version 7 building · 3/10 pages committed (checkpoint 3) · 300 rows · 0 rejects · 1 retries · last page 12 s ago',
    'active version: 6',
    'last event: page 3 committed',
  ]);
});

test("a cancelled rebuild's outcome shows the ledger's pages done, not the pages planned", () => {
  const result = {
    catalog: 'main',
    versionId: '7',
    published: false,
    cancelled: true,
    pagesTotal: 10,
    pagesDone: 2,
    rowsUpserted: 200,
    rejects: 0,
    retries: 1,
    reconciliation: null,
    previousVersionId: null,
    durationMs: 4_000,
    runs: 1,
  } as RebuildCatalogResult;
  const f = facts(10, {
    run: run({ status: 'COMPLETED', result }),
    database: {
      versionId: '7',
      status: 'abandoned',
      pagesTotal: 10,
      pagesDone: 3,
      rowsDone: 300,
      lastCommitAtMs: ago(30),
      createdAtMs: ago(600),
      rowsPerSecond: 0,
      retries: 1,
      p99PageMs: 500,
      failureReason: 'cancelled by signal',
    },
  });
  const o = closedOutcomeOf(f);
  assert.equal(o.code, 1);
  // Pages and rows as the ledger counts them (a page committed as the cancel arrived).
  assert.match(o.lines[0], /^catalog main: version 7 cancelled \(abandoned\); 3 of 10 pages, 300 rows/);
  const text = closedReportLines(closedReport(f, o), o);
  assert.equal(
    text[0],
    'catalog main: rebuild catalog-rebuild/main was cancelled (the cancel signal; Temporal status COMPLETED)',
  );
  assert.equal(closedReport(f, o).pagesDone, 3);

  // This build's rebuild ends CANCELLED; its result comes from the memo: the same lines.
  const g = { ...f, run: run({ status: 'CANCELLED', result }) };
  const p = closedOutcomeOf(g);
  assert.deepEqual([p.code, p.lines], [o.code, o.lines]);
  const cancelledText = closedReportLines(closedReport(g, p), p);
  assert.equal(cancelledText[0], 'catalog main: rebuild catalog-rebuild/main cancelled');
  assert.deepEqual(cancelledText.slice(1), text.slice(1));
  assert.equal(closedReport(g, p).phase, 'cancelled');
});

test('status --follow samples: the query when a worker answered, else the database, with the build and its pollers', () => {
  const db = followSampleOf(facts(80), 75, NOW);
  assert.ok(!('error' in db));
  assert.equal(db.answeredBy, 'database');
  assert.deepEqual([db.pollers, db.build], [0, B1]);
  assert.equal(
    formatSample(db),
    'main: version 7 building · page 3/10 (30%) · 300 rows · last page 12s ago (from the database)',
  );
  const none = followSampleOf(facts(80, { view: null, databaseError: 'ECONNREFUSED' }), 75, NOW);
  assert.deepEqual(none, {
    error:
      'no answer from the workflow (no worker answered the progress query within 5000 ms) nor from the catalog database (ECONNREFUSED)',
  });
});
