/**
 * A refresh's deletion check (lib/catalog/key-cells.ts): a version's jobs and key sums per cell,
 * counted on its table or stored (a refresh's from its base's and its changes), equal the cells of
 * the keys the version holds, over a version of two segments with superseded rows, deletions that
 * empty whole cells included; the source's cells, streamed into the catalog, are compared there,
 * and exactly the cells whose jobs differ come back: a deletion, a swap with equal counts, a new key
 * counted in, a cell without a code.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Writable } from 'node:stream';
import {
  createVersionPartition,
  differingCellsOfSource,
  refreshRangeCounts,
  sourceKeyDifferences,
  stageSourceCells,
  stageSourceKeys,
  storeRefreshVersionCells,
  storeVersionCellsFromTable,
} from '../lib/catalog';
import { withLongSession } from '../lib/db';
import { cellCodeSql, KEY_CELL_WIDTH } from '../lib/refresh';
import { copyKeyCells, copyKeysInRanges } from '../lib/sources/bareos-refresh';

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

/** A cell's code as lib/refresh.ts `cellCodeSql` packs it: null out of span. */
const cellCode = (jobs: number, offsets: number): number | null =>
  Math.abs(offsets) < 4096 ? jobs * 8192 + offsets + 4096 : null;

/** The cell codes of `keys`, computed here from their jobs and key sums. */
function expectedCodes(keys: number[]) {
  return new Map(
    [...expected(keys)].map(([id, f]) => [
      id,
      cellCode(f.jobs, Number(f.keySum - BigInt(f.jobs) * KEY_CELL_WIDTH * BigInt(id))),
    ]),
  );
}

/**
 * The cells that differ between version `v` and a source whose cells `fill` streams (COPY text of
 * cell and code), `added` counted in: as a refresh's detection stages and compares them.
 */
function differing(v: string, fill: (into: Writable) => Promise<void>, added: string[] = []): Promise<string[]> {
  return withLongSession(dbs.catalogPool, async (c) => {
    await stageSourceCells(c, fill);
    return differingCellsOfSource(c, v, added);
  });
}

/** A source holding exactly `keys`, as COPY text of its cells and codes. */
const sourceOf =
  (keys: number[], codes: Map<string, number | null> = expectedCodes(keys)) =>
  (into: Writable) =>
    pipeline(Readable.from([...codes].map(([cell, code]) => `${cell}\t${code ?? '\\N'}\n`)), into);

/** The cells where the cells of `a` and of `b` differ, ascending, computed here. */
function cellsBetween(a: number[], b: number[]): string[] {
  const x = expectedCodes(a);
  const y = expectedCodes(b);
  const ids = new Set([...x.keys(), ...y.keys()]);
  return [...ids].filter((id) => x.get(id) !== y.get(id)).sort((p, q) => Number(BigInt(p) - BigInt(q)));
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
  assert.ok(expectedCodes(refreshKeys).size > 90, `${expectedCodes(refreshKeys).size} cells`);
  assert.deepEqual(await differing(refresh, sourceOf(refreshKeys)), []);
  // The base as its refresh left it: every row counts for the base (superseded after it).
  assert.deepEqual(await differing(base, sourceOf(baseKeys)), []);
  const changed = cellsBetween(baseKeys, refreshKeys);
  assert.ok(changed.length > 40, `${changed.length} cells differ`);
  assert.deepEqual(await differing(refresh, sourceOf(baseKeys)), changed);
});

test("a refresh's stored cells are its base's, less the rows it superseded, plus its own", async () => {
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), false, 'the base stored none');
  await storeVersionCellsFromTable(dbs.catalogPool, base);
  assert.equal(await keyCellsFlag(base), true);
  assert.deepEqual(sorted(await storedCells(base)), sorted(expected(baseKeys)));
  assert.deepEqual(await differing(base, sourceOf(baseKeys)), []);
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), true);
  // Twice: it replaces what it stored.
  assert.equal(await storeRefreshVersionCells(dbs.catalogPool, refresh, base), true);
  assert.equal(await keyCellsFlag(refresh), true);
  assert.deepEqual(sorted(await storedCells(refresh)), sorted(expected(refreshKeys)));
  assert.deepEqual(await differing(refresh, sourceOf(refreshKeys)), []);
  assert.deepEqual(await differing(refresh, sourceOf(baseKeys)), cellsBetween(baseKeys, refreshKeys));
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

