/**
 * What the page digest stream (lib/page/digest.ts) costs the worker: N synthetic COPY lines of a
 * page (PAGE_COPY_COLUMNS order, realistic widths) streamed in 64 KiB chunks (cut inside lines) through it and,
 * as the baseline of the same process, through nothing. Prints the CPU seconds of each, three
 * rounds each alternating, and the per-10^6-lines figure.
 *
 *   npm run -s build && node dist/dev/bench/digest-stream.js [--lines 1000000]
 */
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Command } from 'commander';
import { RowDigestStream } from '../../lib/page';
import { PAGE_COPY_COLUMNS } from '../../lib/rows';
import type { PageCopyColumn } from '../../lib/rows';

/** One COPY line of job `i`: 28 buckets of 2,000 jobs, known codes, a 64-bit row hash of either sign. */
function line(i: number): string {
  const value: Partial<Record<PageCopyColumn, string>> = {
    version_id: '7',
    page_no: '3',
    row_hash: String((i % 2 ? 1n : -1n) * ((BigInt(i) * 1234567890123n) % 9223372036854775807n)),
    job_key: String(1000 + i),
    job_id: String(1000 + i),
    job: `backup-client-${i % 40}.2024-01-01_00.00.00_${i % 100}`,
    job_name: `backup-client-${i % 40}`,
    client: `client-${i % 40}-fd`,
    type: 'B',
    level: 'I',
    status: 'T',
    bytes: String(i * 12345),
    bucket: `2024-01-${String(1 + (Math.floor(i / 2000) % 28)).padStart(2, '0')}`,
  };
  const fields = PAGE_COPY_COLUMNS.map(
    (c) => value[c] ?? (c.endsWith('time') ? '2024-01-01 00:00:00+00' : `v${i % 997}`),
  );
  return `${fields.join('\t')}\n`;
}

async function main(): Promise<void> {
  const o = new Command()
    .option('--lines <n>', 'COPY lines per round', (v) => Number(v), 1_000_000)
    .parse()
    .opts<{ lines: number }>();
  // 64 KiB chunks cut wherever they fall, mostly inside a line, as a socket delivers them.
  const parts: Buffer[] = [];
  for (let i = 0; i < o.lines; i += 10_000)
    parts.push(Buffer.from(Array.from({ length: Math.min(10_000, o.lines - i) }, (_, k) => line(i + k)).join('')));
  const all = Buffer.concat(parts);
  const chunks: Buffer[] = [];
  for (let at = 0; at < all.length; at += 65_536) chunks.push(all.subarray(at, at + 65_536));
  const sink = () =>
    new Writable({
      write(_c, _e, done) {
        done();
      },
    });
  const perMillion = (s: number) => ((s * 1e6) / o.lines).toFixed(2);
  for (let round = 1; round <= 3; round++) {
    for (const kind of ['digest', 'none'] as const) {
      const before = process.cpuUsage();
      const digest = new RowDigestStream();
      const streams: (NodeJS.ReadableStream | NodeJS.WritableStream)[] = [Readable.from(chunks)];
      if (kind === 'digest') streams.push(digest);
      await pipeline([...streams, sink()]);
      const used = process.cpuUsage(before);
      const s = (used.user + used.system) / 1e6;
      const buckets = kind === 'digest' ? `, ${digest.result().buckets.length} buckets` : '';
      console.log(
        `round ${round} ${kind}: ${s.toFixed(2)} CPU s for ${o.lines} lines = ${perMillion(s)} CPU s per 10^6${buckets}`,
      );
    }
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
