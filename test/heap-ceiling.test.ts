/**
 * The worker's heap ceiling (worker/heap-ceiling.ts), in process: the used heap is a scripted
 * number and the collection a counter, and Node's timers are held still and ticked by hand, so
 * every reading is exact and nothing waits. The last test runs the real V8 collection once.
 */
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import { heapCeilingBytes, startHeapCeiling } from '../worker/heap-ceiling';

const MB = 1024 * 1024;

test('a full collection runs once the used heap grew by the ceiling since the lowest reading after the last one', () => {
  mock.timers.enable({ apis: ['setInterval'] });
  try {
    let used = 40 * MB;
    const collections: { before: number; after: number }[] = [];
    const stop = startHeapCeiling(
      { growthBytes: 32 * MB, everyMs: 1_000, onCollect: (before, after) => collections.push({ before, after }) },
      {
        usedHeap: () => used,
        // A collection leaves the live heap: 38 MB.
        collect: () => {
          used = 38 * MB;
        },
      },
    );
    const tick = (mb: number) => {
      used = mb * MB;
      mock.timers.tick(1_000);
    };
    tick(60);
    tick(71);
    assert.equal(collections.length, 0, 'grown by 31 MB: no collection');
    tick(30); // V8 collected on its own: the base follows the heap down
    tick(61);
    assert.equal(collections.length, 0, 'grown by 31 MB since the lowest reading');
    tick(62);
    assert.deepEqual(collections, [{ before: 62 * MB, after: 38 * MB }], 'grown by 32 MB: one collection');
    tick(69);
    assert.equal(collections.length, 1, 'the base is the heap after the collection');
    tick(70);
    assert.equal(collections.length, 2);
    stop();
    tick(500);
    assert.equal(collections.length, 2, 'stopped: no more readings');
  } finally {
    mock.timers.reset();
  }
});

test("the default collection is V8's own: it frees what nothing references any more", () => {
  mock.timers.enable({ apis: ['setInterval'] });
  try {
    const readings: number[] = [];
    const stop = startHeapCeiling(
      { growthBytes: 8 * MB, everyMs: 10, onCollect: (before, after) => readings.push(before, after) },
      { usedHeap: () => process.memoryUsage().heapUsed },
    );
    // About 16 MB of doubles, referenced while they are allocated, then by nothing.
    let garbage: number[][] | null = Array.from({ length: 200 }, () => new Array<number>(10_000).fill(1.5));
    assert.equal(garbage.length, 200);
    garbage = null;
    mock.timers.tick(10);
    stop();
    assert.equal(garbage, null);
    assert.equal(readings.length, 2, 'one collection');
    const freed = readings[0] - readings[1];
    assert.ok(freed > 10 * MB, `the collection freed ${(freed / MB).toFixed(1)} MB`);
  } finally {
    mock.timers.reset();
  }
});

test('CATALOG_REBUILD_HEAP_CEILING_MB: MiB, 0 for none, 32 unset; anything else is refused by name', () => {
  assert.equal(heapCeilingBytes({}), 32 * MB);
  assert.equal(heapCeilingBytes({ CATALOG_REBUILD_HEAP_CEILING_MB: '' }), 32 * MB);
  assert.equal(heapCeilingBytes({ CATALOG_REBUILD_HEAP_CEILING_MB: '64' }), 64 * MB);
  assert.equal(heapCeilingBytes({ CATALOG_REBUILD_HEAP_CEILING_MB: '0' }), 0);
  for (const bad of ['-1', '1.5', 'lots', '32MB'])
    assert.throws(
      () => heapCeilingBytes({ CATALOG_REBUILD_HEAP_CEILING_MB: bad }),
      /CATALOG_REBUILD_HEAP_CEILING_MB must be a whole number of MiB/,
    );
});
