/**
 * The wording of the activities' events and failures, asserted on real outputs: reconciled
 * messages, warnings, the reject threshold, quarantined records, renumbered jobs, the shrink guard.
 * Pure: no PostgreSQL, no Temporal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ReconcileOutcome, ReconcileWarnings } from '../activities/messages';
import { describeRejects, pageGoneMessage } from '../lib/page/messages';
import { shrunkBuckets, shrunkCatalog } from '../lib/catalog/publish';
import {
  pageRetryMessage,
  plannedMessage,
  publishedMessage,
  reconciledMessage,
  rejectThresholdMessage,
  renumberedNote,
  repairedMessage,
  shrinkGuardMessage,
  sourceUnreadableMessage,
  warningsNote,
} from '../activities/messages';

const NO_WARNINGS: ReconcileWarnings = { unknownCodes: [], dst: null, duplicateRecords: 0 };
const OUTCOME: ReconcileOutcome = {
  round: 1,
  buckets: 3,
  sourceRows: 100,
  catalogRows: 98,
  rejects: 2,
  delta: 4,
  mismatched: [],
  sampleMismatches: 0,
  overThreshold: false,
  maxRejects: 10,
};

test('describeRejects: first three records with shortened long ids, then an ellipsis', () => {
  const rejects = [
    { jobKey: '1', jobId: '1', reason: 'bad status' },
    { jobKey: '2', jobId: 'abcdef0123456789abcdef', reason: 'bad time' },
    { jobKey: '3', jobId: 'snap-3', reason: 'no id' },
    { jobKey: '4', jobId: null, reason: 'empty' },
  ];
  assert.equal(
    describeRejects(rejects),
    'record 1: bad status; record 2 (abcdef012345…): bad time; record 3 (snap-3): no id; …',
  );
  assert.equal(describeRejects(rejects.slice(3)), 'record 4: empty');
  assert.equal(describeRejects([]), '');
});

test('reconciled: all buckets match', () => {
  assert.equal(
    reconciledMessage(OUTCOME, NO_WARNINGS),
    'round 1: 3 buckets match (100 jobs = 98 in the catalog + 2 quarantined; delta 4 jobs after the watermark)',
  );
});

test('reconciled: jobs gone from the source after the plan are named with the delta', () => {
  assert.equal(
    reconciledMessage({ ...OUTCOME, gone: 1 }, NO_WARNINGS),
    'round 1: 3 buckets match (100 jobs = 98 in the catalog + 2 quarantined; delta 4 jobs after the watermark, 1 job gone from the source after the plan)',
  );
  assert.match(
    reconciledMessage({ ...OUTCOME, gone: 2 }, NO_WARNINGS),
    /, 2 jobs gone from the source after the plan\)$/,
  );
});

test('gone: a page names the jobs it left out (first three, long ids shortened); the publish counts them', () => {
  const gone = ['a'.repeat(64), 'b'.repeat(64), 'host-2026', 'd'.repeat(64)].map((jobId) => ({
    jobId,
    reason: 'the snapshot is no longer in the repository',
  }));
  assert.equal(
    pageGoneMessage(3, gone.slice(0, 1)),
    `page 3: 1 job gone from the source after the plan, left out of the version (a follow-up delta): job ${'a'.repeat(12)}…: the snapshot is no longer in the repository`,
  );
  assert.match(
    pageGoneMessage(3, gone),
    /^page 3: 4 jobs gone from the source after the plan, .*; job b{12}…: the .*; job host-2026: the snapshot is no longer in the repository; …$/,
  );
  assert.equal(
    publishedMessage('12', '11', false, '', 2),
    'version 12 published, replacing version 11; 2 jobs gone from the source after the plan, left out (a follow-up delta)',
  );
  assert.equal(publishedMessage('12', null, false, ''), 'version 12 published');
});

test('reconciled: match, but over the reject threshold', () => {
  assert.equal(
    reconciledMessage({ ...OUTCOME, rejects: 12, overThreshold: true }, NO_WARNINGS),
    'round 1: 3 buckets match, but 12 source records are quarantined (threshold 10)',
  );
});

test('reconciled: buckets differ (first ten named), warnings left out', () => {
  const mismatched = Array.from({ length: 12 }, (_, i) => `2024-05-${String(i + 1).padStart(2, '0')}`);
  assert.equal(
    reconciledMessage({ ...OUTCOME, mismatched, sampleMismatches: 3 }, { ...NO_WARNINGS, duplicateRecords: 5 }),
    'round 1: 12 buckets differ (2024-05-01, 2024-05-02, 2024-05-03, 2024-05-04, 2024-05-05, 2024-05-06, 2024-05-07, 2024-05-08, 2024-05-09, 2024-05-10, …), 3 sampled jobs differ',
  );
  assert.equal(
    reconciledMessage({ ...OUTCOME, mismatched: ['none'] }, NO_WARNINGS),
    'round 1: 1 buckets differ (none), 0 sampled jobs differ',
  );
});

test('warnings note: unknown codes (first five), DST counts, repeated ids', () => {
  assert.equal(warningsNote(NO_WARNINGS), '');
  const w: ReconcileWarnings = {
    unknownCodes: [
      { field: 'level', code: 'Q', jobs: 2 },
      { field: 'status', code: 'z', jobs: 1 },
    ],
    dst: { zone: 'Europe/Berlin', nonexistent: 1, ambiguous: 2, rule: 'r' },
    duplicateRecords: 3,
  };
  assert.equal(
    warningsNote(w),
    '; warnings: 3 jobs with unknown codes kept verbatim (level "Q" × 2, status "z" × 1); 1 nonexistent and 2 ambiguous start times at DST changes in Europe/Berlin; 3 repeated job ids dropped',
  );
  assert.equal(warningsNote({ ...NO_WARNINGS, dst: { zone: 'UTC', nonexistent: 0, ambiguous: 0, rule: 'r' } }), '');
  assert.equal(
    warningsNote({ ...NO_WARNINGS, dst: { error: 'permission denied' } }),
    '; warnings: DST counts unavailable: permission denied',
  );
  assert.equal(
    reconciledMessage(OUTCOME, { ...NO_WARNINGS, duplicateRecords: 1 }),
    'round 1: 3 buckets match (100 jobs = 98 in the catalog + 2 quarantined; delta 4 jobs after the watermark); warnings: 1 repeated job ids dropped',
  );
});

test('reject threshold: first reasons, where the records are, how to publish', () => {
  assert.equal(
    rejectThresholdMessage({
      source: 'director',
      versionId: '7',
      rejects: 12,
      maxRejects: 10,
      sample: [
        { job_key: '5', job_id: '5', reason: 'bad status' },
        { job_key: '6', job_id: null, reason: 'no id' },
      ],
    }),
    '12 source records of director are quarantined, more than the threshold of 10: record 5: bad status; record 6: no id. ' +
      'Version 7 is not published. The reject table holds every reason and raw record (SELECT * FROM reject WHERE version_id = 7); ' +
      "fix the source, or raise maxRejects of source director in the workers' configuration file and restart the workers (they read it at start) to publish with them.",
  );
});

test('renumbered note: empty without renumbered jobs; first ten, `+` when truncated', () => {
  assert.equal(renumberedNote(null), '');
  assert.equal(renumberedNote({ jobs: [], truncated: false }), '');
  assert.equal(
    renumberedNote({ jobs: [{ job: 'Backup.2024-05-01', previousJobId: '10', jobId: '20' }], truncated: false }),
    '; 1 job names have a new job id (source renumbered?): Backup.2024-05-01 (10 → 20)',
  );
  const jobs = Array.from({ length: 11 }, (_, i) => ({ job: `j${i}`, previousJobId: `${i}`, jobId: `${i + 100}` }));
  const note = renumberedNote({ jobs, truncated: true });
  assert.ok(
    note.startsWith('; 11+ job names have a new job id (source renumbered?): j0 (0 → 100), j1 (1 → 101)'),
    note,
  );
  assert.ok(note.endsWith('j9 (9 → 109), …'), note);
});

test('shrink guard: buckets with before → after, the limits, the renumbered note and the way out', () => {
  assert.equal(
    shrinkGuardMessage({
      shrunk: [
        { bucket: '2024-05-01', before: '100', after: '0' },
        { bucket: '2024-05-02', before: '50', after: '40' },
      ],
      share: 0.1,
      minJobs: 5,
      previousVersionId: '3',
      renumberedNote: '',
    }),
    'shrink guard: 2 buckets lost more than 10% and at least 5 jobs compared with active version 3: 2024-05-01 (100 → 0), 2024-05-02 (50 → 40); rerun with --allow-shrink if this is intended',
  );
  const many = Array.from({ length: 63 }, (_, i) => ({ bucket: `b${i}`, before: '9', after: '0' }));
  const m = shrinkGuardMessage({
    shrunk: many,
    share: 0.25,
    minJobs: 1,
    previousVersionId: '3',
    renumberedNote: '; note',
  });
  assert.ok(m.startsWith('shrink guard: 63 buckets lost more than 25% and at least 1 jobs'), m);
  assert.ok(m.endsWith('b61 (9 → 0), …; note; rerun with --allow-shrink if this is intended'), m);
});

test('shrink guard over the catalog as a whole: a loss spread over small buckets, history pruned, the message', () => {
  const limits = { minJobs: 5, share: 0.1 };
  // 20 days of 3 jobs each (a listing with a few snapshots a day): no bucket loses 5 jobs.
  const days = Array.from({ length: 20 }, (_, i) => `2026-01-${String(i + 1).padStart(2, '0')}`);
  const before = days.map((bucket) => ({ bucket, jobs: '3' }));
  // A listing that lists nothing: every day is compared, none shows, the whole catalog does.
  assert.deepEqual(shrunkBuckets(before, [], limits), []);
  assert.deepEqual(shrunkCatalog(before, [], limits), { before: '60', after: '0' });
  // Two of three jobs gone on every day: the same.
  const thinned = days.map((bucket) => ({ bucket, jobs: '1' }));
  assert.deepEqual(shrunkBuckets(before, thinned, limits), []);
  // (the new version's oldest day, 2026-01-01, counts as history: 19 days of 3 before, of 1 after)
  assert.deepEqual(shrunkCatalog(before, thinned, limits), { before: '57', after: '19' });
  // One job fewer on 7 days, and 10 new jobs on a new day: the new jobs do not make up for the lost.
  const masked = [...before.map((b, i) => ({ ...b, jobs: i < 7 ? '2' : '3' })), { bucket: '2026-02-01', jobs: '10' }];
  assert.deepEqual(shrunkCatalog(before, masked, limits), { before: '57', after: '51' });
  // The director pruned the oldest 15 days and part of the 16th (retention prunes by time): history.
  const pruned = days.slice(15).map((bucket, i) => ({ bucket, jobs: i === 0 ? '1' : '3' }));
  assert.equal(shrunkCatalog(before, pruned, limits), null);
  const big = [
    { bucket: '2026-01-01', jobs: '50' },
    { bucket: '2026-01-02', jobs: '50' },
    { bucket: '2026-01-03', jobs: '50' },
  ];
  const cutMidDay = [
    { bucket: '2026-01-02', jobs: '4' },
    { bucket: '2026-01-03', jobs: '50' },
  ];
  assert.deepEqual(shrunkBuckets(big, cutMidDay, limits), [], 'the oldest day left, pruned in part, is history');
  assert.equal(shrunkCatalog(big, cutMidDay, limits), null);
  assert.deepEqual(
    shrunkBuckets(big, [...cutMidDay.slice(0, 1), { bucket: '2026-01-03', jobs: '40' }], limits),
    [{ bucket: '2026-01-03', before: '50', after: '40' }],
    'a later day that lost jobs is not',
  );
  // At most `minJobs` − 1 lost, or no more than `share`: published.
  assert.equal(
    shrunkCatalog(
      before,
      before.map((b, i) => ({ ...b, jobs: i < 5 ? '2' : '3' })),
      limits,
    ),
    null,
  );
  assert.deepEqual(
    shrunkCatalog(
      before,
      before.map((b, i) => ({ ...b, jobs: i < 7 ? '2' : '3' })),
      limits,
    ),
    {
      before: '57',
      after: '51',
    },
  );
  const base = { share: 0.1, minJobs: 5, previousVersionId: '3', renumberedNote: '' };
  assert.equal(
    shrinkGuardMessage({ ...base, shrunk: [], whole: { before: '60', after: '0' } }),
    'shrink guard: the catalog as a whole (60 → 0 jobs on the days it still covers) lost more than 10% and at least 5 jobs compared with active version 3; rerun with --allow-shrink if this is intended',
  );
  assert.equal(
    shrinkGuardMessage({
      ...base,
      shrunk: [{ bucket: '2024-05-01', before: '100', after: '0' }],
      whole: { before: '150', after: '50' },
    }),
    'shrink guard: 1 buckets lost more than 10% and at least 5 jobs compared with active version 3: 2024-05-01 (100 → 0); so did the catalog as a whole (150 → 50 jobs on the days it still covers); rerun with --allow-shrink if this is intended',
  );
});

test('planned, repaired and unreadable messages', () => {
  const planned = {
    versionId: '4',
    pagesTotal: 2,
    pageSize: 1000,
    maxKey: '1999',
    rows: '1999',
    time: 't',
    snapshot: null,
    duplicates: 0,
  };
  assert.equal(plannedMessage(planned), 'planned version 4: 2 pages of 1000 jobs, watermark job 1999 at t');
  assert.equal(
    plannedMessage({ ...planned, snapshot: 'abc', duplicates: 2 }),
    'planned version 4: 2 pages of 1000 jobs, watermark listing sha256 abc (1999 records staged, 2 repeated ids dropped, the last listed kept) at t',
  );
  assert.equal(
    repairedMessage({ bucket: null, upserted: 3, deleted: 1, moved: 2, rejects: 0, ok: true }),
    'bucket none: 3 rows upserted, 1 deleted, 2 moved, 0 quarantined; verified',
  );
  assert.equal(
    sourceUnreadableMessage(2, 'director', [null, '2024-01-01', '2024-03-01'], 'connection refused'),
    'round 2: source director could not be read for reconciliation, so every bucket is unreadable (3 buckets in the catalog, 2024-01-01 … 2024-03-01) and none is counted as empty: connection refused',
  );
});

test("pageRetryMessage: the previous attempt's worker, or why it is unknown", () => {
  assert.equal(
    pageRetryMessage(35, 2, '22595@vm', 'activity Heartbeat timeout'),
    'page 35 attempt 2: previous attempt by 22595@vm failed: activity Heartbeat timeout',
  );
  assert.equal(
    pageRetryMessage(34, 2, null, 'activity Heartbeat timeout'),
    'page 34 attempt 2: previous attempt by an unknown worker (it died before its first heartbeat and claim row) failed: activity Heartbeat timeout',
  );
});
