/**
 * The comparisons of reconciliation on hand-made statistics and rows: which buckets differ and why
 * (count, fingerprint, sample), the field-by-field sample, byte totals. Pure: no PostgreSQL, no Temporal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  bucketName,
  bucketSpans,
  compareBucketFigures,
  compareBuckets,
  compareSample,
  sumBytes,
} from '../activities/reconcile-compare';
import { compareFileBuckets } from '../activities/reconcile-files';
import type { BucketStat, SourceRow } from '../lib/sources/types';
import { JOB_COLUMNS } from '../lib/sources/types';

const stat = (
  bucket: string | null,
  count: number,
  fingerprint = `fp-${bucket}-${count}`,
  bytes = '0',
  span: [string, string] = ['1', '1'],
): BucketStat => ({ bucket, count, fingerprint, bytes, minKey: span[0], maxKey: span[1] });

/** A row with every column NULL but the given ones. */
function row(fields: Partial<SourceRow>): SourceRow {
  const r = Object.fromEntries(JOB_COLUMNS.map((c) => [c, null])) as SourceRow;
  return { ...r, ...fields };
}

test('equal statistics: no bucket differs', () => {
  const s = [stat(null, 2), stat('2024-05-01', 10), stat('2024-05-02', 3)];
  assert.deepEqual(
    compareBuckets(
      s,
      s.map((x) => ({ ...x })),
    ),
    [],
  );
});

test('counts, missing buckets and fingerprints: each bucket with its reason, sorted by name', () => {
  const source = [
    stat(null, 2, 'n'),
    stat('2024-05-03', 5, 'a'),
    stat('2024-05-01', 10, 'b'),
    stat('2024-05-02', 3, 'c'),
  ];
  const catalog = [
    stat(null, 2, 'n'),
    stat('2024-05-01', 10, 'B'),
    stat('2024-05-02', 2, 'c'),
    stat('2024-05-04', 1, 'd'),
  ];
  assert.deepEqual(compareBuckets(source, catalog), [
    { bucket: '2024-05-01', source: 10, catalog: 10, reason: 'fingerprint' },
    { bucket: '2024-05-02', source: 3, catalog: 2, reason: 'count' },
    { bucket: '2024-05-03', source: 5, catalog: 0, reason: 'count' },
    { bucket: '2024-05-04', source: 0, catalog: 1, reason: 'count' },
  ]);
});

test('jobs without a start time form the bucket `none`', () => {
  assert.equal(bucketName(null), 'none');
  assert.equal(bucketName('2024-01-31'), '2024-01-31');
  assert.deepEqual(compareBuckets([stat(null, 4)], [stat(null, 3)]), [
    { bucket: 'none', source: 4, catalog: 3, reason: 'count' },
  ]);
});

test('sample buckets: a matching bucket is sent to repair by `sample`; one already differing keeps its reason', () => {
  const source = [stat('2024-05-01', 10, 'x'), stat('2024-05-02', 3, 'y')];
  const catalog = [stat('2024-05-01', 10, 'x'), stat('2024-05-02', 4, 'y')];
  assert.deepEqual(compareBuckets(source, catalog, ['2024-05-02', '2024-05-01', '2024-06-30']), [
    { bucket: '2024-05-01', source: 10, catalog: 10, reason: 'sample' },
    { bucket: '2024-05-02', source: 3, catalog: 4, reason: 'count' },
    { bucket: '2024-06-30', source: 0, catalog: 0, reason: 'sample' },
  ]);
});

test('sample: identical rows match; NULL equals NULL', () => {
  const rows = [
    row({ job_id: '1', job_key: '1', bucket: '2024-05-01', status: 'T' }),
    row({ job_id: '2', job_key: '2', bucket: null }),
  ];
  const r = compareSample(
    rows,
    rows.map((x) => ({ ...x })),
  );
  assert.equal(r.mismatches, 0);
  assert.deepEqual(r.diffs, []);
  assert.deepEqual([...r.buckets], []);
});

