/**
 * Baseline (p), what the targets of the throughput issue are stated against: a real shell pipe of
 * two psql processes between the source and the catalog database,
 *
 *   psql -c "\copy (SELECT …) to stdout" | psql -c "\copy j from stdin"
 *
 * where the SELECT is `job` LEFT JOIN `client`, `pool`, `fileset` giving the 24 columns of
 * `P_COLUMNS` and `j` is a logged table of those types with `job_id text PRIMARY KEY` and no other
 * index, in the catalog database. Connection settings reach psql through the environment
 * (PGHOST, PGPORT, PGUSER, PGDATABASE; PGPASSWORD when the admin URL has one), never on the
 * command line. Wall time from spawning the pipe to its exit; CPU of the two psql processes (the
 * shell's `times`) and of their two backends (sampled).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import type { BenchContext } from './context';
import { fmtInt, fmtS } from './context';
import { CpuSampler, cpuText } from './cpu';
import { createPipeTable, P_SELECT } from './tables';
import { printedRatio } from './targets';

/** psql at this path when it exists (the machine's client), else `psql` from PATH. */
const PSQL = '/usr/bin/psql';

/** Table of (p) in the catalog database. */
export const PIPE_TABLE = 'j';

/** What (p) measured. */
export interface PipeOutcome {
  rows: number;
  ms: number;
  rate: number;
  cpu: Record<string, number>;
}

/** PGHOST/PGPORT/PGUSER (and PGPASSWORD) of a PostgreSQL URL, for psql's environment. */
export function psqlEnvOf(url: string): Record<string, string> {
  const u = new URL(url);
  const env: Record<string, string> = {};
  const host = u.searchParams.get('host') ?? decodeURIComponent(u.hostname);
  if (host) env.PGHOST = host;
  if (u.port) env.PGPORT = u.port;
  if (u.username) env.PGUSER = decodeURIComponent(u.username);
  if (u.password) env.PGPASSWORD = decodeURIComponent(u.password);
  return env;
}

/** `m` minutes and `s` seconds of bash's `times` (`1m2.345s`) in ms. */
const timesMs = (x: string): number => {
  const m = /^(\d+)m([\d.]+)s$/.exec(x);
  return m ? (Number(m[1]) * 60 + Number(m[2])) * 1000 : NaN;
};

/**
 * Runs the pipe under bash (pipefail: either psql failing fails the run); resolves with the rows
 * the receiving psql reported (`COPY n`) and the CPU ms of the shell's children (the two psql).
 * @throws Error with psql's output when the pipe exits non-zero.
 */
