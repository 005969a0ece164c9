/**
 * `catalog-rebuild` command line: a thin commander layer over the client library.
 * Exit codes: 0 success, 1 failure (including "finished but not published"), 2 usage error;
 * `check` follows Nagios (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, and 3 for its own usage and
 * internal errors); `status --follow` ends like `wait` (0 published, 1 otherwise).
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
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
} from './index';
import { LIMITS } from '../workflows/definitions';
import { CATALOG_NAME_PATTERN } from '../workflows/names';
import { loadConfig } from '../lib/config';
import { createPool, migrate } from '../lib/db';
import { rollbackCatalog } from '../lib/rollback';
import { catalogStatusFromDatabase, followStatus, formatProgress, livePollers, LIVE_POLLER_WINDOW_SECONDS } from './status';
import { checkCatalog, DEFAULT_LOOKBACK_SECONDS, DEFAULT_MAX_AGE_SECONDS, formatDuration, NagiosState, parseDuration, unknownLine } from './check';

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
    out(`reconciliation: ${x.ok ? 'ok' : 'MISMATCH'}: ${x.buckets} buckets, source ${x.sourceRows} = catalog ${x.catalogRows}${x.rejects ? ` + ${x.rejects} quarantined` : ''}; delta after watermark ${x.delta}; duplicate job names ${x.duplicateJobNames}; sample ${x.sampled} checked, ${x.sampleMismatches} differ`);
  }
}

/**
 * Waits for the rebuild to close and describes the outcome: code 0 when published, 1 otherwise
 * (failed, cancelled, terminated, not published).
 */
async function rebuildOutcome(session: TemporalSession, catalog: string): Promise<{ code: number; lines: string[]; failure?: string }> {
  try {
    const r = await waitForResult(rebuildHandle(session.client, catalog));
    const lines: string[] = [];
    printResult(r, (l) => lines.push(l));
    return { code: r.published ? 0 : 1, lines };
  } catch (err) {
    if (err instanceof WorkflowFailedError) {
      let e: unknown = err;
      while (e instanceof Error && e.cause instanceof Error) e = e.cause;
      const failure = `rebuild of ${catalog} failed, not published: ${(e as Error).message}`;
      return { code: 1, lines: [failure], failure };
    }
    if (err instanceof WorkflowNotFoundError) throw new ExitCode(1, `no rebuild of catalog ${catalog} exists (workflow ${rebuildHandle(session.client, catalog).workflowId})`);
    throw err;
  }
}

async function waitAndReport(session: TemporalSession, catalog: string, out: (s: string) => void): Promise<number> {
  const r = await rebuildOutcome(session, catalog);
  if (r.failure) throw new ExitCode(r.code, r.failure);
  for (const l of r.lines) out(l);
  return r.code;
}

function durationOption() {
  return (value: string): number => {
    try {
      return parseDuration(value);
    } catch (e) {
      throw new InvalidArgumentError((e as Error).message);
    }
  };
}

function collect(value: string, previous: string[] | undefined): string[] {
  if (!value.trim()) throw new InvalidArgumentError('--client needs a non-empty client name');
  return [...(previous ?? []), value];
}

