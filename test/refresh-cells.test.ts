/**
 * The key bounds of a refresh's differing cells (lib/refresh.ts), negative keys included
 * (PostgreSQL's division truncates toward zero). Which cells differ: test/key-cells.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cellBounds, cellKeyBounds, KEY_CELL_WIDTH } from '../lib/refresh';

test('cell bounds follow truncating division and stay inside the range', () => {
  const r = { firstKey: '-9223372036854775808', lastKey: '100' };
  assert.deepEqual(cellBounds(r, 0n, 64n), { firstKey: '-63', lastKey: '63' });
  assert.deepEqual(cellBounds(r, -1n, 64n), { firstKey: '-127', lastKey: '-64' });
  assert.deepEqual(cellBounds(r, 1n, 64n), { firstKey: '64', lastKey: '100' });
  assert.deepEqual(cellBounds({ firstKey: '70', lastKey: '1000' }, 1n, 64n), { firstKey: '70', lastKey: '127' });
  assert.deepEqual(cellKeyBounds(['-1', '0', '37'], KEY_CELL_WIDTH), [
    { firstKey: '-127', lastKey: '-64' },
    { firstKey: '-63', lastKey: '63' },
    { firstKey: '2368', lastKey: '2431' },
  ]);
});
