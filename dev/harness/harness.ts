/**
 * Test harness: a private Temporal dev server on free ports, fresh PostgreSQL databases on the
 * machine's server (never stopped or restarted), cloned from template databases (templates.ts), a worker configuration file, and real worker
 * processes spawned detached and killed by process group.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { Pool } from 'pg';
import { ensureTemporalCli } from '../env/temporal-cli';
import type { DevServer } from '../env/dev-server';
import { freePort, startDevServer } from '../env/dev-server';
import { createDatabase, databaseUrl, dropDatabase, resolveAdminUrl } from '../env/postgres';
import { projectRoot } from '../../lib/paths';
import { createPool } from '../../lib/db';
import { compareCatalogToSource as compareInSql } from '../verify';
import type { GenerateBareosResult } from '../bareos-generator';
import type { SourceTemplateOptions } from './templates';
import { catalogFromTemplate, sourceFromTemplate } from './templates';
import { productWorkerEnv } from './product-worker-env';

/**
 * A private Temporal dev server for one test file (headless, on a free port unless `port` is given,
 * with the search attributes unless `searchAttributes: false`).
 */
export async function privateTemporal(
  opts: {
    dbFile?: string;
    port?: number;
    searchAttributes?: boolean;
    /** Serve the Web UI on a free port of its own (`uiUrl`); default headless. */
    ui?: boolean;
  } = {},
): Promise<DevServer & { dir: string; dbFile: string; port: number; cli: string }> {
  const cli = ensureTemporalCli();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-temporal-'));
  // A server on a port of our choosing can fail to start when another process takes one of its ports
  // between our check and its bind: on a port we picked, it is started again on another (3 tries).
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? (await freePort());
    const dbFile = opts.dbFile ?? path.join(dir, attempt === 1 ? 'temporal.db' : `temporal-${attempt}.db`);
    try {
      const server = await startDevServer({
        cli,
        port,
        uiPort: opts.ui ? await freePort() : 0,
        dbFile,
        logFile: path.join(dir, 'server.log'),
        headless: !opts.ui,
        searchAttributes: opts.searchAttributes,
      });
      return { ...server, dir, dbFile, port, cli };
    } catch (err) {
      if (opts.port !== undefined || attempt >= 3) throw err;
      console.error(`private Temporal on port ${port} did not start (${(err as Error).message.split('\n')[0]}); again`);
    }
  }
}

/** Databases of one test file or test: a catalog and a source, dropped by `drop()`. */
export interface TestDatabases {
  adminUrl: string;
  catalogUrl: string;
  sourceUrl: string;
  catalogPool: Pool;
  sourcePool: Pool;
  /** What the generated source holds (`generateBareosSource`'s result), when one was asked for. */
  generated?: GenerateBareosResult;
  /**
   * Replaces the source database with a copy of the generated source `options` describe (from its
   * template, generated once per server; see {@link sourceFromTemplate}) and sets `generated`.
   * @throws Error when `sourcePool` has sessions (call it before using the source).
   */
  generateSource(options: SourceTemplateOptions): Promise<GenerateBareosResult>;
  drop(): Promise<void>;
}

/** Options of {@link testDatabases}. */
export interface TestDatabaseOptions {
  /**
   * `migrated` (default): the catalog database is a copy of the migrated catalog template (every
   * migration applied; `migrate` finds nothing to do); `empty`: a new empty database.
   */
  catalog?: 'migrated' | 'empty';
  /** A generated Bareos source (a copy of its template) instead of an empty source database. */
  source?: SourceTemplateOptions;
}

/**
 * Creates `crt_<tag>_<rand>_catalog` and `..._source` (see {@link TestDatabaseOptions}) and a pool
 * (4 sessions) on each.
 * @throws the server's or the generator's error (e.g. RangeError for invalid source options).
 */
export async function testDatabases(tag: string, opts: TestDatabaseOptions = {}): Promise<TestDatabases> {
  const adminUrl = await resolveAdminUrl();
  const base = `crt_${tag}_${randomBytes(3).toString('hex')}`;
  const sourceUrl = databaseUrl(adminUrl, `${base}_source`);
  // Both at once, each on its own admin session; neither is left behind when one fails.
  const made = await Promise.allSettled([
    opts.catalog === 'empty'
      ? createDatabase(adminUrl, `${base}_catalog`)
      : catalogFromTemplate(adminUrl, `${base}_catalog`),
    opts.source
      ? sourceFromTemplate(adminUrl, `${base}_source`, opts.source)
      : createDatabase(adminUrl, `${base}_source`).then(() => undefined),
  ]);
  const failed = made.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    for (const n of [`${base}_catalog`, `${base}_source`]) await dropDatabase(adminUrl, n).catch(() => undefined);
    throw failed.reason;
  }
  const catalogUrl = (made[0] as PromiseFulfilledResult<string>).value;
  const generated = (made[1] as PromiseFulfilledResult<GenerateBareosResult | undefined>).value;
  const catalogPool = createPool(catalogUrl, { applicationName: 'catalog-rebuild:test', max: 4 });
  const sourcePool = createPool(sourceUrl, { applicationName: 'catalog-rebuild:test', max: 4 });
  const dbs: TestDatabases = {
    adminUrl,
    catalogUrl,
    sourceUrl,
    catalogPool,
    sourcePool,
    generated,
    async generateSource(options) {
      if (sourcePool.totalCount > 0)
        throw new Error(`generateSource: the source pool of ${base} has sessions; generate before using it`);
      dbs.generated = await sourceFromTemplate(adminUrl, `${base}_source`, options);
      return dbs.generated;
    },
    async drop() {
      await catalogPool.end().catch(() => undefined);
      await sourcePool.end().catch(() => undefined);
      await dropDatabase(adminUrl, `${base}_catalog`).catch(() => undefined);
      await dropDatabase(adminUrl, `${base}_source`).catch(() => undefined);
    },
  };
  return dbs;
}

