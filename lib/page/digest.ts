/**
 * The digest of the rows a page writes, taken from its COPY stream as it passes through the
 * worker, with no read-back of the written rows:
 * - the page's: the number of rows and the sum modulo 2^64 of their `row_hash` (a field of each
 *   COPY text line, computed by the source; `\N` when the source gives none), stored in
 *   the page's ledger row (`checksum`): the catalog side of the page's key range for the next
 *   refresh's change detection;
 * - per dated bucket (`page_bucket`, migration 016): jobs, row-hash sum, bytes, first and last
 *   job key, jobs with an unknown code: the catalog side of the first reconciliation round;
 * - per cell of {@link KEY_CELL_WIDTH} job keys (`page_cell`, migration 017): jobs and the sum of
 *   their keys, the catalog side of the next refresh's search for deleted jobs.
 */
import { Transform } from 'node:stream';
import type { TransformCallback } from 'node:stream';
import type { StoredBucketFigures } from '../catalog/bucket-figures';
import type { StoredCellFigures } from '../catalog/key-cells';
import { KEY_CELL_WIDTH } from '../refresh';
import { PAGE_COPY_COLUMNS } from '../rows';
import type { PageCopyColumn } from '../rows';
import { KNOWN_CODES } from '../validate';

/** 2^64: digests are sums modulo this (lib/fingerprint.ts). */
const TWO_64 = 1n << 64n;
const NEWLINE = 0x0a;
const EMPTY = Buffer.alloc(0);
const TAB = 0x09;
const NULL_TEXT = '\\N';

/** What a page's rows add up to. */
export interface RowDigest {
  /** Rows seen (COPY text lines). */
  rows: number;
  /** Rows whose `row_hash` was `\N` (not counted in `digest`). */
  unhashed: number;
  /** Sum modulo 2^64 of the rows' hashes, decimal text in [0, 2^64). */
  digest: string;
  /** The same rows per dated bucket, ordered by bucket (`null`, jobs without a start time, first). */
  buckets: PageBucketFigures[];
  /** The same rows per cell of {@link KEY_CELL_WIDTH} job keys, ordered by cell. */
  cells: StoredCellFigures[];
}

/** A page's rows of one dated bucket, as `page_bucket` stores them (lib/catalog/bucket-figures.ts). */
export type PageBucketFigures = StoredBucketFigures;

/** Field positions in a page's COPY line (lib/rows.ts PAGE_COPY_COLUMNS: the figures' fields first). */
const at = (c: PageCopyColumn): number => PAGE_COPY_COLUMNS.indexOf(c);
const FIELD = {
  key: at('job_key'),
  type: at('type'),
  level: at('level'),
  status: at('status'),
  bytes: at('bytes'),
  bucket: at('bucket'),
  hash: at('row_hash'),
} as const;
/** The last field the figures read: the line's fields after it are not looked at. */
const LAST_FIELD = Math.max(...Object.values(FIELD));
const CODES: [number, Set<string>][] = [
  [FIELD.type, KNOWN_CODES.type],
  [FIELD.level, KNOWN_CODES.level],
  [FIELD.status, KNOWN_CODES.status],
];

/** Running figures of one bucket of the page; sums kept in Numbers while exact, folded into BigInts. */
class Acc {
  jobs = 0;
  /** Row hashes as `folded + high × 10^9 + low` (`high`, `low` signed Numbers, exact below {@link FOLD}). */
  hashFolded = 0n;
  hashHigh = 0;
  hashLow = 0;
  bytes = 0n;
  bytesSmall = 0;
  minKey: number | bigint;
  maxKey: number | bigint;
  unknown = 0;

  constructor(key: number | bigint) {
    this.minKey = key;
    this.maxKey = key;
  }

  addBytes(n: number): void {
    this.bytesSmall += n;
    if (Math.abs(this.bytesSmall) > FOLD) this.fold();
  }

  addHash(high: number, low: number): void {
    this.hashHigh += high;
    this.hashLow += low;
    if (Math.abs(this.hashHigh) > FOLD || Math.abs(this.hashLow) > FOLD) this.fold();
  }

