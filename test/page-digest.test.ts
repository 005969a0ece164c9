/**
 * The page digest stream (lib/page/digest.ts), in process: the page's, each bucket's and each key
 * cell's figures of COPY text lines cut into chunks anywhere, against the same figures added up
 * line by line from the rows that made them; a line with too few fields fails the stream.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { RowDigestStream } from '../lib/page';
import type { RowDigest } from '../lib/page';
import { PAGE_COPY_COLUMNS } from '../lib/rows';
import type { PageCopyColumn } from '../lib/rows';
import { KNOWN_CODES } from '../lib/validate';

const TWO_64 = 1n << 64n;

/** A deterministic pseudo-random generator (mulberry32). */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Row {
  key: bigint;
  bucket: string | null;
  bytes: string | null;
  codes: (string | null)[];
  hash: bigint | null;
}

/** A page's COPY line, its fields in PAGE_COPY_COLUMNS order. */
function copyLine(r: Row): string {
  const v: Partial<Record<PageCopyColumn, string | null>> = {
    version_id: '7',
    page_no: '3',
    row_hash: r.hash === null ? null : String(r.hash),
    job_key: String(r.key),
    job_id: `job\\t${r.key}`,
    type: r.codes[0],
    level: r.codes[1],
    status: r.codes[2],
    bytes: r.bytes,
    bucket: r.bucket,
    comment: 'a comment with a\\ttab and a \\\\ backslash',
  };
  const fields = PAGE_COPY_COLUMNS.map((c) => (c in v ? v[c] : 'x'));
  return `${fields.map((f) => f ?? '\\N').join('\t')}\n`;
}

function rows(n: number, seed: number, unhashed = 0): Row[] {
  const rnd = random(seed);
  const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)];
  const out: Row[] = [];
  for (let i = 0; i < n; i++) {
    const sign = rnd() < 0.5 ? -1n : 1n;
    out.push({
      // Mostly ascending keys sharing cells, with negative keys and keys past 2^46 and 2^53.
      key: pick([
        1000n + BigInt(i),
        1000n + BigInt(i),
        1000n + BigInt(Math.floor(rnd() * 1e9)),
        -1n - BigInt(Math.floor(rnd() * 300)),
        (1n << 47n) + BigInt(i),
        (1n << 62n) + BigInt(Math.floor(rnd() * 200)),
      ]),
      bucket: pick([null, '2024-01-01', '2024-01-02', '2023-12-31', '2024-02-29']),
      bytes: pick([null, '0', '123456789012345678', String(Math.floor(rnd() * 1e12))]),
      codes: [pick(['B', 'B', 'Z', null]), pick(['F', 'I', 'q']), pick(['T', 'T', 'E', '?'])],
      hash: i < unhashed ? null : (sign * BigInt(Math.floor(rnd() * 2 ** 52)) * 2048n) % (1n << 63n),
    });
  }
  return out;
}

/** The figures expected of `rs`, added up row by row. */
function expected(rs: Row[]): RowDigest {
  const known = [KNOWN_CODES.type, KNOWN_CODES.level, KNOWN_CODES.status];
  const by = new Map<string | null, { jobs: number; h: bigint; b: bigint; lo: bigint; hi: bigint; u: number }>();
  const byCell = new Map<bigint, { jobs: number; keySum: bigint }>();
  let sum = 0n;
  for (const r of rs) {
    if (r.hash === null) continue;
    sum += r.hash;
    const cell = r.key / 64n;
    const c = byCell.get(cell) ?? { jobs: 0, keySum: 0n };
    byCell.set(cell, { jobs: c.jobs + 1, keySum: c.keySum + r.key });
    const a = by.get(r.bucket) ?? { jobs: 0, h: 0n, b: 0n, lo: r.key, hi: r.key, u: 0 };
    a.jobs++;
    a.h += r.hash;
    a.b += r.bytes === null ? 0n : BigInt(r.bytes);
    a.lo = r.key < a.lo ? r.key : a.lo;
    a.hi = r.key > a.hi ? r.key : a.hi;
    if (r.codes.some((c, i) => c !== null && !known[i].has(c))) a.u++;
    by.set(r.bucket, a);
  }
  const buckets = [...by.entries()]
    .sort(([x], [y]) => (x === y ? 0 : x === null ? -1 : y === null ? 1 : x < y ? -1 : 1))
    .map(([bucket, a]) => ({
      bucket,
      jobs: a.jobs,
      hashSum: String(a.h),
      bytes: String(a.b),
      minKey: String(a.lo),
      maxKey: String(a.hi),
      unknownCodes: a.u,
    }));
  return {
    rows: rs.length,
    unhashed: rs.filter((r) => r.hash === null).length,
    digest: String(((sum % TWO_64) + TWO_64) % TWO_64),
    buckets,
    cells: [...byCell.entries()]
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
      .map(([cell, c]) => ({ cell: String(cell), jobs: c.jobs, keySum: String(c.keySum) })),
  };
}

