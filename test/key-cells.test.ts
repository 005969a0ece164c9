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
import { cellCode, differingCells, KEY_CELL_WIDTH } from '../lib/refresh';
import { keyCells } from '../lib/sources/bareos-refresh';

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

/** The cell codes of `keys` (lib/refresh.ts `CellCode`), computed here from their jobs and key sums. */
function expectedCodes(keys: number[]) {
  return new Map(
    [...expected(keys)].map(([id, f]) => [
      id,
      cellCode(f.jobs, Number(f.keySum - BigInt(f.jobs) * KEY_CELL_WIDTH * BigInt(id))),
    ]),
  );
}

/** The jobs and key sums `version_cell` stores for `v`. */
async function storedCells(v: string) {
  const { rows } = await dbs.catalogPool.query<{ cell: string; jobs: string; s: string }>(
    `SELECT cell::text, jobs::text, key_sum::text AS s FROM version_cell WHERE version_id = $1`,
    [v],
  );
  return new Map(rows.map((r) => [r.cell, { jobs: Number(r.jobs), keySum: BigInt(r.s) }]));
}

const sorted = <T>(m: Map<string, T>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

const keyCellsFlag = async (v: string) =>
  (await dbs.catalogPool.query<{ k: boolean }>(`SELECT key_cells AS k FROM version WHERE version_id = $1`, [v])).rows[0]
    .k;

test("without stored cells, a version's cells are counted on its segments, superseded rows left out", async () => {
  assert.equal(await keyCellsFlag(refresh), false);
  const want = sorted(expectedCodes(refreshKeys));
  assert.ok(want.length > 90, `${want.length} cells`);
  assert.deepEqual(sorted(await versionCells(dbs.catalogPool, refresh)), want);
  // The base as its refresh left it: every row counts for the base (superseded after it).
  assert.deepEqual(sorted(await versionCells(dbs.catalogPool, base)), sorted(expectedCodes(baseKeys)));
});

test("a refresh's stored cells are its base's, less the rows it superseded, plus its own", async () => {
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), false, 'the base stored none');
  await storeVersionCellsFromTable(dbs.catalogPool, base);
  assert.equal(await keyCellsFlag(base), true);
  assert.deepEqual(sorted(await storedCells(base)), sorted(expected(baseKeys)));
  assert.deepEqual(sorted(await versionCells(dbs.catalogPool, base)), sorted(expectedCodes(baseKeys)));
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), true);
  // Twice: it replaces what it stored.
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), true);
  assert.equal(await keyCellsFlag(refresh), true);
  assert.deepEqual(sorted(await storedCells(refresh)), sorted(expected(refreshKeys)));
  assert.deepEqual(sorted(await versionCells(dbs.catalogPool, refresh)), sorted(expectedCodes(refreshKeys)));
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

test("the source's cell codes, from one pass over its job ids, equal the catalog's for the same keys", async () => {
  // The source side needs only the job ids (lib/sources/bareos-refresh.ts KEY_CELLS_SQL).
  await dbs.sourcePool.query(`CREATE TABLE job (jobid bigint PRIMARY KEY)`);
  const big = [2n ** 53n + 1n, 2n ** 53n + 64n, 2n ** 60n];
  await dbs.sourcePool.query(`INSERT INTO job SELECT unnest($1::bigint[])`, [[...refreshKeys, ...big.map(String)]]);
  const source = await keyCells(dbs.sourcePool, '6100', Number(KEY_CELL_WIDTH));
  assert.deepEqual(sorted(source), sorted(expectedCodes(refreshKeys)), 'keys above maxKey left out');
  assert.deepEqual(differingCells(source, await versionCells(dbs.catalogPool, refresh), [], KEY_CELL_WIDTH), []);
  const all = await keyCells(dbs.sourcePool, (2n ** 62n).toString(), Number(KEY_CELL_WIDTH));
  assert.deepEqual([...all.keys()].filter((c) => !source.has(c)).sort(), [
    '140737488355328',
    '140737488355329',
    '18014398509481984',
  ]);
  assert.deepEqual(
    differingCells(all, await versionCells(dbs.catalogPool, refresh), [], KEY_CELL_WIDTH).length,
    3,
    'the cells of the keys the version lacks differ',
  );
});
