/**
 * A node:test reporter that prints, once every file has run, how long each test file's tests took
 * (the sum of its top-level tests' durations, in seconds; hooks outside tests are not counted),
 * slowest first, and the sum. `npm test` adds it beside the spec reporter, so every run says where
 * its minutes went, also when files run side by side.
 */
import * as path from 'node:path';

/** The events of node:test's reporter stream this reporter reads. */
interface TestEvent {
  type: string;
  data?: { file?: string; nesting?: number; details?: { duration_ms?: number } };
}

/** Formats the per-file seconds as lines, slowest first, with the sum. */
function summary(seconds: Map<string, number>): string {
  const rows = [...seconds].map(([file, s]) => ({ file: path.basename(file), s }));
  rows.sort((a, b) => b.s - a.s);
  const total = rows.reduce((sum, r) => sum + r.s, 0);
  const lines = rows.map((r) => `  ${r.s.toFixed(1).padStart(7)} s  ${r.file}`);
  return `\ntest files by time (${rows.length} files, ${total.toFixed(0)} s summed):\n${lines.join('\n')}\n`;
}

/** The reporter: an async generator over node:test's events, yielding one summary at the end. */
async function* fileTimes(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const seconds = new Map<string, number>();
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { file, nesting, details } = event.data ?? {};
    if (!file || nesting !== 0) continue;
    seconds.set(file, (seconds.get(file) ?? 0) + (details?.duration_ms ?? 0) / 1000);
  }
  yield summary(seconds);
}

export = fileTimes;