/** Streams `text` cut into chunks of random sizes (1 to `maxChunk` bytes) through a digest stream. */
async function digestOf(text: string, seed: number, maxChunk: number): Promise<RowDigest> {
  const rnd = random(seed);
  const bytes = Buffer.from(text, 'utf8');
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length;) {
    const n = 1 + Math.floor(rnd() * maxChunk);
    chunks.push(bytes.subarray(i, i + n));
    i += n;
  }
  const d = new RowDigestStream();
  const passed: Buffer[] = [];
  await pipeline(
    Readable.from(chunks),
    d,
    new Writable({
      write(chunk: Buffer, _enc, done) {
        passed.push(chunk);
        done();
      },
    }),
  );
  assert.equal(Buffer.concat(passed).toString('utf8'), text, 'the stream passes its bytes through unchanged');
  return d.result();
}

test('page and bucket figures of COPY lines cut anywhere equal the rows added up one by one', async () => {
  const rs = rows(3_000, 1);
  const text = rs.map(copyLine).join('');
  const want = expected(rs);
  assert.ok(want.buckets.length === 5 && want.buckets[0].bucket === null, 'five buckets, jobs without a start first');
  assert.ok(
    want.cells.some((c) => c.jobs > 20) && want.cells.some((c) => c.cell.startsWith('-')),
    'cells shared by many rows, and cells of negative keys',
  );
  assert.ok(
    want.buckets.every((b) => b.unknownCodes > 0 && b.unknownCodes < b.jobs),
    'some rows of each bucket carry an unknown code',
  );
  for (const [seed, maxChunk] of [
    [2, 7],
    [3, 300],
    [4, 65_536],
  ])
    assert.deepEqual(await digestOf(text, seed, maxChunk), want, `chunks of up to ${maxChunk} bytes`);
});

test('rows without a row hash are counted apart and left out of the figures', async () => {
  const rs = rows(200, 5, 3);
  const got = await digestOf(rs.map(copyLine).join(''), 6, 100);
  assert.equal(got.unhashed, 3);
  assert.deepEqual(got, expected(rs));
  assert.equal(
    got.buckets.reduce((n, b) => n + b.jobs, 0),
    197,
  );
});

test('a line with too few fields fails the stream, naming the count', async () => {
  await assert.rejects(
    digestOf('7\t3\t1\tx\n', 7, 4),
    /a page's COPY line has 4 fields, fewer than the 9 its figures read/,
  );
  // Cut after `row_hash`: the figures read it all; the catalog's COPY refuses the line.
  const full = copyLine({ key: 5n, bucket: '2026-12-05', bytes: '10', codes: ['B', 'F', 'T'], hash: 3n });
  const cut = `${full
    .split('\t')
    .slice(0, PAGE_COPY_COLUMNS.indexOf('row_hash') + 1)
    .join('\t')}\n`;
  assert.equal((await digestOf(cut, 7, 4)).rows, 1);
  assert.equal((await digestOf(cut, 7, 4)).digest, '3');
});