function isoTime(value: string): string {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/.test(value) || Number.isNaN(Date.parse(value))) {
    throw new InvalidArgumentError('--now must be an ISO 8601 time with a zone, e.g. 2026-11-01T20:00:00Z');
  }
  return value;
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
    .option('--retention <n>', 'retired versions kept with their rows after the publish', intOption('--retention', 0, 100), 1)
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
          retention: o.retention,
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
    .option('--follow', 'live progress until the rebuild ends; exit 0 when published, 1 otherwise', false)
    .addOption(new Option('--stall-after <duration>', 'warn when no page committed for this long').argParser(durationOption()).default(600, '10m').hideHelp())
    .action(async (o) => {
      if (o.follow && o.json) throw new ExitCode(2, '--follow and --json cannot be combined');
      await withTemporal(async (s) => {
        const handle = rebuildHandle(s.client, o.catalog);
        const pollers = async () => (await livePollers(s)).length;
        const noPollers = `no worker polled task queue ${s.taskQueue} in the last ${LIVE_POLLER_WINDOW_SECONDS} s`;
        if (o.follow) {
          let pool: Pool | null = null;
          try {
            const code = await followStatus(
              {
                query: () => getProgress(handle, 5_000),
                fromDatabase: () => {
                  pool ??= createPool(loadConfig().catalogDatabaseUrl, { applicationName: `catalog-rebuild:cli:${process.pid}`, max: 1 });
                  return catalogStatusFromDatabase(pool, o.catalog);
                },
                pollers,
                outcome: rebuildOutcome(s, o.catalog),
              },
              {
                catalog: o.catalog,
                taskQueue: s.taskQueue,
                out,
                tty: process.stdout.isTTY ? process.stdout : null,
                stallAfterMs: o.stallAfter * 1000,
              },
            );
            if (code) throw new ExitCode(code);
          } finally {
            await (pool as Pool | null)?.end().catch(() => undefined);
          }
          return;
        }
        let progress: RebuildProgress | null = null;
        let note = '';
        let notFound = false;
        try {
          progress = await getProgress(handle, 5_000);
        } catch (e) {
          note = (e as Error).message;
          notFound = e instanceof WorkflowNotFoundError || /workflow not found/i.test(note);
        }
        const workers = await pollers().catch(() => -1);
        if (progress) {
          if (o.json) out(JSON.stringify({ answeredBy: 'workflow', workersPolling: workers, ...progress }));
          else {
            out(formatProgress(progress));
            if (workers === 0) out(`warning: ${noPollers}`);
          }
          return;
        }
        const fromDb = await withCatalogPool((pool) => catalogStatusFromDatabase(pool, o.catalog));
        if (notFound && !fromDb.latest) {
          throw new ExitCode(1, `no rebuild of catalog ${o.catalog} has been started (no workflow ${handle.workflowId}, no version in the catalog database); start one with: catalog-rebuild start --catalog ${o.catalog} --source NAME`);
        }
        const why = notFound
          ? `no workflow ${handle.workflowId} on the Temporal service (its history may be past the namespace's retention); this is the catalog database's view of the latest version`
          : `no worker answered the progress query within 5 s (${note}); this is the catalog database's view of the latest version`;
        if (o.json) {
          out(JSON.stringify({ answeredBy: 'database', note: why, workersPolling: workers, queryError: note, ...fromDb }));
        } else {
          out(`${why}:`);
          out(JSON.stringify(fromDb, null, 2));
          if (workers === 0) out(`warning: ${noPollers}`);
        }
      });
    });

  program
    .command('check')
    .description('Nagios/Icinga backup check on the active catalog version: exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .addOption(
      new Option('--max-age <duration>', 'newest good backup of each client at most this old (s, m, h, d)')
        .argParser(durationOption())
        .default(DEFAULT_MAX_AGE_SECONDS, formatDuration(DEFAULT_MAX_AGE_SECONDS)),
    )
    .addOption(
      new Option('--lookback <duration>', 'clients with a backup job within this window are in scope')
        .argParser(durationOption())
        .default(DEFAULT_LOOKBACK_SECONDS, formatDuration(DEFAULT_LOOKBACK_SECONDS)),
    )
    .option('--client <name>', 'check this client (repeatable); default: every client with a backup in the lookback', collect)
    .addOption(new Option('--timeout <duration>', 'give up (UNKNOWN) after this long').argParser(durationOption()).default(30, '30s'))
    .addOption(new Option('--now <iso>', 'reference time instead of the database\'s now()').argParser(isoTime).hideHelp())
    .action(async (o) => {
      let config;
      try {
        config = loadConfig();
      } catch (e) {
        out(unknownLine((e as Error).message));
        throw new ExitCode(NagiosState.UNKNOWN);
      }
      const pool = createPool(config.catalogDatabaseUrl, {
        applicationName: `catalog-rebuild:check:${process.pid}`,
        max: 1,
        statementTimeoutMs: o.timeout * 1000,
      });
      let timer: NodeJS.Timeout | undefined;
      try {
        const timeout = new Promise<{ code: number; line: string }>((resolve) => {
          timer = setTimeout(() => resolve({ code: NagiosState.UNKNOWN, line: unknownLine(`no answer from the catalog database within ${o.timeout} s`) }), o.timeout * 1000);
        });
        const r = await Promise.race([
          checkCatalog(pool, { catalog: o.catalog, maxAgeSeconds: o.maxAge, lookbackSeconds: o.lookback, clients: o.client, now: o.now }),
          timeout,
        ]);
        out(r.line);
        if (r.code) throw new ExitCode(r.code);
      } finally {
        clearTimeout(timer);
        await pool.end().catch(() => undefined);
      }
    });

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
    .command('rollback')
    .description('re-activate the previous retained version (one transaction, under the publish lock)')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .action(async (o) =>
      withCatalogPool(async (pool) => {
        const r = await rollbackCatalog(pool, o.catalog);
        out(`catalog ${r.catalog}: version ${r.versionId} is active again; version ${r.replacedVersionId} retired`);
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
  const o = out ?? ((s: string) => console.log(s));
  const program = buildCli(o, e);
  if (!argv.length) {
    program.outputHelp();
    return 2;
  }
  // `check` is a Nagios plugin: its own usage and internal errors are UNKNOWN (3), never 2.
  const isCheck = argv[0] === 'check';
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (x) {
    if (x instanceof CommanderError) {
      if (x.code === 'commander.helpDisplayed' || x.code === 'commander.version' || x.exitCode === 0) return 0;
      if (isCheck) {
        o(unknownLine(`usage: ${x.message.replace(/^error: /, '')}`));
        return NagiosState.UNKNOWN;
      }
      return 2;
    }
    if (x instanceof ExitCode) {
      if (x.message) e(`catalog-rebuild: ${x.message}`);
      return x.code;
    }
    e(`catalog-rebuild: ${(x as Error).message ?? String(x)}`);
    if (isCheck) {
      o(unknownLine(`internal error: ${(x as Error).message ?? String(x)}`));
      return NagiosState.UNKNOWN;
    }
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
