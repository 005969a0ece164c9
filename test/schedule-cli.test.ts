/**
 * `catalog-rebuild schedule` usage, without services: every malformed request exits 2 with a
 * message naming what is wrong, before any connection to Temporal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runCli } from '../client/cli';

/** Runs the CLI in-process against a closed port, so any connection attempt would exit 1, not 2. */
async function run(args: string[]): Promise<{ code: number; err: string }> {
  const saved = process.env.TEMPORAL_ADDRESS;
  process.env.TEMPORAL_ADDRESS = '127.0.0.1:1';
  const err: string[] = [];
  try {
    const code = await runCli(
      args,
      () => undefined,
      (s) => err.push(s),
    );
    return { code, err: err.join('\n') };
  } finally {
    if (saved === undefined) delete process.env.TEMPORAL_ADDRESS;
    else process.env.TEMPORAL_ADDRESS = saved;
  }
}

test('schedule usage errors exit 2 naming the problem, before any connection', async () => {
  const cases: [string[], RegExp][] = [
    [['schedule', '--catalog', 'c', '--source', 'd'], /give exactly one of --every and --cron/],
    [['schedule', '--catalog', 'c', '--source', 'd', '--every', '1h', '--cron', '0 2 * * *'], /exactly one/],
    [['schedule', '--catalog', 'c', '--source', 'd', '--every', '30s'], /--every must be at least 1m/],
    [['schedule', '--catalog', 'c', '--source', 'd', '--every', '1x'], /invalid duration "1x"/],
    [['schedule', '--catalog', 'c', '--source', 'd', '--cron', 'daily'], /cron expression of 5 to 7 fields/],
    [['schedule', '--catalog', 'c', '--every', '1h'], /needs a source name/],
    [['schedule', '--source', 'd', '--every', '1h'], /schedule needs --catalog/],
    [['schedule', '--describe'], /schedule --describe needs --catalog/],
    [['schedule', '--list', '--delete', '--catalog', 'c'], /give only one of --list, --delete/],
    [['schedule', '--catalog', 'no/slash', '--list'], /catalog names use letters/],
  ];
  for (const [args, message] of cases) {
    const r = await run(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.err}`);
    assert.match(r.err, message, args.join(' '));
  }
});
