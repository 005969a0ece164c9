/** The `schedule` command's declaration (commander), beside the others of client/cli.ts. */
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { CATALOG_NAME_PATTERN } from '../workflows/names';
import type { CommandContext } from './commands/context';
import { ExitCode } from './commands/context';

/** Declares `schedule` on `program`. */
export function addSchedule(program: Command, ctx: CommandContext): void {
  program
    .command('schedule')
    .description(
      'refresh a catalog on a Temporal Schedule (id catalog-rebuild/<catalog>): create or update it, --list, --describe, --delete',
    )
    .option('--catalog <name>', 'catalog', (v: string) => {
      if (!CATALOG_NAME_PATTERN.test(v))
        throw new InvalidArgumentError('catalog names use letters, digits, _ . - (at most 63)');
      return v;
    })
    .option('--source <name>', 'source name from the worker configuration')
    .option('--every <duration>', 'run every D (s, m, h, d; at least 1m), e.g. 1h')
    .option('--cron <expression>', 'run at the times of a cron expression (UTC unless CRON_TZ=…), e.g. "0 2 * * *"')
    .option('--files', "refresh each job's file records too", false)
    .option('--list', "list every catalog's schedule", false)
    .option('--describe', "show the catalog's schedule: state, next runs, recent results", false)
    .option('--delete', "delete the catalog's schedule (running refreshes keep running)", false)
    .option('--json', 'with --list or --describe: one JSON value', false)
    .action(async (o) => {
      const code = await (await import('./commands/schedule')).scheduleCommand(ctx, o);
      if (code) throw new ExitCode(code);
    });
}
