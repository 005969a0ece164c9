/**
 * The page sizing rule (lib/page-sizing.ts), the dense pages of a staged listing, the stored last
 * keys of a plan, a page's start-to-close from the plan's largest page, and how the receipt names
 * the page size: pure functions.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { autoPageSize, describePageSize, PAGE_SIZING, sizingRowsThatMatter } from '../lib/page-sizing';
import { pageLastKeys } from '../activities/plan-rebuild';
import { pageStatementTimeoutMs } from '../lib/page-cost';
import { startToCloseMs } from '../workflows/activity-options';
import { formatReceipt } from '../client/receipt';

const MiB = 1024 * 1024;

test('auto sizing: about 16 MiB of row text per page on a large source', () => {
  assert.deepEqual(autoPageSize({ rows: 100_000_000, avgRowBytes: 256, concurrency: 4 }), {
    rowsPerPage: (16 * MiB) / 256,
    limitedBy: 'bytes',
  });
  assert.equal(autoPageSize({ rows: 100_000_000, avgRowBytes: 300, concurrency: 4 }).rowsPerPage, 55_924);
});

test('auto sizing: wide rows still make pages of 15,000 rows (at most 10 completions/s at 150,000 rows/s)', () => {
  assert.deepEqual(autoPageSize({ rows: 10_000_000, avgRowBytes: 4_000, concurrency: 4 }), {
    rowsPerPage: 15_000,
    limitedBy: 'completions',
  });
});

test('auto sizing: a small source gets 4 pages per page in flight, never below 1,000 rows', () => {
  assert.deepEqual(autoPageSize({ rows: 1_000_000, avgRowBytes: 250, concurrency: 4 }), {
    rowsPerPage: 62_500,
    limitedBy: 'cores',
  });
  assert.deepEqual(autoPageSize({ rows: 100_000, avgRowBytes: 250, concurrency: 8 }), {
    rowsPerPage: 3_125,
    limitedBy: 'cores',
  });
  assert.deepEqual(autoPageSize({ rows: 1_200, avgRowBytes: 250, concurrency: 4 }), {
    rowsPerPage: 1_000,
    limitedBy: 'minimum',
  });
  assert.deepEqual(autoPageSize({ rows: 0, avgRowBytes: null, concurrency: 4 }), {
    rowsPerPage: 1_000,
    limitedBy: 'minimum',
  });
});

test('auto sizing: narrow rows are capped at 100,000 rows per page', () => {
  assert.deepEqual(autoPageSize({ rows: 100_000_000, avgRowBytes: 20, concurrency: 4 }), {
    rowsPerPage: 100_000,
    limitedBy: 'maximum',
  });
});

test('auto sizing: always within bounds; counting beyond sizingRowsThatMatter changes nothing', () => {
  for (const rows of [0, 1, 999, 5_000, 123_456, 2_000_000, 10 ** 9]) {
    for (const avgRowBytes of [null, 1, 64, 250, 1_000, 100_000]) {
      for (const concurrency of [1, 4, 64]) {
        const m = { rows, avgRowBytes, concurrency };
        const { rowsPerPage } = autoPageSize(m);
        assert.ok(rowsPerPage >= PAGE_SIZING.minRows && rowsPerPage <= PAGE_SIZING.maxRows, JSON.stringify(m));
        assert.ok(Number.isInteger(rowsPerPage));
        const capped = Math.min(rows, sizingRowsThatMatter(concurrency));
        assert.equal(autoPageSize({ ...m, rows: capped }).rowsPerPage, rowsPerPage, JSON.stringify(m));
      }
    }
  }
});

test('auto sizing is described in words', () => {
  const m = { rows: 100_000_000, avgRowBytes: 256, concurrency: 4 };
  assert.equal(describePageSize(autoPageSize(m), m), 'about 16 MiB of row text per page at 256 bytes a row');
  const small = { rows: 1_000_000, avgRowBytes: 250, concurrency: 4 };
  assert.equal(describePageSize(autoPageSize(small), small), '4 pages per page in flight (4) over 1,000,000 rows');
});

test('stored pages cover every key from the first page to the watermark', () => {
  assert.deepEqual(pageLastKeys(['5', '100000005', '200000001'], '200000900'), ['100000004', '200000000', '200000900']);
});

test("a page's start-to-close: 10 × p99 of recent pages, at least 5 minutes and 2 ms per row of the largest planned page", () => {
  assert.equal(startToCloseMs([]), 300_000);
  assert.equal(startToCloseMs([1_000, 2_000]), 300_000);
  assert.equal(startToCloseMs([40_000]), 400_000);
  // A job of 2,000,000 files is a page of its own: its statements may take 30 s + 2,000 s.
  assert.equal(startToCloseMs([1_000], 2_000_001), 4_000_002);
  assert.ok(startToCloseMs([1_000], 2_000_001) > pageStatementTimeoutMs(2_000_001));
  assert.equal(startToCloseMs([1_000], 100_000), 300_000);
});

test('the receipt of a plan with files says its pages hold jobs and their files', () => {
  const r = {
    catalog: 'main',
    workflowId: 'catalog-rebuild/main',
    taskQueue: 'q',
    attached: false,
    files: true,
    planned: true,
    versionId: '3',
    pagesTotal: 4,
    pageSize: 100_000,
    pageSizing: 'auto' as const,
    refresh: false,
    requestedPageSize: null,
    baseVersionId: null,
    refreshNote: null,
    sourceRows: 20_000,
    watermark: { jobKey: '20000', time: '2026-11-01T20:00:00.000000Z' },
    answeredBy: 'database' as const,
  };
  assert.equal(
    formatReceipt(r, 0)[1],
    '  pages: 4 (about 100000 rows (jobs and their files) per page, sized by the plan from measured cost)',
  );
  assert.equal(
    formatReceipt({ ...r, pageSize: 500, pageSizing: 'fixed', requestedPageSize: 500 }, 0)[1],
    '  pages: 4 (500 jobs per page, fixed by --page-size)',
  );
  // A refresh plan (its version row names a base version) fixes its own page size, with or without
  // --page-size, even one equal to it; a refresh that fell back to a full rebuild honours --page-size.
  const refresh = { ...r, files: false, refresh: true, pageSize: 2000, pageSizing: 'fixed' as const };
  for (const requestedPageSize of [null, 500, 2000])
    assert.equal(
      formatReceipt({ ...refresh, baseVersionId: '2', requestedPageSize }, 0)[1],
      "  pages: 4 (at most 2000 changed jobs per page, a refresh's fixed size)",
    );
  assert.equal(
    formatReceipt({ ...refresh, pageSize: 2000, requestedPageSize: 2000 }, 0)[1],
    '  pages: 4 (2000 jobs per page, fixed by --page-size)',
  );
  // Only the progress query answered: a --refresh whose page size is not the one asked for.
  const queried = { ...refresh, answeredBy: 'workflow' as const };
  assert.match(formatReceipt({ ...queried, requestedPageSize: null }, 0)[1], /a refresh's fixed size/);
  assert.match(formatReceipt({ ...queried, requestedPageSize: 2000 }, 0)[1], /fixed by --page-size/);
});