  fold(): void {
    this.bytes += BigInt(this.bytesSmall);
    this.bytesSmall = 0;
    this.hashFolded += BigInt(this.hashHigh) * BILLION + BigInt(this.hashLow);
    this.hashHigh = 0;
    this.hashLow = 0;
  }

  hash(): bigint {
    this.fold();
    return this.hashFolded;
  }
}

/**
 * Running figures of one cell of job keys: the key sum in a Number while every key is below
 * {@link SMALL_KEY} (64 of them stay below 2^53), else in a BigInt.
 */
class CellAcc {
  jobs = 0;
  keySmall = 0;
  keyBig = 0n;

  add(key: number | bigint): void {
    this.jobs++;
    if (typeof key === 'number' && key < SMALL_KEY && key > -SMALL_KEY) this.keySmall += key;
    else this.keyBig += BigInt(key);
  }

  keySum(): bigint {
    return this.keyBig + BigInt(this.keySmall);
  }
}

/** Keys below this in magnitude are summed as Numbers: a cell's 64 keys stay below 2^53. */
const SMALL_KEY = 2 ** 46;
const CELL_WIDTH = Number(KEY_CELL_WIDTH);

/** The cell of `key`: the key divided by the cell width, truncated toward zero (as PostgreSQL divides bigints). */
const cellOfKey = (key: number | bigint): number | bigint =>
  typeof key === 'number' ? Math.trunc(key / CELL_WIDTH) : key / KEY_CELL_WIDTH;

/** A running Number sum is folded into its BigInt once its magnitude passes this: every addend is below 2^53 − 2^52, so the sum stays below 2^53 and exact. */
const FOLD = 2 ** 52;
const BILLION = 1_000_000_000n;
const ZERO = 0x30;
const MINUS = 0x2d;
/** Longest decimal field read as a Number (exact below 2^53). */
const SAFE_DIGITS = 15;

/**
 * The decimal integer in `buf[s, e)` as a Number when it has at most {@link SAFE_DIGITS} digits,
 * else as a BigInt; NaN when it is not a decimal integer.
 */
function decimal(buf: Buffer, s: number, e: number): number | bigint {
  const neg = buf[s] === MINUS;
  const from = neg ? s + 1 : s;
  if (e - from > SAFE_DIGITS || e === from) {
    const t = buf.toString('latin1', s, e);
    return /^-?[0-9]+$/.test(t) ? BigInt(t) : NaN;
  }
  let n = 0;
  for (let i = from; i < e; i++) {
    const d = buf[i] - ZERO;
    if (d < 0 || d > 9) return NaN;
    n = n * 10 + d;
  }
  return neg ? -n : n;
}

/** Whether `buf[s, e)` is COPY text's NULL, `\N`. */
function isNullText(buf: Buffer, s: number, e: number): boolean {
  return e - s === 2 && buf[s] === 0x5c && buf[s + 1] === 0x4e;
}

/** Whether `buf[s, e)` holds the bytes of `b`. */
function sameBytes(buf: Buffer, s: number, e: number, b: Buffer): boolean {
  if (e - s !== b.length) return false;
  for (let i = 0; i < b.length; i++) if (buf[s + i] !== b[i]) return false;
  return true;
}

const tooFewFields = (n: number) =>
  new Error(`a page's COPY line has ${n} fields, fewer than the ${LAST_FIELD + 1} its figures read`);

/** Known codes as single bytes, per code field (codes of one ASCII character). */
const KNOWN_BYTES = CODES.map(([, known]) => {
  const table = new Uint8Array(256);
  for (const c of known) if (c.length === 1 && c.charCodeAt(0) < 128) table[c.charCodeAt(0)] = 1;
  return table;
});

/**
 * A pass-through stream of a page's COPY text lines that adds up their row hashes, for the page and
 * per bucket (`\N` hashes counted apart); `result()` once the stream ended.
 * @throws (as a stream error) on a line too short to hold the fields it reads (lib/rows.ts
 *   PAGE_COPY_COLUMNS, up to `row_hash`), or whose `row_hash` or `job_key` is not a decimal
 *   integer. A line with fields missing after `row_hash` passes: the catalog's COPY refuses it.
 */
