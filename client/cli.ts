/**
 * `catalog-rebuild` command line: a thin commander layer (commands, options, help, exit codes) over
 * the handlers in `client/commands/`, which work on a {@link CommandContext}.
 * Exit codes: 0 success, 1 failure (including "finished but not published"), 2 usage error;
 * `check` follows Nagios (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, and 3 for its own usage and
 * internal errors); `status --follow` ends like `wait` (0 published, 1 otherwise).
 */
// The handlers of commands that talk to Temporal are loaded when their command runs (`import()` in
// the actions): a command that reads only the catalog database never loads @temporalio/client.
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { LIMITS } from '../workflows/policies';
import { CATALOG_NAME_PATTERN } from '../workflows/names';
import {
  DEFAULT_LOOKBACK_SECONDS,
  DEFAULT_MAX_AGE_SECONDS,
  formatDuration,
  NagiosState,
  parseDuration,
  unknownLine,
} from './check';
import type { CommandContext } from './commands/context';
import { ExitCode, processContext } from './commands/context';
import { rebuildUnknownLine } from './rebuild-health';
import { checkUnknownOptionsFirst } from './required-options';
import type { SignalName } from './commands/signals';
import { eventsCommand } from './commands/events';
import { rejectsCommand } from './commands/rejects';
import { rollbackCommand } from './commands/rollback';
import { migrateCommand } from './commands/migrate';
import { addSchedule } from './schedule-cli';
import {
  FIND_DEFAULT_LIMIT,
  filesCommand,
  findCommand,
  findPatternProblem,
  parsePathHex,
  pathArgsFromRawBytes,
} from './commands/files';

export { ExitCode } from './commands/context';
export { endProcess, quietOnClosedPipe, rawArgv } from './process-io';