async function runPipe(ctx: BenchContext, sampler: CpuSampler): Promise<{ rows: number; psqlCpuMs: number }> {
  const psql = fs.existsSync(PSQL) ? PSQL : 'psql';
  const script = [
    'set -o pipefail',
    `PGDATABASE="$BENCH_SOURCE_DB" ${psql} -X -q -v ON_ERROR_STOP=1 -c "$BENCH_P_OUT" | PGDATABASE="$BENCH_CATALOG_DB" ${psql} -X -v ON_ERROR_STOP=1 -c "$BENCH_P_IN"`,
    'rc=$?',
    'times >&2',
    'exit $rc',
  ].join('\n');
  const child = spawn('/bin/bash', ['-c', script], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...ctx.psqlEnv,
      PGAPPNAME: 'catalog-rebuild:bench:p',
      BENCH_SOURCE_DB: ctx.sourceDb,
      BENCH_CATALOG_DB: ctx.catalogDb,
      BENCH_P_OUT: `\\copy (${P_SELECT}) to stdout`,
      BENCH_P_IN: `\\copy ${PIPE_TABLE} from stdin`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  sampler.addTree('psql processes', child.pid!);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  if (code !== 0) throw new Error(`(p) psql pipe exited with ${code}:\n${out}\n${err}`);
  const rows = Number(/^COPY (\d+)$/m.exec(out)?.[1] ?? NaN);
  const times = err.trim().split('\n').slice(-1)[0]?.split(/\s+/) ?? [];
  return { rows, psqlCpuMs: timesMs(times[0] ?? '') + timesMs(times[1] ?? '') };
}

/**
 * Runs (p) and prints its figures; leaves table `j` for the equivalence check (each run creates it
 * anew). With `again`, the run after the product: one figure, `(p) again, after the product`.
 */
export async function runPipeBaseline(ctx: BenchContext, again = false): Promise<PipeOutcome> {
  await createPipeTable(ctx.dbs.catalogPool, PIPE_TABLE);
  await ctx.checkpoint();
  const sampler = new CpuSampler(ctx.admin, {}, [
    { label: 'PostgreSQL catalog backend', datname: ctx.catalogDb, appPrefix: 'catalog-rebuild:bench:p' },
    { label: 'PostgreSQL source backend', datname: ctx.sourceDb, appPrefix: 'catalog-rebuild:bench:p' },
  ]);
  await sampler.start();
  const started = Date.now();
  const { rows, psqlCpuMs } = await runPipe(ctx, sampler);
  const ms = Date.now() - started;
  const cpu = await sampler.stop();
  // The shell's `times` counts the two psql exactly; the 200 ms samples can only undercount them.
  if (Number.isFinite(psqlCpuMs)) cpu['psql processes'] = psqlCpuMs;
  const rate = rows / (ms / 1000);
  if (again) {
    // The same pipe once more, after the product: how far the machine's speed moved in the run.
    ctx.figures.add(
      '(p) again, after the product',
      `${fmtInt(rate)} rows/s (${fmtInt(rows)} rows in ${fmtS(ms)}); ${cpuText(cpu, rows)}`,
      { rows, ms, rowsPerSecond: Math.round(rate), cpu },
    );
    return { rows, ms, rate, cpu };
  }
  ctx.figures.add(
    '(p) psql pipe (\\copy to stdout | \\copy from stdin)',
    `${fmtInt(rate)} rows/s (${fmtInt(rows)} rows in ${fmtS(ms)}, into logged table ${PIPE_TABLE} with job_id text PRIMARY KEY only)`,
    { rows, ms, rowsPerSecond: Math.round(rate) },
  );
  ctx.figures.add('(p) CPU', cpuText(cpu, rows), cpu);
  return { rows, ms, rate, cpu };
}

/**
 * Prints `baseline drift`: (p)'s time before and after the product, and product/(p) against each
 * (judged as the headline is, dev/bench/targets.ts). On a shared machine (p) can move within a run
 * (57.5 then 72.3 s at 10^7 jobs, the same rows; autovacuum of the product's new tables can slow
 * the second run too); the headline keeps the first, as the targets are stated, and this says how
 * far to trust it.
 * @returns the figure's value.
 */
export function reportDrift(
  ctx: Pick<BenchContext, 'figures'>,
  before: PipeOutcome,
  after: PipeOutcome,
  productRate: number,
): DriftFigure {
  const cpuS = (o: PipeOutcome) => Object.values(o.cpu).reduce((a, b) => a + b, 0) / 1000;
  const drift = after.ms / before.ms - 1;
  const moved = Math.abs(drift) > DRIFT_NOTED;
  const r = (o: PipeOutcome) => printedRatio(productRate / o.rate);
  // One decimal, signed; a change that rounds to zero shows as 0.0 (never -0.0).
  const shown = Math.abs(drift) < 0.0005 ? '0.0' : `${drift > 0 ? '+' : ''}${(drift * 100).toFixed(1)}`;
  const value: DriftFigure = {
    beforeMs: before.ms,
    afterMs: after.ms,
    drift: +drift.toFixed(3),
    ratioBefore: r(before),
    ratioAfter: r(after),
    moved,
  };
  ctx.figures.add(
    'baseline drift',
    `(p) took ${fmtS(before.ms)} before the product and ${fmtS(after.ms)} after it (${shown}%; CPU ${cpuS(before).toFixed(1)} / ${cpuS(after).toFixed(1)} s): product/(p) ${value.ratioBefore.toFixed(3)} against the first, ${value.ratioAfter.toFixed(3)} against the second; ${moved ? `(p) moved by more than ${DRIFT_NOTED * 100}% during the run: the ratio is as uncertain as that` : 'steady'}`,
    value,
  );
  return value;
}

/** What `baseline drift` records: (p)'s two times (ms), their change (share), and product/(p) against each. */
export interface DriftFigure {
  beforeMs: number;
  afterMs: number;
  drift: number;
  ratioBefore: number;
  ratioAfter: number;
  /** The change exceeds {@link DRIFT_NOTED}. */
  moved: boolean;
}

/** A change of (p)'s time within a run beyond this share is called out. */
export const DRIFT_NOTED = 0.1;
