/**
 * What every variant of the bench shares: the command-line options, the printed figures, the
 * databases and the CHECKPOINT that puts the variants on the same footing.
 */
import type { Pool } from 'pg';
import type { TestDatabases } from '../harness/harness';

/** Command-line options of `npm run bench`. */
export interface BenchOptions {
  /** Jobs in the generated source. */
  jobs: number;
  /** Page size of the rebuild (undefined: the rebuild's default). */
  pageSize?: number;
  /** Generator seed. */
  seed: number;
  /** Pages whose replay WAL is measured. */
  walPages: number;
  /** Pages per method in the page-write micro-benchmark. */
  writePages: number;
  /** File to write the figures to as JSON. */
  json?: string;
  /** NODE_OPTIONS of the worker process only. */
  workerNodeOptions?: string;
  /** File the product's worker output is written to, once its rebuild ended. */
  workerLog?: string;
  /** Clients of the generated director. */
  clients?: number;
  /** Worker processes polling during the product's rebuild. */
  workers: number;
  /** After the product, change the source and time `start --refresh` against the full rebuild. */
  refresh?: boolean;
  /** File records of the generated source (`--files N`): the product runs `start --files` and (pf) runs. */
  files?: number;
}

/** The figures of one run: each printed as `label: text` on its own line and kept for --json. */
export class Figures {
  readonly values: Record<string, unknown> = {};

  /** Prints one figure as `label: text` and records `value` (default: the text). */
  add(label: string, text: string, value?: unknown): void {
    console.log(`${label}: ${text}`);
    this.values[label] = value ?? text;
  }
}

/** The state one variant runs in. */
export interface BenchContext {
  o: BenchOptions;
  /** Rows per page of the rebuild and of the page micro-benchmarks. */
  pageSize: number;
  /** Pages in flight of the rebuild (its default). */
  concurrency: number;
  /** Admin connection settings for psql (host, port, user; password only through the environment). */
  psqlEnv: Record<string, string>;
  figures: Figures;
  /** Prints a `# ` comment line (not a figure). */
  log(line: string): void;
  /** Catalog and source databases; the catalog one also holds the copy `bench_src` of the source. */
  dbs: TestDatabases;
  /** Admin pool on the same server (CHECKPOINT, pg_stat_activity). */
  admin: Pool;
  /** Database names of `dbs`. */
  catalogDb: string;
  sourceDb: string;
  /** Session time zone of the source: the zone of its naive times. */
  tz: string;
  /** CHECKPOINT when permitted (the first refusal is logged and later calls do nothing). */
  checkpoint(): Promise<void>;
  /** Whether CHECKPOINT was permitted so far. */
  canCheckpoint(): boolean;
}

/** `1,234,567`. */
export const fmtInt = (n: number): string => Math.round(n).toLocaleString('en-US');
/** `12.3 s` from milliseconds. */
export const fmtS = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
/** Arithmetic mean (NaN for none). */
export const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