/** Writes a worker configuration file with one Bareos source named `director`; returns its path. */
export function writeConfig(
  dbs: { catalogUrl: string; sourceUrl: string },
  extra: Record<string, unknown> = {},
): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-config-')), 'config.json');
  fs.writeFileSync(
    file,
    JSON.stringify(
      {
        catalogDatabaseUrl: dbs.catalogUrl,
        sources: { director: { kind: 'bareos', databaseUrl: dbs.sourceUrl, ...extra } },
      },
      null,
      2,
    ),
  );
  return file;
}

/** Environment of worker and CLI processes for a test. */
export function testEnv(o: {
  address: string;
  configFile: string;
  taskQueue: string;
  extra?: Record<string, string>;
}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    TEMPORAL_ADDRESS: o.address,
    TEMPORAL_NAMESPACE: 'default',
    CATALOG_REBUILD_CONFIG: o.configFile,
    CATALOG_REBUILD_TASK_QUEUE: o.taskQueue,
    CATALOG_DATABASE_URL: '',
    ...o.extra,
  };
}

/** A worker process started for a test. */
export interface WorkerProcess {
  child: ChildProcess;
  pid: number;
  output(): string;
  /** SIGKILL to the worker's process group. */
  kill(signal?: NodeJS.Signals): void;
  exited: Promise<number | null>;
}

/**
 * Spawns a worker detached and resolves once it polls: by default the test worker entry
 * (`dist/dev/test-worker.js`, which adds the page hooks of `CATALOG_REBUILD_FAULTS`); with
 * `{ entry: 'product' }` the product's `dist/worker/main.js`, as benchmarks measure it (with
 * `MALLOC_ARENA_MAX=2` unless `env` sets it, as `npm run worker` and the Dockerfile run it). `root` is
 * the built tree it runs from (default this project; e.g. a previous release's build).
 */
export async function spawnWorker(
  env: NodeJS.ProcessEnv,
  opts: { entry?: 'test' | 'product'; root?: string } = {},
): Promise<WorkerProcess> {
  const entry = opts.entry === 'product' ? 'dist/worker/main.js' : 'dist/dev/test-worker.js';
  const child = spawn(process.execPath, [path.join(opts.root ?? projectRoot(), entry)], {
    env: opts.entry === 'product' ? productWorkerEnv(env) : env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  await new Promise<void>((resolve, reject) => {
    const t = setInterval(() => {
      if (out.includes('polling task queue')) {
        clearInterval(t);
        resolve();
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(t);
      reject(new Error(`worker exited with ${code} before polling:\n${out}`));
    });
  });
  return {
    child,
    pid: child.pid!,
    output: () => out,
    kill(signal = 'SIGKILL') {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        /* gone */
      }
    },
    exited,
  };
}

/** Runs the compiled CLI with `args`; returns exit code and output. */
export function runCliProcess(
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs = 300_000,
): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [path.join(projectRoot(), 'bin/catalog-rebuild.js'), ...args], {
    env,
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A CLI process started by {@link startCli}. */
export interface CliProcess {
  /** Its standard output so far. */
  stdout(): string;
  /** Its standard error so far. */
  stderr(): string;
  /** Exit code (null when killed) and the whole output, once it exited. */
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Sends `signal` to the CLI process (e.g. SIGINT, as Ctrl-C does). */
  signal(signal: NodeJS.Signals): void;
}

/**
 * Starts the compiled CLI with `args` and returns at once; its output can be watched while it runs.
 * `opts.root`: the built tree whose `bin/catalog-rebuild.js` runs (default this project);
 * `opts.timeoutMs`: SIGKILL the CLI after this long (code null).
 */
export function startCli(
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: { root?: string; timeoutMs?: number } = {},
): CliProcess {
  const bin = path.join(opts.root ?? projectRoot(), 'bin/catalog-rebuild.js');
  const child = spawn(process.execPath, [bin, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: opts.timeoutMs,
    killSignal: 'SIGKILL',
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('exit', (code) => resolve({ code, stdout, stderr })),
  );
  return { stdout: () => stdout, stderr: () => stderr, done, signal: (sig) => void child.kill(sig) };
}

/**
 * Runs the compiled CLI with `args` without blocking the event loop; resolves with exit code and
 * output. Options as {@link startCli}.
 */
export function runCliAsync(
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: { root?: string; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return startCli(args, env, opts).done;
}

/** A Temporal client on `address`. */
export async function temporalClient(address: string): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({ address });
  return { client: new Client({ connection }), close: () => connection.close() };
}

/** A unique task queue name for one test. */
export const uniqueQueue = (tag: string): string => `catalog-rebuild-test-${tag}-${randomBytes(3).toString('hex')}`;

/** Every field of the published catalog vs the source, as text, in key order; returns md5 of both (row counts when they differ). */
export async function compareCatalogToSource(
  catalogPool: Pool,
  sourcePool: Pool,
  catalog: string,
  timezone = 'UTC',
): Promise<{ catalog: string; source: string; rows: number }> {
  const r = await compareInSql(catalogPool, sourcePool, catalog, timezone);
  if (r.catalogRows !== r.sourceRows)
    return { catalog: `${r.catalogRows} rows`, source: `${r.sourceRows} rows`, rows: r.sourceRows };
  return { catalog: r.catalog, source: r.source, rows: r.sourceRows };
}