function intOption(name: string, min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

function catalogName(value: string): string {
  if (!CATALOG_NAME_PATTERN.test(value))
    throw new InvalidArgumentError('catalog names use letters, digits, _ . - (at most 63)');
  return value;
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
  if (
    !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/.test(value) ||
    Number.isNaN(Date.parse(value))
  ) {
    throw new InvalidArgumentError('--now must be an ISO 8601 time with a zone, e.g. 2026-11-01T20:00:00Z');
  }
  return value;
}

/** Commander action running a handler: a non-zero exit code it returns ends the CLI with that code. */
function run<O>(handler: (o: O) => Promise<number>): (o: O) => Promise<void> {
  return async (o) => {
    const code = await handler(o);
    if (code) throw new ExitCode(code);
  };
}

function addStart(program: Command, ctx: CommandContext, err: (s: string) => void): void {
  const start = program
    .command('start')
    .description(
      'check that a worker serves the source, start a rebuild (or attach to the running one of this catalog) and print its receipt once planned',
    )
    .requiredOption('--catalog <name>', 'catalog to rebuild', catalogName)
    .requiredOption('--source <name>', 'source name from the worker configuration')
    .option(
      '--page-size <n>',
      `jobs per page (${LIMITS.pageSize.min}..${LIMITS.pageSize.max}); without it the plan sizes pages from measured cost`,
      intOption('--page-size', LIMITS.pageSize.min, LIMITS.pageSize.max),
    )
    .option(
      '--concurrency <n>',
      `pages in flight (${LIMITS.concurrency.min}..${LIMITS.concurrency.max})`,
      intOption('--concurrency', LIMITS.concurrency.min, LIMITS.concurrency.max),
      LIMITS.concurrency.default,
    )
    .option(
      '--files',
      "rebuild each job's file records too (Bareos/Bacula File and Path; restic/borg listings with a filesCommand)",
      false,
    )
    .option(
      '--refresh',
      'build the next version from the active one plus what changed in the source since it (a full rebuild when it cannot, saying why)',
      false,
    )
    .addOption(
      new Option(
        '--verify <mode>',
        "full: an independent check that re-reads every job and file record and hashes the catalog's rows (with --refresh: a full rebuild instead)",
      ).choices(['full']),
    )
    .option(
      '--dry-run',
      'print what the rebuild would do (jobs new, changed, gone; pages; file records; an estimate) and change nothing',
      false,
    )
    .option('--allow-shrink', 'publish even if buckets shrank beyond the shrink guard', false)
    .option(
      '--retention <n>',
      'retired versions kept with their rows after the publish',
      intOption('--retention', 0, 100),
      1,
    )
    .addOption(
      new Option('--max-pages-per-run <n>', 'pages per run before continue-as-new')
        .argParser(intOption('--max-pages-per-run', 1, 5000))
        .hideHelp(),
    )
    .addOption(
      new Option('--heartbeat-timeout-ms <n>', 'page heartbeat timeout (ms)')
        .argParser(intOption('--heartbeat-timeout-ms', 1000, 600000))
        .hideHelp(),
    )
    .option('--wait', 'wait for the rebuild to end; exit 1 unless published', false)
    .option('--json', 'print the receipt as one JSON object', false);
  // A dry run changes nothing: the options only a rebuild uses are usage errors with it.
  for (const opt of start.options)
    if (['wait', 'allowShrink', 'retention'].includes(opt.attributeName())) opt.conflicts('dryRun');
  start.action(run(async (o) => (await import('./commands/start')).startCommand(ctx, o, err)));
}

function addStatus(program: Command, ctx: CommandContext): void {
  program
    .command('status')
    .description("show a rebuild's progress (from the workflow, else from the catalog database)")
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option('--json', 'print JSON for scripts', false)
    .option('--follow', 'live progress until the rebuild ends; exit 0 when published, 1 otherwise', false)
    .addOption(
      new Option('--stall-after <duration>', 'warn when no page committed for this long')
        .argParser(durationOption())
        .default(600, '10m')
        .hideHelp(),
    )
    .action(run(async (o) => (await import('./commands/status')).statusCommand(ctx, o)));
}

/** `check`: the Nagios/Icinga backup check; with `--rebuild`, the health check of the latest rebuild. */
function addCheck(program: Command, ctx: CommandContext): void {
  program
    .command('check')
    .description(
      'Nagios/Icinga backup check on the active catalog version (--rebuild: on the latest rebuild): exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN',
    )
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option('--rebuild', "check the latest rebuild's health instead of the active version", false)
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
    .option(
      '--client <name>',
      'check this client (repeatable); default: every client with a backup in the lookback',
      collect,
    )
    .addOption(
      new Option('--timeout <duration>', 'give up (UNKNOWN) after this long')
        .argParser(durationOption())
        .default(30, '30s'),
    )
    .addOption(
      new Option('--now <iso>', "reference time instead of the database's now()").argParser(isoTime).hideHelp(),
    )
    .action(run(async (o) => (await import('./commands/check')).checkCommand(ctx, o)));
}

/** `wait`, `pause`, `resume`, `cancel`, `throttle`: commands on a running rebuild. */
function addControlCommands(program: Command, ctx: CommandContext): void {
  program
    .command('wait')
    .description('wait for the rebuild to end; exit 0 when published, 1 otherwise')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .action(run(async (o) => (await import('./commands/wait')).waitCommand(ctx, o)));

  const signals: [SignalName, string][] = [
    ['pause', 'stop starting pages; pages in flight finish'],
    ['resume', 'continue from the checkpoint'],
    ['cancel', 'end the rebuild; its version is abandoned, the active version stays'],
  ];
  for (const [name, desc] of signals) {
    program
      .command(name)
      .description(desc)
      .requiredOption('--catalog <name>', 'catalog', catalogName)
      .action(run(async (o) => (await import('./commands/signals')).signalCommand(ctx, name, o)));
  }

  program
    .command('throttle')
    .description('change pages in flight and the pause between pages of a running rebuild')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option(
      '--concurrency <n>',
      'pages in flight',
      intOption('--concurrency', LIMITS.concurrency.min, LIMITS.concurrency.max),
    )
    .option(
      '--pause-ms <n>',
      'pause between page starts (ms)',
      intOption('--pause-ms', LIMITS.pauseBetweenPagesMs.min, LIMITS.pauseBetweenPagesMs.max),
    )
    .action(run(async (o) => (await import('./commands/throttle')).throttleCommand(ctx, o)));
}

/** `events`, `rollback`, `migrate`: commands on the catalog database. */
function addCatalogCommands(program: Command, ctx: CommandContext): void {
  program
    .command('events')
    .description("print the catalog's event log")
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option('--limit <n>', 'newest N events', intOption('--limit', 1, 100000), 50)
    .option('--json', 'JSON lines', false)
    .action(run((o) => eventsCommand(ctx, o)));

  program
    .command('rejects')
    .description("list a version's quarantined records with their reasons (default: the active version)")
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option('--version <n>', 'version id (default: the active one, else the newest with rejects)', (v: string) => {
      if (!/^[1-9]\d{0,18}$/.test(v))
        throw new InvalidArgumentError('--version must be a version id (a positive integer)');
      return v;
    })
    .option('--json', 'one JSON array', false)
    .action(run((o) => rejectsCommand(ctx, o)));

  program
    .command('rollback')
    .description(
      'one step back: re-activate the newest retained version older than the active one (one transaction, under the publish lock); each rollback goes one further back',
    )
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option(
      '--to-version <n>',
      're-activate this retained version instead (older or newer: the way back after a rollback)',
      intOption('--to-version', 1, Number.MAX_SAFE_INTEGER),
    )
    .action(run((o) => rollbackCommand(ctx, o)));

  program
    .command('migrate')
    .description('apply the catalog schema migrations')
    .action(run(() => migrateCommand(ctx)));
}

/** `files`, `find`: file records of the active catalog version (`active_files`). */
function addFileCommands(program: Command, ctx: CommandContext, err: (s: string) => void): void {
  const limit = intOption('--limit', 1, 1_000_000);
  program
    .command('files')
    .description("list a job's file records in the active version (rebuilt with --files)")
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .requiredOption('--job <id>', 'job id, as active_jobs.job_id shows it', (v: string) => {
      if (!v.trim()) throw new InvalidArgumentError('--job needs a job id');
      return v;
    })
    .option('--limit <n>', 'at most N file records (default: all of the job)', limit)
    .option('--deleted', 'also the records the job did not save (FileIndex <= 0), marked deleted', false)
    .option('--json', 'one JSON array', false)
    .action(run((o) => filesCommand(ctx, o, err)));

  program
    .command('find')
    .description('which jobs hold a path, newest job first: PATTERN is an exact path+name or a prefix ending in *')
    .requiredOption('--catalog <name>', 'catalog', catalogName)
    .option('--path <pattern>', 'exact path+name (/etc/hosts) or a prefix ending in * (/home/alice/*)', (v: string) => {
      const problem = findPatternProblem(v);
      if (problem) throw new InvalidArgumentError(problem);
      return v;
    })
    .option(
      '--path-hex <hex>',
      'the path+name as the hex of its bytes, * at the end for a prefix (a name not in UTF-8, e.g. 2f6574632f636166e9)',
      (v: string) => {
        try {
          parsePathHex(v);
        } catch (e) {
          throw new InvalidArgumentError((e as Error).message);
        }
        return v;
      },
    )
    .option('--limit <n>', 'at most N hits', limit, FIND_DEFAULT_LIMIT)
    .option('--deleted', 'also records their job did not save (FileIndex <= 0), marked deleted', false)
    .option('--json', 'one JSON array', false)
    .action(run((o) => findCommand(ctx, o, err)));
}

/**
 * Builds the command tree (the help lists the commands in this order). `out` receives normal
 * output, `err` diagnostics; `ctx` defaults to this process's Temporal and catalog database.
 */
export function buildCli(
  out: (s: string) => void = (s) => console.log(s),
  err: (s: string) => void = (s) => console.error(s),
  ctx: CommandContext = processContext(out),
): Command {
  const program = new Command('catalog-rebuild')
    .description('Rebuild a backup catalog as a durable Temporal workflow; publish it atomically.')
    .exitOverride()
    .configureOutput({ writeOut: (s) => out(s.trimEnd()), writeErr: (s) => err(s.trimEnd()) })
    .showHelpAfterError();
  addStart(program, ctx, err);
  addSchedule(program, ctx);
  addStatus(program, ctx);
  addCheck(program, ctx);
  addControlCommands(program, ctx);
  addCatalogCommands(program, ctx);
  addFileCommands(program, ctx, err);
  checkUnknownOptionsFirst(program);
  return program;
}

/**
 * Runs the CLI with `userArgv` (without node and script) and returns the exit code; the executable
 * `bin/catalog-rebuild.js` exits with it once its output has drained. Diagnostics go to `err` as
 * `catalog-rebuild: <message>`. `raw` are the same arguments as the operating system's bytes
 * (client/process-io.ts `rawArgv`): a `find --path` that is not UTF-8 is looked up by its bytes.
 */
export async function runCli(
  userArgv: string[],
  out?: (s: string) => void,
  err?: (s: string) => void,
  raw?: Buffer[],
): Promise<number> {
  const e = err ?? ((s: string) => console.error(s));
  const o = out ?? ((s: string) => console.log(s));
  const program = buildCli(o, e);
  const argv = pathArgsFromRawBytes(userArgv, raw);
  if (!argv.length) {
    program.outputHelp();
    return 2;
  }
  // `check` is a Nagios plugin: its own usage and internal errors are UNKNOWN (3), never 2.
  const isCheck = argv[0] === 'check';
  const checkUnknown = isCheck && argv.includes('--rebuild') ? rebuildUnknownLine : unknownLine;
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (x) {
    if (x instanceof CommanderError) {
      if (x.code === 'commander.helpDisplayed' || x.code === 'commander.version' || x.exitCode === 0) return 0;
      if (isCheck) {
        o(checkUnknown(`usage: ${x.message.replace(/^error: /, '')}`));
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
      o(checkUnknown(`internal error: ${(x as Error).message ?? String(x)}`));
      return NagiosState.UNKNOWN;
    }
    return 1;
  }
}
