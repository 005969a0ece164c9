/**
 * The catalog side of a refresh's deletion check (lib/catalog/version-ranges.ts `versionKeyCells`):
 * its two plans, one index scan per range and one scan of the table, give the same jobs and key sums
 * per cell as the keys the version holds, over a version of two segments with superseded rows, for
 * ranges given in any order, a cell split by a range's end, and the range below the first key.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { createVersionPartition, versionKeyCells } from '../lib/catalog';
import { cellScan } from '../activities/plan-refresh';
import { KEY_CELL_WIDTH } from '../lib/refresh';

let dbs: TestDatabases;
let base: string;
let refresh: string;

/** A version of catalog `c` whose segments are `segments` plus its own. */
async function version(c: string, segments: string[]): Promise<string> {
  const { rows } = await dbs.catalogPool.query<{ id: string }>(
    `INSERT INTO version (catalog_name, source_name, status, workflow_id, first_run_id, page_size)
     VALUES ($1, 'src', 'building', 'catalog-rebuild/' || $1, $1 || now()::text, 100) RETURNING version_id::text AS id`,
    [c],
  );
  const v = rows[0].id;
  await dbs.catalogPool.query(`UPDATE version SET segment_ids = $2::bigint[] || version_id WHERE version_id = $1`, [
    v,
    segments,
  ]);
  await createVersionPartition(dbs.catalogPool, v);
  return v;
}

/** Inserts jobs `keys` into version `v`'s own segment. */
async function jobs(v: string, keys: number[]): Promise<void> {
  await dbs.catalogPool.query(
    `INSERT INTO job (version_id, job_key, job_id, page_no, start_time)
     SELECT $1, k, k::text, 1, '2026-12-01T00:00:00Z' FROM unnest($2::bigint[]) k`,
    [v, keys],
  );
}

/** The base's keys: 1..6000 but multiples of 7. */
const baseKeys = Array.from({ length: 6000 }, (_, i) => i + 1).filter((k) => k % 7 !== 0);
/** The refresh deletes multiples of 11 up to 3000, rewrites multiples of 13, and adds 6001..6100. */
const deleted = baseKeys.filter((k) => k % 11 === 0 && k <= 3000);
const rewritten = baseKeys.filter((k) => k % 13 === 0 && !deleted.includes(k));
const added = Array.from({ length: 100 }, (_, i) => 6001 + i);
const refreshKeys = baseKeys.filter((k) => !deleted.includes(k)).concat(added);

before(async () => {
  dbs = await testDatabases('cellscan');
  base = await version('cells', []);
  await jobs(base, baseKeys);
  refresh = await version('cells', [base]);
  await jobs(refresh, [...rewritten, ...added]);
  await dbs.catalogPool.query(
    `UPDATE job SET superseded_by = $2 WHERE version_id = $1 AND job_key = ANY ($3::bigint[])`,
    [base, refresh, [...deleted, ...rewritten]],
  );
});

after(async () => {
  await dbs?.drop();
});

/** Jobs and key sums per `<range index from 1>:<cell>` of `keys` in `ranges`, computed here. */
function expected(ranges: { firstKey: string; lastKey: string }[], keys: number[]) {
  const out = new Map<string, { jobs: number; keySum: bigint }>();
  for (const k of keys) {
    const i = ranges.findIndex((r) => BigInt(r.firstKey) <= BigInt(k) && BigInt(k) <= BigInt(r.lastKey));
    if (i < 0) continue;
    const id = `${i + 1}:${BigInt(k) / KEY_CELL_WIDTH}`;
    const had = out.get(id) ?? { jobs: 0, keySum: 0n };
    out.set(id, { jobs: had.jobs + 1, keySum: had.keySum + BigInt(k) });
  }
  return out;
}

const sorted = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

test('per-range and table scans count the same cells as the version holds, superseded rows left out', async () => {
  // Not in key order; 100..1000 ends inside a cell (960..1023); the first reaches below every key.
  const ranges = [
    { firstKey: '2001', lastKey: '2999' },
    { firstKey: '-9223372036854775808', lastKey: '99' },
    { firstKey: '100', lastKey: '1000' },
    { firstKey: '5500', lastKey: '6100' },
  ];
  const width = Number(KEY_CELL_WIDTH);
  for (const [v, keys] of [
    [base, baseKeys],
    [refresh, refreshKeys],
  ] as const) {
    const want = sorted(expected(ranges, keys));
    assert.ok(want.length > 40, `${want.length} cells`);
    for (const scan of ['ranges', 'table'] as const) {
      const got = await versionKeyCells(dbs.catalogPool, v, ranges, width, scan);
      assert.deepEqual(sorted(got), want, `version ${v}, ${scan} scan`);
    }
  }
  // The base as its refresh left it: every row counts for the base (superseded after it).
  assert.equal(
    [...(await versionKeyCells(dbs.catalogPool, base, [{ firstKey: '1', lastKey: '6000' }], width, 'table')).values()]
      .map((c) => c.jobs)
      .reduce((a, b) => a + b, 0),
    baseKeys.length,
  );
});

test('the table is scanned once the disagreeing ranges are a quarter of them', () => {
  assert.equal(cellScan(1, 100), 'ranges');
  assert.equal(cellScan(24, 100), 'ranges');
  assert.equal(cellScan(25, 100), 'table');
  assert.equal(cellScan(5000, 5000), 'table');
});
