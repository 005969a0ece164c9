/**
 * The narrowing of a refresh's deletion check (lib/refresh.ts): cells of 64 key values whose jobs or
 * key sums (as cell codes) differ between the source and the version, once new keys are counted in; their bounds,
 * negative keys included (PostgreSQL's division truncates toward zero).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { CellCode } from '../lib/refresh';
import { cellBounds, cellCode, differingCells, KEY_CELL_WIDTH } from '../lib/refresh';

/** Cells of `keys` as codes, as the source's and the catalog's SQL group them. */
function cells(keys: number[]): Map<string, CellCode> {
  const figures = new Map<string, { jobs: number; offsets: number }>();
  for (const k of keys) {
    const cell = BigInt(k) / KEY_CELL_WIDTH;
    const had = figures.get(`${cell}`) ?? { jobs: 0, offsets: 0 };
    figures.set(`${cell}`, { jobs: had.jobs + 1, offsets: had.offsets + Number(BigInt(k) - cell * KEY_CELL_WIDTH) });
  }
  return new Map([...figures].map(([id, f]) => [id, cellCode(f.jobs, f.offsets)]));
}

test('cells whose jobs differ are found: a deletion, a swap with equal counts, a new key; equal cells are not', () => {
  const version = Array.from({ length: 1200 }, (_, i) => 2 * (i + 1));
  // 10 deleted; in cell 10 (640..703) 700 left and 701 came (the same count, another key sum);
  // 2402 new (a candidate, counted in); 4001 in the source and not in the version (missing); -5
  // and 2400 (the top of the version) deleted.
  const source = version
    .filter((k) => k !== 10 && k !== 700 && k !== 2400)
    .concat([701, 2402, 4001])
    .filter((k) => k !== -5);
  const src = cells(source);
  const cat = cells([-5, ...version]);
  const got = differingCells(src, cat, ['2402'], KEY_CELL_WIDTH);
  assert.deepEqual(got, [
    { firstKey: '-63', lastKey: '63' },
    { firstKey: '640', lastKey: '703' },
    { firstKey: '2368', lastKey: '2431' },
    { firstKey: '3968', lastKey: '4031' },
  ]);
  assert.deepEqual(differingCells(cat, cat, [], KEY_CELL_WIDTH), [], 'nothing differs');
  assert.deepEqual(
    differingCells(cells([...version, 2402]), cells(version), ['2402'], KEY_CELL_WIDTH),
    [],
    'a new key counted in',
  );
});

test('cell bounds follow truncating division and stay inside the range', () => {
  const r = { firstKey: '-9223372036854775808', lastKey: '100' };
  assert.deepEqual(cellBounds(r, 0n, 64n), { firstKey: '-63', lastKey: '63' });
  assert.deepEqual(cellBounds(r, -1n, 64n), { firstKey: '-127', lastKey: '-64' });
  assert.deepEqual(cellBounds(r, 1n, 64n), { firstKey: '64', lastKey: '100' });
  assert.deepEqual(cellBounds({ firstKey: '70', lastKey: '1000' }, 1n, 64n), { firstKey: '70', lastKey: '127' });
});

test('a cell code tells equal figures from different ones: jobs, key sums, and a swap of keys', () => {
  // Every pair of keys of cell 0 and of cell -1 (offsets of the key's sign): equal codes, equal sums.
  for (const base of [0, -64]) {
    const keys = Array.from({ length: 64 }, (_, i) => (base < 0 ? -(i + 64) : i));
    const seen = new Map<CellCode, string>();
    for (let a = 0; a < 64; a++)
      for (let b = a + 1; b < 64; b++) {
        const set = [keys[a], keys[b]];
        const code = cells(set).values().next().value!;
        const sum = `${set.length}:${set[0] + set[1]}`;
        const before = seen.get(code);
        assert.ok(before === undefined || before === sum, `${set} shares code ${code} with another sum`);
        seen.set(code, sum);
      }
  }
  assert.notEqual(cellCode(2, 10), cellCode(2, 11));
  assert.notEqual(cellCode(2, 10), cellCode(3, 10));
  assert.ok(Number.isNaN(cellCode(1, 4096)), 'an offsets sum out of span has no code');
  assert.ok(Number.isNaN(cellCode(-1, 0)));
  // A cell without a code (NaN) always differs.
  const version = new Map([['5', NaN]]);
  assert.deepEqual(differingCells(new Map([['5', NaN]]), version, [], KEY_CELL_WIDTH), [
    { firstKey: '320', lastKey: '383' },
  ]);
});
