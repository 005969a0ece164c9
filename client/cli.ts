/**
 * `catalog-rebuild` command line: a thin commander layer over the client library.
 * Exit codes: 0 success, 1 failure (including "finished but not published"), 2 usage error;
 * `check` follows Nagios (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN and for its own errors).
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { WorkflowFailedError } from '@temporalio/client';
import { Pool } from 'pg';
import {
  cancel,
  connectTemporal,
  getProgress,
  pause,
  rebuildHandle,
  RebuildCatalogResult,
  RebuildProgress,
  resume,
  setThrottle,
  startRebuild,
  TemporalSession,
  waitForResult,
  workersPolling,
} from './index';
import { LIMITS } from '../workflows/definitions';
import { CATALOG_NAME_PATTERN } from '../workflows/names';
import { loadConfig } from '../lib/config';
import { createPool, migrate } from '../lib/db';
import { catalogStatusFromDatabase, formatProgress } from './status';

/** A CLI outcome: the exit code the entrypoint uses. */
export class ExitCode extends Error {
  constructor(readonly code: number, message = '') {
    super(message);
  }
}

function intOption(name: string, min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

function catalogName(value: string): string {
  if (!CATALOG_NAME_PATTERN.test(value)) throw new InvalidArgumentError('catalog names use letters, digits, _ . - (at most 63)');
  return value;
}

async function withTemporal<T>(fn: (s: TemporalSession) => Promise<T>): Promise<T> {
  let session: TemporalSession;
  try {
    session = await connectTemporal();
  } catch (err) {
    throw new ExitCode(1, `cannot connect to Temporal at ${process.env.TEMPORAL_ADDRESS ?? 'localhost:7233'}: ${(err as Error).message}`);
  }
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

async function withCatalogPool<T>(fn: (pool: Pool) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const pool = createPool(config.catalogDatabaseUrl, { applicationName: `catalog-rebuild:cli:${process.pid}`, max: 2 });
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

function printResult(r: RebuildCatalogResult, out: (s: string) => void): void {
  out(
    `catalog ${r.catalog}: version ${r.versionId} ${r.published ? 'published' : r.cancelled ? 'cancelled (abandoned)' : 'NOT published'}; ` +
      `${r.pagesTotal} pages, ${r.rowsUpserted} rows, ${r.rejects} rejects, ${r.retries} retries, ${Math.round(r.durationMs / 1000)} s, ${r.runs} run(s)`,
  );
  if (r.reconciliation) {
    const x = r.reconciliation;
    out(`reconciliation: ${x.ok ? 'ok' : 'MISMATCH'}: ${x.buckets} buckets, source ${x.sourceRows} = catalog ${x.catalogRows}; delta after watermark ${x.delta}; duplicate job names ${x.duplicateJobNames}; sample ${x.sampled} checked, ${x.sampleMismatches} differ`);
  }
}

async function waitAndReport(session: TemporalSession, catalog: string, out: (s: string) => void): Promise<number> {
  try {
    const r = await waitForResult(rebuildHandle(session.client, catalog));
    printResult(r, out);
    return r.published ? 0 : 1;
  } catch (err) {
    if (err instanceof WorkflowFailedError) {
      let e: unknown = err;
      while (e instanceof Error && e.cause instanceof Error) e = e.cause;
      throw new ExitCode(1, `rebuild of ${catalog} failed, not published: ${(e as Error).message}`);
    }
    throw err;
  }
}

/** Builds the command tree. `out` receives normal output, `err` diagnostics. */
export function buildCli(out: (s: string) => void = (s) => console.log(s), err: (s: string) => void = (s) => console.error(s)): Command {
  const program = new Command('catalog-rebuild')
    .description('Rebuild a backup catalog as a durable Temporal workflow; publish it atomically.')
    .exitOverride()
    .configureOutput({ writeOut: (s) => out(s.trimEnd()), writeErr: (s) => err(s.trimEnd()) })
    .showHelpAfterError();

  program
    .command('start')
    .description('start a rebuild (or attach to the running one of this catalog)')
    .requiredOption('--catalog <name>', 'catalog to rebuild', catalogName)
    .requiredOption('--source <name>', 'source name from the worker configuration')
    .option('--page-size <n>', `jobs per page (${LIMITS.pageSize.min}..${LIMITS.pageSize.max})`, intOption('--page-size', LIMITS.pageSize.min, LIMITS.pageSize.max), LIMITS.pageSize.default)
    .option('--concurrency <n>', `pages in flight (${LIMITS.concurrency.min}..${LIMITS.concurrency.max})`, intOption('--concurrency', LIMITS.concurrency.min, LIMITS.concurrency.max), LIMITS.concurrency.default)
    .option('--allow-shrink', 'publish even if buckets shrank beyond the shrink guard', false)
    .addOption(new Option('--max-pages-per-run <n>', 'pages per run before continue-as-new').argParser(intOption('--max-pages-per-run', 1, 5000)).hideHelp())
    .addOption(new Option('--heartbeat-timeout-ms <n>', 'page heartbeat timeout (ms)').argParser(intOption('--heartbeat-timeout-ms', 1000, 600000)).hideHelp())
    .option('--wait', 'wait for the rebuild to end; exit 1 unless published', false)
    .action(async (o) =>
      withTemporal(async (s) => {
        const r = await startRebuild(s.client, {
          catalog: o.catalog,
          source: o.source,
          pageSize: o.pageSize,
          concurrency: o.concurrency,
          allowShrink: o.allowShrink,
          maxPagesPerRun: o.maxPagesPerRun,
          heartbeatTimeoutMs: o.heartbeatTimeoutMs,
        });
        if (r.attached && r.conflicts.length) {
          throw new ExitCode(1, `a rebuild of ${o.catalog} is already running with different flags: ${r.conflicts.join('; ')}`);
        }
        out(`${r.attached ? 'attached to running' : 'started'} rebuild ${r.handle.workflowId} (task queue ${s.taskQueue})`);
        if (o.wait) {
          const code = await waitAndReport(s, o.catalog, out);
          if (code) throw new ExitCode(code);
        }
      }),
    );

  program
    .command('status')
    .description('show a rebuild\'s progress (from the workflow, else from the catalog database)')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option('--json', 'print JSON for scripts', false)
    .action(async (o) =>
      withTemporal(async (s) => {
        const handle = rebuildHandle(s.client, o.catalog);
        let progress: RebuildProgress | null = null;
        let note = '';
        try {
          progress = await getProgress(handle, 5_000);
        } catch (e) {
          note = (e as Error).message;
        }
        const pollers = await workersPolling(s).catch(() => -1);
        if (progress) {
          if (o.json) out(JSON.stringify({ answeredBy: 'workflow', workersPolling: pollers, ...progress }));
          else {
            out(formatProgress(progress));
            if (pollers === 0) out(`warning: no worker polls task queue ${s.taskQueue}`);
          }
          return;
        }
        const fromDb = await withCatalogPool((pool) => catalogStatusFromDatabase(pool, o.catalog));
        if (o.json) out(JSON.stringify({ answeredBy: 'database', workersPolling: pollers, queryError: note, ...fromDb }));
        else {
          out(`no answer from the workflow (${note}); from the catalog database:`);
          out(JSON.stringify(fromDb, null, 2));
          if (pollers === 0) out(`warning: no worker polls task queue ${s.taskQueue}`);
        }
      }),
    );

  program
    .command('wait')
    .description('wait for the rebuild to end; exit 0 when published, 1 otherwise')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .action(async (o) =>
      withTemporal(async (s) => {
        const code = await waitAndReport(s, o.catalog, out);
        if (code) throw new ExitCode(code);
      }),
    );

  for (const [name, desc, fn] of [
    ['pause', 'stop starting pages; pages in flight finish', pause],
    ['resume', 'continue from the checkpoint', resume],
    ['cancel', 'end the rebuild; its version is abandoned, the active version stays', (h: Parameters<typeof pause>[0]) => cancel(h, 'cancelled from the CLI')],
  ] as const) {
    program
      .command(name)
      .description(desc)
      .requiredOption('--catalog <name>', 'catalog', catalogName)
      .action(async (o) =>
        withTemporal(async (s) => {
          await fn(rebuildHandle(s.client, o.catalog));
          out(`${name} sent to ${rebuildHandle(s.client, o.catalog).workflowId}`);
        }),
      );
  }

  program
    .command('throttle')
    .description('change pages in flight and the pause between pages of a running rebuild')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option('--concurrency <n>', 'pages in flight', intOption('--concurrency', LIMITS.concurrency.min, LIMITS.concurrency.max))
    .option('--pause-ms <n>', 'pause between page starts (ms)', intOption('--pause-ms', LIMITS.pauseBetweenPagesMs.min, LIMITS.pauseBetweenPagesMs.max))
    .action(async (o) => {
      if (o.concurrency === undefined && o.pauseMs === undefined) throw new ExitCode(2, 'throttle needs --concurrency and/or --pause-ms');
      await withTemporal(async (s) => {
        const r = await setThrottle(rebuildHandle(s.client, o.catalog), { concurrency: o.concurrency, pauseBetweenPagesMs: o.pauseMs });
        out(`throttle: ${r.concurrency} pages in flight, ${r.pauseBetweenPagesMs} ms between pages`);
      });
    });

  program
    .command('events')
    .description('print the catalog\'s event log')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option('--limit <n>', 'newest N events', intOption('--limit', 1, 100000), 50)
    .option('--json', 'JSON lines', false)
    .action(async (o) =>
      withCatalogPool(async (pool) => {
        const { rows } = await pool.query(
          `SELECT * FROM (SELECT event_id, created_at, version_id::text, kind, message, details FROM event
             WHERE catalog_name = $1 ORDER BY event_id DESC LIMIT $2) e ORDER BY event_id`,
          [o.catalog, o.limit],
        );
        for (const r of rows) out(o.json ? JSON.stringify(r) : `${(r.created_at as Date).toISOString()}  v${r.version_id ?? '-'}  ${r.kind.padEnd(12)} ${r.message}`);
      }),
    );

  program
    .command('migrate')
    .description('apply the catalog schema migrations')
    .action(async () =>
      withCatalogPool(async (pool) => {
        const done = await migrate(pool);
        out(done.length ? `applied migrations ${done.join(', ')}` : 'catalog schema is current');
      }),
    );

  return program;
}

/**
 * Runs the CLI with `argv` (without node and script) and returns the exit code.
 */
export async function runCli(argv: string[], out?: (s: string) => void, err?: (s: string) => void): Promise<number> {
  const e = err ?? ((s: string) => console.error(s));
  const program = buildCli(out, e);
  if (!argv.length) {
    program.outputHelp();
    return 2;
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (x) {
    if (x instanceof CommanderError) {
      if (x.code === 'commander.helpDisplayed' || x.code === 'commander.version' || x.exitCode === 0) return 0;
      return 2;
    }
    if (x instanceof ExitCode) {
      if (x.message) e(`catalog-rebuild: ${x.message}`);
      return x.code;
    }
    e(`catalog-rebuild: ${(x as Error).message ?? String(x)}`);
    return 1;
  }
}

if (require.main === module) {
  runCli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (x) => {
      console.error(x);
      process.exit(1);
    },
  );
}
