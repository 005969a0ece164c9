/**
 * The catalog side of a refresh's deletion check (lib/catalog/key-cells.ts): a version's jobs and
 * key sums per cell, counted on its table or stored (a refresh's from its base's and its changes),
 * equal the cells of the keys the version holds, over a version of two segments with superseded
 * rows, deletions that empty whole cells included.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import {
  createVersionPartition,
  refreshRangeCounts,
  storeRefreshVersionCells,
  storeVersionCellsFromTable,
  versionCells,
} from '../lib/catalog';
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
/**
 * The refresh deletes multiples of 11 up to 3000 and every key of cell 50 (3200..3263), rewrites
 * multiples of 13, and adds 6001..6100.
 */
const deleted = baseKeys.filter((k) => (k % 11 === 0 && k <= 3000) || (k >= 3200 && k <= 3263));
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

/** Jobs and key sums per cell of `keys`, computed here. */
function expected(keys: number[]) {
  const out = new Map<string, { jobs: number; keySum: bigint }>();
  for (const k of keys) {
    const id = `${BigInt(k) / KEY_CELL_WIDTH}`;
    const had = out.get(id) ?? { jobs: 0, keySum: 0n };
    out.set(id, { jobs: had.jobs + 1, keySum: had.keySum + BigInt(k) });
  }
  return out;
}

const sorted = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

const keyCellsFlag = async (v: string) =>
  (await dbs.catalogPool.query<{ k: boolean }>(`SELECT key_cells AS k FROM version WHERE version_id = $1`, [v])).rows[0]
    .k;

test("without stored cells, a version's cells are counted on its segments, superseded rows left out", async () => {
  assert.equal(await keyCellsFlag(refresh), false);
  const want = sorted(expected(refreshKeys));
  assert.ok(want.length > 90, `${want.length} cells`);
  assert.deepEqual(sorted(await versionCells(dbs.catalogPool, refresh)), want);
  // The base as its refresh left it: every row counts for the base (superseded after it).
  assert.deepEqual(sorted(await versionCells(dbs.catalogPool, base)), sorted(expected(baseKeys)));
});

test("a refresh's stored cells are its base's, less the rows it superseded, plus its own", async () => {
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), false, 'the base stored none');
  await storeVersionCellsFromTable(dbs.catalogPool, base);
  assert.equal(await keyCellsFlag(base), true);
  assert.deepEqual(sorted(await versionCells(dbs.catalogPool, base)), sorted(expected(baseKeys)));
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), true);
  // Twice: it replaces what it stored.
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), true);
  assert.equal(await keyCellsFlag(refresh), true);
  assert.deepEqual(sorted(await versionCells(dbs.catalogPool, refresh)), sorted(expected(refreshKeys)));
  const { rows } = await dbs.catalogPool.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM version_cell WHERE version_id = $1 AND jobs <= 0`,
    [refresh],
  );
  assert.equal(rows[0].n, '0', 'cells emptied by deletions are not stored');
});

test("a refresh's jobs per key range are its base's, less the rows it superseded, plus its own", async () => {
  const range = (rangeNo: number, firstKey: number, lastKey: number, keys: number[]) => ({
    rangeNo,
    firstKey: String(firstKey),
    lastKey: String(lastKey),
    jobs: keys.filter((k) => k >= firstKey && k <= lastKey).length,
    digest: '',
  });
  const baseRanges = [range(1, 1, 1999, baseKeys), range(2, 2000, 3999, baseKeys), range(3, 4000, 6000, baseKeys)];
  // As the refresh's plan stores them: the base's, then one above the base's watermark.
  const planned = [...baseRanges, { ...range(4, 6001, 6100, []), jobs: 0 }];
  const want = [
    range(1, 1, 1999, refreshKeys),
    range(2, 2000, 3999, refreshKeys),
    range(3, 4000, 6000, refreshKeys),
    range(4, 6001, 6100, refreshKeys),
  ];
  // The deletions fall in ranges 1 and 2, the new jobs in range 4; range 3 only rewrote rows.
  assert.deepEqual(
    want.map((r, i) => r.jobs - (baseRanges[i]?.jobs ?? 0)),
    [-deleted.filter((k) => k < 2000).length, -deleted.filter((k) => k >= 2000).length, 0, 100],
  );
  assert.deepEqual(await refreshRangeCounts(dbs.catalogPool, refresh, planned, baseRanges), want);
});
