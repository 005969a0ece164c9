/**
 * restic's zero time: `restic rewrite --snapshot-summary` (restic 0.18) writes summary.backup_start
 * and backup_end as 0001-01-01T00:00:00Z. They are missing values: start and end fall back to the
 * snapshot's `time`, never the year 1. No services.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseListing, presentTime } from '../lib/sources/listing';

const snapshot = (summary: Record<string, unknown>) =>
  JSON.stringify({
    time: '2026-11-30T22:15:04.123456+01:00',
    tree: 'ab12',
    paths: ['/srv'],
    hostname: 'web-1',
    id: 'f'.repeat(64),
    short_id: 'ffffffff',
    program_version: 'restic 0.18.0',
    summary: { total_files_processed: 12, total_bytes_processed: 4096, ...summary },
  });

test('zero summary times of a rewritten snapshot fall back to the snapshot time', () => {
  const l = parseListing(
    'restic-json',
    Buffer.from(`[${snapshot({ backup_start: '0001-01-01T00:00:00Z', backup_end: '0001-01-01T00:00:00Z' })}]`),
    { source: 'r18' },
  );
  const r = l.records[0];
  assert.equal(r.rejectReason, null);
  assert.equal(r.startText, '2026-11-30T22:15:04.123456+01:00');
  assert.equal(r.endText, '2026-11-30T22:15:04.123456+01:00');
  assert.equal(r.files, '12');
});

test('a zero end beside a real start leaves the end missing; real summary times are kept', () => {
  const zeroEnd = parseListing(
    'restic-json',
    Buffer.from(`[${snapshot({ backup_start: '2026-11-30T22:15:00Z', backup_end: '0001-01-01T00:00:00Z' })}]`),
    { source: 'r18' },
  ).records[0];
  assert.equal(zeroEnd.startText, '2026-11-30T22:15:00.000000Z');
  assert.equal(zeroEnd.endText, null);
  const real = parseListing(
    'restic-json',
    Buffer.from(`[${snapshot({ backup_start: '2026-11-30T22:15:00Z', backup_end: '2026-11-30T22:16:30.5Z' })}]`),
    { source: 'r18' },
  ).records[0];
  assert.equal(real.startText, '2026-11-30T22:15:00.000000Z');
  assert.equal(real.endText, '2026-11-30T22:16:30.500000Z');
});

test('Go zero-time spellings are recognised, other early times are not', () => {
  for (const z of ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z', '0001-01-01T00:00:00+00:00'])
    assert.equal(presentTime(z), null, z);
  assert.equal(presentTime(undefined), null);
  assert.equal(presentTime('0001-01-01T00:00:01Z'), '0001-01-01T00:00:01Z');
  assert.equal(presentTime('1970-01-01T00:00:00Z'), '1970-01-01T00:00:00Z');
});