export class RowDigestStream extends Transform {
  /** The start of a line whose end has not come yet. */
  private rest: Buffer = EMPTY;
  private rows = 0;
  private unhashed = 0;
  private readonly byBucket = new Map<string, Acc>();
  private readonly byCell = new Map<number | bigint, CellAcc>();
  /** The cell of the previous line: consecutive rows mostly share one. */
  private lastCell: number | bigint = NaN;
  private lastCellAcc: CellAcc | null = null;
  /** The bucket of the previous line: consecutive rows mostly share one. */
  private lastBucket: Buffer = Buffer.alloc(0);
  private lastAcc: Acc | null = null;
  /** Start and end offsets of each field of the current line. */
  private readonly starts = new Int32Array(LAST_FIELD + 1);
  private readonly ends = new Int32Array(LAST_FIELD + 1);

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    let start = 0;
    try {
      if (this.rest.length) {
        // The line begun in the chunks before: only it is joined (not the whole chunk, copied again).
        const nl = chunk.indexOf(NEWLINE);
        if (nl < 0) {
          this.rest = Buffer.concat([this.rest, chunk]);
          return done(null, chunk);
        }
        const first = Buffer.concat([this.rest, chunk.subarray(0, nl)]);
        this.line(first, 0, first.length);
        start = nl + 1;
      }
      for (let nl = chunk.indexOf(NEWLINE, start); nl >= 0; nl = chunk.indexOf(NEWLINE, start)) {
        this.line(chunk, start, nl);
        start = nl + 1;
      }
    } catch (err) {
      return done(err as Error);
    }
    this.rest = start < chunk.length ? Buffer.from(chunk.subarray(start)) : EMPTY;
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    try {
      if (this.rest.length) this.line(this.rest, 0, this.rest.length);
    } catch (err) {
      return done(err as Error);
    }
    this.rest = EMPTY;
    done();
  }

  /**
   * Finds the fields the figures read in the line `buf[start, end)` (offsets in `starts`, `ends`):
   * the line's first {@link LAST_FIELD} + 1 fields. The fields after them are not looked at: the
   * catalog's COPY refuses a line with a wrong number of fields.
   */
  private split(buf: Buffer, start: number, end: number): void {
    const { starts, ends } = this;
    // A byte loop: faster than one indexOf call per field on these short fields.
    let s = start;
    let f = 0;
    for (let i = start; i < end; i++) {
      if (buf[i] !== TAB) continue;
      starts[f] = s;
      ends[f] = i;
      s = i + 1;
      if (++f > LAST_FIELD) return;
    }
    if (f < LAST_FIELD) throw tooFewFields(f + 1);
    starts[f] = s; // the line ends with the last field read
    ends[f] = end;
  }

  /** Adds the line `buf[start, end)`. */
  private line(buf: Buffer, start: number, end: number): void {
    this.rows++;
    this.split(buf, start, end);
    const { starts, ends } = this;
    if (isNullText(buf, starts[FIELD.hash], ends[FIELD.hash])) {
      this.unhashed++;
      return;
    }
    const key = decimal(buf, starts[FIELD.key], ends[FIELD.key]);
    if (Number.isNaN(key))
      throw new Error(`a page's COPY line has job_key ${buf.toString('latin1', starts[FIELD.key], ends[FIELD.key])}`);
    this.cellAccOf(key).add(key);
    const acc = this.accOf(buf, starts[FIELD.bucket], ends[FIELD.bucket], key);
    acc.jobs++;
    this.addHash(acc, buf, starts[FIELD.hash], ends[FIELD.hash]);
    if (!isNullText(buf, starts[FIELD.bytes], ends[FIELD.bytes])) {
      // A value that is not a whole number is left out (the catalog's numeric(20,0) would round
      // it; validation quarantines such records first).
      const bytes = decimal(buf, starts[FIELD.bytes], ends[FIELD.bytes]);
      if (typeof bytes === 'bigint') acc.bytes += bytes;
      else if (!Number.isNaN(bytes)) acc.addBytes(bytes);
    }
    if (key < acc.minKey) acc.minKey = key;
    if (key > acc.maxKey) acc.maxKey = key;
    if (this.unknownCode(buf)) acc.unknown++;
  }

  /** The running figures of the line's bucket `buf[s, e)`, created with `key` as its span. */
  private accOf(buf: Buffer, s: number, e: number, key: number | bigint): Acc {
    if (this.lastAcc && sameBytes(buf, s, e, this.lastBucket)) return this.lastAcc;
    const name = buf.toString('latin1', s, e);
    let acc = this.byBucket.get(name);
    if (!acc) {
      acc = new Acc(key);
      this.byBucket.set(name, acc);
    }
    this.lastBucket = Buffer.from(buf.subarray(s, e));
    this.lastAcc = acc;
    return acc;
  }

  /** The running figures of the cell of `key`. */
  private cellAccOf(key: number | bigint): CellAcc {
    const cell = cellOfKey(key);
    if (this.lastCellAcc && cell === this.lastCell) return this.lastCellAcc;
    // A bigint key's cell that a Number holds exactly is stored as a Number (one Map key per cell).
    const id =
      typeof cell === 'bigint' && cell <= Number.MAX_SAFE_INTEGER && cell >= -Number.MAX_SAFE_INTEGER
        ? Number(cell)
        : cell;
    let acc = this.byCell.get(id);
    if (!acc) {
      acc = new CellAcc();
      this.byCell.set(id, acc);
    }
    this.lastCell = cell;
    this.lastCellAcc = acc;
    return acc;
  }

  /** Adds the signed 64-bit decimal `buf[s, e)` to the bucket's hash sum, as `high × 10^9 + low`. */
  private addHash(acc: Acc, buf: Buffer, s: number, e: number): void {
    const neg = buf[s] === MINUS;
    const from = neg ? s + 1 : s;
    const split = Math.max(from, e - 9);
    let high = 0;
    let low = 0;
    for (let i = from; i < e; i++) {
      const d = buf[i] - ZERO;
      if (d < 0 || d > 9 || e - from > 19)
        throw new Error(`a page's COPY line has row_hash ${buf.toString('latin1', s, e)}`);
      if (i < split) high = high * 10 + d;
      else low = low * 10 + d;
    }
    if (e === from) throw new Error(`a page's COPY line has an empty row_hash`);
    acc.addHash(neg ? -high : high, neg ? -low : low);
  }

  /** Whether the line has a non-NULL type, level or status code the product does not know. */
  private unknownCode(buf: Buffer): boolean {
    const { starts, ends } = this;
    for (let i = 0; i < CODES.length; i++) {
      const f = CODES[i][0];
      const known = CODES[i][1];
      const s = starts[f];
      const len = ends[f] - s;
      if (len === 1) {
        if (!KNOWN_BYTES[i][buf[s]]) return true;
      } else if (!isNullText(buf, s, ends[f]) && !known.has(buf.toString('utf8', s, ends[f]))) return true;
    }
    return false;
  }

  /** The digest of every line seen. */
  result(): RowDigest {
    let sum = 0n;
    const buckets: PageBucketFigures[] = [];
    for (const [bucket, a] of this.byBucket) {
      const hash = a.hash();
      sum += hash;
      buckets.push({
        bucket: bucket === NULL_TEXT ? null : bucket,
        jobs: a.jobs,
        hashSum: hash.toString(),
        bytes: a.bytes.toString(),
        minKey: a.minKey.toString(),
        maxKey: a.maxKey.toString(),
        unknownCodes: a.unknown,
      });
    }
    buckets.sort((x, y) =>
      x.bucket === y.bucket ? 0 : x.bucket === null ? -1 : y.bucket === null ? 1 : x.bucket < y.bucket ? -1 : 1,
    );
    const cells: StoredCellFigures[] = [...this.byCell]
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
      .map(([cell, a]) => ({ cell: cell.toString(), jobs: a.jobs, keySum: a.keySum().toString() }));
    return {
      rows: this.rows,
      unhashed: this.unhashed,
      digest: (((sum % TWO_64) + TWO_64) % TWO_64).toString(),
      buckets,
      cells,
    };
  }
}