test('sample: a differing field names both buckets; a job missing from the source counts and names its bucket', () => {
  const catalog = [
    row({ job_id: '1', job_key: '1', bucket: '2024-05-01', status: 'T', client: 'a' }),
    row({ job_id: '2', job_key: '2', bucket: '2024-05-02', status: 'T' }),
    row({ job_id: '3', job_key: '3', bucket: null }),
  ];
  const source = [
    row({ job_id: '1', job_key: '1', bucket: '2024-05-03', status: 'E', client: 'a' }),
    row({ job_id: '2', job_key: '2', bucket: '2024-05-02', status: 'T' }),
    row({ job_id: '9', job_key: '9', bucket: '2024-07-01' }), // not sampled: ignored
  ];
  const r = compareSample(catalog, source);
  assert.equal(r.mismatches, 2);
  assert.deepEqual(r.diffs, [{ jobId: '1', fields: ['status', 'bucket'] }]);
  assert.deepEqual([...r.buckets].sort(), ['2024-05-01', '2024-05-03', 'none']);
});

test('sample: at most 20 diffs are kept, every mismatch is counted', () => {
  const catalog = Array.from({ length: 25 }, (_, i) =>
    row({ job_id: String(i), job_key: String(i), bucket: '2024-01-01', status: 'T' }),
  );
  const source = catalog.map((r) => ({ ...r, status: 'E' }));
  const r = compareSample(catalog, source);
  assert.equal(r.mismatches, 25);
  assert.equal(r.diffs.length, 20);
  assert.deepEqual(r.diffs[0], { jobId: '0', fields: ['status'] });
});

test('byte totals are exact beyond 2^53', () => {
  assert.equal(
    sumBytes([stat('a', 1, 'f', '9007199254740993'), stat('b', 1, 'f', '9007199254740993'), stat('c', 0, 'f', '0')]),
    '18014398509481986',
  );
  assert.equal(sumBytes([]), '0');
});

test('id spans of mismatched buckets: union of both sides, compared as integers', () => {
  const src = [stat(null, 1, 'a', '0', ['5', '5']), stat('2024-05-01', 2, 'a', '0', ['9', '100000000010'])];
  const cat = [stat('2024-05-01', 2, 'b', '0', ['10', '99']), stat('2024-05-02', 1, 'c', '0', ['7', '7'])];
  assert.deepEqual(bucketSpans(['2024-05-01', '2024-05-02', '2024-05-03'], src, cat), {
    '2024-05-01': { min: '9', max: '100000000010' },
    '2024-05-02': { min: '7', max: '7' },
  });
});

test('jobs and file records are compared by one rule: figure first (a missing bucket is 0), then the digest of equal non-zero figures', () => {
  const src = [stat('2026-01-01', 3, 'a'), stat('2026-01-02', 2, 'b'), stat(null, 1, 'n'), stat('2026-01-04', 5, 'd')];
  const cat = [
    stat('2026-01-01', 3, 'a'),
    stat('2026-01-02', 2, 'x'),
    stat('2026-01-03', 4, 'c'),
    stat('2026-01-04', 6, 'd'),
  ];
  const jobs = compareBuckets(src, cat);
  const files = compareFileBuckets(
    src.map((s) => ({ bucket: s.bucket, files: s.count, fingerprint: s.fingerprint })),
    cat.map((s) => ({ bucket: s.bucket, files: s.count, fingerprint: s.fingerprint })),
  );
  assert.deepEqual(
    jobs.map((m) => [m.bucket, m.source, m.catalog, m.reason]),
    [
      ['2026-01-02', 2, 2, 'fingerprint'],
      ['2026-01-03', 0, 4, 'count'],
      ['2026-01-04', 5, 6, 'count'],
      ['none', 1, 0, 'count'],
    ],
  );
  const asJobReasons = { files: 'count', 'file fingerprint': 'fingerprint' } as const;
  assert.deepEqual(
    files.map((m) => [m.bucket, m.source, m.catalog, asJobReasons[m.reason]]),
    jobs.map((m) => [m.bucket, m.source, m.catalog, m.reason]),
  );
  // A bucket whose jobs have no file records on either side matches whatever its digests say.
  assert.deepEqual(
    compareBucketFigures([{ bucket: 'b', fingerprint: '0' }], [{ bucket: 'b', fingerprint: 'x' }], () => 0, {
      count: 'n',
      fingerprint: 'f',
    }),
    [],
  );
});
