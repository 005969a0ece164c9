/**
 * The narrowing of a refresh's deletion check (lib/refresh.ts): cells of 64 key values whose jobs or
 * key sums differ between the source and the version, once new keys are counted in; their bounds,
 * negative keys included (PostgreSQL's division truncates toward zero).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { CellFigures } from '../lib/refresh';
import { cellBounds, differingCells, KEY_CELL_WIDTH } from '../lib/refresh';

/** Cells of `keys`, as the source's and the catalog's SQL group them. */
function cells(keys: number[]): Map<string, CellFigures> {
  const out = new Map<string, CellFigures>();
  for (const k of keys) {
    const id = `${BigInt(k) / KEY_CELL_WIDTH}`;
    const had = out.get(id) ?? { jobs: 0, keySum: 0n };
    out.set(id, { jobs: had.jobs + 1, keySum: had.keySum + BigInt(k) });
  }
  return out;
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
