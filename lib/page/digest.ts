/**
 * The digest of the rows a page writes, taken from its COPY stream as it passes through the
 * worker: the number of rows and the sum modulo 2^64 of their `row_hash` (the last column of each
 * COPY text line, computed by the source; `\N` when the source gives none). Stored in the page's
 * ledger row (`checksum`), it is the catalog side of the page's key range for the next refresh's
 * change detection, with no read-back of the written rows.
 */
import { Transform } from 'node:stream';
import type { TransformCallback } from 'node:stream';

/** 2^64: digests are sums modulo this (lib/fingerprint.ts). */
const TWO_64 = 1n << 64n;
const NEWLINE = 0x0a;
const TAB = 0x09;

/** What a page's rows add up to. */
export interface RowDigest {
  /** Rows seen (COPY text lines). */
  rows: number;
  /** Rows whose `row_hash` was `\N` (not counted in `digest`). */
  unhashed: number;
  /** Sum modulo 2^64 of the rows' hashes, decimal text in [0, 2^64). */
  digest: string;
}

/**
 * A pass-through stream of COPY text that adds up the last column of each line as a signed 64-bit
 * decimal (`\N` counted apart); `result()` once the stream ended.
 */
export class RowDigestStream extends Transform {
  private rest: Buffer = Buffer.alloc(0);
  private sum = 0n;
  private rows = 0;
  private unhashed = 0;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const buf = this.rest.length ? Buffer.concat([this.rest, chunk]) : chunk;
    let start = 0;
    for (let nl = buf.indexOf(NEWLINE, start); nl >= 0; nl = buf.indexOf(NEWLINE, start)) {
      this.line(buf, start, nl);
      start = nl + 1;
    }
    this.rest = start < buf.length ? Buffer.from(buf.subarray(start)) : Buffer.alloc(0);
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    if (this.rest.length) this.line(this.rest, 0, this.rest.length);
    this.rest = Buffer.alloc(0);
    done();
  }

  /** Adds the line `buf[start, end)`: its text after the last tab. */
  private line(buf: Buffer, start: number, end: number): void {
    this.rows++;
    const tab = buf.lastIndexOf(TAB, end - 1);
    const field = buf.toString('latin1', tab < start ? start : tab + 1, end);
    if (field === '\\N') this.unhashed++;
    else this.sum += BigInt(field);
  }

  /** The digest of every line seen. */
  result(): RowDigest {
    return { rows: this.rows, unhashed: this.unhashed, digest: (((this.sum % TWO_64) + TWO_64) % TWO_64).toString() };
  }
}