/** Keys above 2^53 the source holds besides `refreshKeys`. */
const big = [2n ** 53n + 1n, 2n ** 53n + 64n, 2n ** 60n];

/** The source's `job` table: `refreshKeys` and `big` (it needs only the job ids, lib/sources/bareos-refresh.ts). */
async function sourceJobs(): Promise<void> {
  await dbs.sourcePool.query(`CREATE TABLE IF NOT EXISTS job (jobid bigint PRIMARY KEY)`);
  await dbs.sourcePool.query(`INSERT INTO job SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING`, [
    [...refreshKeys, ...big.map(String)],
  ]);
}

test("the source's cell codes, from one pass over its job ids, equal the catalog's for the same keys", async () => {
  await sourceJobs();
  const width = Number(KEY_CELL_WIDTH);
  assert.deepEqual(await differing(refresh, (into) => copyKeyCells(dbs.sourcePool, '6100', width, into)), []);
  const all = (into: Writable) => copyKeyCells(dbs.sourcePool, (2n ** 62n).toString(), width, into);
  assert.deepEqual(
    await differing(refresh, all),
    ['140737488355328', '140737488355329', '18014398509481984'],
    'the cells of the keys the version lacks differ',
  );
  // Those keys counted in as new: nothing differs.
  assert.deepEqual(await differing(refresh, all, big.map(String)), []);
  await assert.rejects(copyKeyCells(dbs.sourcePool, '1; DROP TABLE job', width, process.stdout), /not a job id/);
});

test("the keys of differing cells: the version's the source lost, the source's the version lacks but for candidates", async () => {
  await sourceJobs();
  const ranges = [
    { firstKey: '1', lastKey: '3000' },
    { firstKey: '3001', lastKey: '6100' },
  ];
  const candidates = Array.from({ length: 50 }, (_, i) => String(6001 + i));
  const got = await withLongSession(dbs.catalogPool, async (c) => {
    // Two COPYs add to the same staged keys, as the detection's rounds do.
    for (const r of ranges) await stageSourceKeys(c, (into) => copyKeysInRanges(dbs.sourcePool, '6100', [r], into));
    return sourceKeyDifferences(c, base, ranges, candidates);
  });
  assert.deepEqual(got.deletedKeys, deleted.map(String), 'ascending, every deletion');
  assert.deepEqual(got.missing, added.filter((k) => k > 6050).map(String), 'the new keys that are not candidates');
  const none = await withLongSession(dbs.catalogPool, async (c) => {
    await stageSourceKeys(c, (into) => copyKeysInRanges(dbs.sourcePool, '6100', ranges, into));
    return sourceKeyDifferences(c, refresh, ranges, []);
  });
  assert.deepEqual(none, { deletedKeys: [], missing: [] }, 'the refresh holds what the source holds');
  await assert.rejects(
    copyKeysInRanges(dbs.sourcePool, '6100', [{ firstKey: '1)', lastKey: '2' }], process.stdout),
    /not a job id/,
  );
});

test('a source that fails before its COPY starts fails the staging, and the catalog session with it, nothing else', async () => {
  for (const stage of [stageSourceCells, stageSourceKeys])
    await assert.rejects(
      withLongSession(dbs.catalogPool, (c) => stage(c, () => Promise.reject(new Error('source unreachable')))),
      /source unreachable/,
    );
  await assert.rejects(
    withLongSession(dbs.catalogPool, (c) =>
      stageSourceCells(c, (into) => copyKeyCells(dbs.sourcePool, 'not a key', 64, into)),
    ),
    /not a key/,
  );
  // The pool still serves: the failed sessions were discarded, and no stream error went unobserved.
  assert.equal((await dbs.catalogPool.query<{ n: number }>('SELECT 1 AS n')).rows[0].n, 1);
});

test('cells whose jobs differ are found: a deletion, a swap with equal counts, a new key; equal cells are not', async () => {
  const v = await version('swap', []);
  const kept = Array.from({ length: 1200 }, (_, i) => 2 * (i + 1));
  await jobs(v, [-5, ...kept]);
  // 10 deleted; in cell 10 (640..703) 700 left and 701 came (the same count, another key sum);
  // 2402 new (a candidate, counted in); 4001 in the source and not in the version (missing); -5
  // and 2400 (the top of the version) deleted.
  const source = kept.filter((k) => k !== 10 && k !== 700 && k !== 2400).concat([701, 2402, 4001]);
  assert.deepEqual(await differing(v, sourceOf(source), ['2402']), ['0', '10', '37', '62']);
  assert.deepEqual(await differing(v, sourceOf([-5, ...kept])), [], 'nothing differs');
  assert.deepEqual(await differing(v, sourceOf([-5, ...kept, 2402]), ['2402']), [], 'a new key counted in');
  assert.deepEqual(await differing(v, sourceOf([-5, ...kept, 2402])), ['37'], 'a key the version lacks');
  // A cell without a code (offsets out of span) always differs.
  const codes = expectedCodes([-5, ...kept]);
  codes.set('5', null);
  assert.deepEqual(await differing(v, sourceOf([], codes)), ['5']);
  // The same from the stored cells, and with keys near 2^62 (a cell's key sum passes 2^63).
  await storeVersionCellsFromTable(dbs.catalogPool, v);
  assert.deepEqual(await differing(v, sourceOf(source), ['2402']), ['0', '10', '37', '62']);
  const high = await version('high', []);
  const near = [2n ** 62n, 2n ** 62n + 1n, 2n ** 62n + 63n];
  await dbs.catalogPool.query(
    `INSERT INTO job (version_id, job_key, job_id, page_no, start_time)
     SELECT $1, k, k::text, 1, '2026-12-01T00:00:00Z' FROM unnest($2::bigint[]) k`,
    [high, near.map(String)],
  );
  await storeVersionCellsFromTable(dbs.catalogPool, high);
  const cell = (2n ** 62n / KEY_CELL_WIDTH).toString();
  const nearCodes = new Map([[cell, cellCode(3, 0 + 1 + 63)]]);
  assert.deepEqual(await differing(high, sourceOf([], nearCodes)), []);
  assert.deepEqual(await differing(high, sourceOf([], new Map([[cell, cellCode(3, 0 + 1 + 62)]]))), [cell]);
});

test('a cell code tells equal figures from different ones: every pair of keys of cell 0 and of cell -1', async () => {
  // Offsets of the key's sign: cell 0 holds -63..63, cell -1 -127..-64.
  const { rows } = await dbs.catalogPool.query<{ a: string; b: string; code: number }>(
    `SELECT a::text, b::text, (${cellCodeSql('2', '(a - a / 64 * 64) + (b - b / 64 * 64)')})::int AS code
     FROM generate_series(-127, 63) a, generate_series(-127, 63) b
     WHERE a < b AND a / 64 = b / 64`,
  );
  assert.equal(rows.length, (127 * 126) / 2 + (64 * 63) / 2, 'pairs of cell 0 (-63..63) and of cell -1');
  // Codes are compared cell by cell (the source's and the version's of one cell).
  const sumOf = new Map<string, number>();
  for (const r of rows) {
    const sum = Number(r.a) + Number(r.b);
    const id = `${Math.trunc(Number(r.a) / 64)}:${r.code}`;
    assert.equal(sumOf.get(id) ?? sum, sum, `${r.a}, ${r.b} share code ${r.code} with another sum`);
    sumOf.set(id, sum);
  }
  const one = async (n: number, o: number) =>
    (await dbs.catalogPool.query<{ c: number | null }>(`SELECT (${cellCodeSql(String(n), String(o))})::int AS c`))
      .rows[0].c;
  assert.notEqual(await one(2, 10), await one(2, 11));
  assert.notEqual(await one(2, 10), await one(3, 10));
  assert.equal(await one(1, 4096), null, 'an offsets sum out of span has no code');
  assert.equal(await one(1, 4095), cellCode(1, 4095));
});
