/**
 * gen-bareos: fills a PostgreSQL database with a deterministic, realistic Bareos director
 * catalog (client, pool, fileset, job; with --files also file, path and version), for tests, demos
 * and benches.
 *
 *   node dist/dev/gen-bareos.js --jobs 200000 [--seed 1] [--database URL]
 *        [--end-date YYYY-MM-DD | --end-time 'YYYY-MM-DD HH:MM:SS'] [--clients 40] [--files N]
 *
 * The database defaults to $DATABASE_URL and is created (via the `postgres` database of the
 * same server) when it does not exist. Prints a one-line summary; exits 1 on any error.
 */
import { Command, InvalidArgumentError } from 'commander';
import { Client } from 'pg';
import format from 'pg-format';
import { generateBareosSource } from './bareos-generator';

/** Commander parser for an integer option value at least `min`. */
function integerAtLeast(min: number): (value: string) => number {
  return (value: string): number => {
    if (!/^-?\d+$/.test(value.trim())) throw new InvalidArgumentError('not an integer.');
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`must be an integer >= ${min}.`);
    return n;
  };
}

function parseDate(value: string): string {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) throw new InvalidArgumentError('expected YYYY-MM-DD.');
  return value;
}

function parseTime(value: string): string {
  if (!/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/.test(value))
    throw new InvalidArgumentError("expected 'YYYY-MM-DD HH:MM:SS'.");
  return value;
}

/** Creates the database named in `databaseUrl` unless it exists (via the `postgres` database). */
async function ensureDatabase(databaseUrl: string): Promise<void> {
  const probe = new Client({ connectionString: databaseUrl, application_name: 'catalog-rebuild-gen' });
  try {
    await probe.connect();
    return;
  } catch (err) {
    if ((err as { code?: unknown }).code !== '3D000') throw err; // anything but "database does not exist"
  } finally {
    await probe.end().catch(() => undefined);
  }
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) throw new Error(`cannot create a database: no database name in the URL`);
  url.pathname = '/postgres';
  const admin = new Client({ connectionString: url.toString(), application_name: 'catalog-rebuild-gen' });
  await admin.connect();
  try {
    await admin.query(format('CREATE DATABASE %I', name));
    console.error(`created database ${name}`);
  } catch (err) {
    if ((err as { code?: unknown }).code !== '42P04') throw err; // created meanwhile by someone else
  } finally {
    await admin.end();
  }
}

async function main(): Promise<void> {
  const program = new Command()
    .name('gen-bareos')
    .description(
      'Fill a PostgreSQL database with a deterministic Bareos director catalog (client, pool, fileset, job).',
    )
    .requiredOption('--jobs <n>', 'exact number of job rows (integer >= 1)', integerAtLeast(1))
    .option('--seed <n>', 'PRNG seed (integer >= 0)', integerAtLeast(0), 1)
    .option('--database <url>', 'PostgreSQL URL of the target database (default: $DATABASE_URL)')
    .option('--end-date <YYYY-MM-DD>', 'last day of the history (default 2026-11-01)', parseDate)
    .option(
      '--end-time <YYYY-MM-DD HH:MM:SS>',
      'end of a recent history instead (director wall clock): every client backed up successfully in the 24 h before it',
      parseTime,
    )
    .option('--clients <n>', 'number of clients (default 40)', integerAtLeast(1))
    .option(
      '--files <n>',
      'also File/Path/Version (Bareos schema 2230) with this many file records in all; JobFiles is scaled to match',
      integerAtLeast(0),
    )
    .showHelpAfterError();
  program.parse(process.argv);
  const opts = program.opts<{
    jobs: number;
    seed: number;
    database?: string;
    endDate?: string;
    endTime?: string;
    clients?: number;
    files?: number;
  }>();

  const databaseUrl = opts.database ?? process.env.DATABASE_URL;
  if (!databaseUrl) {
    throw new Error('no target database: pass --database <url> or set DATABASE_URL');
  }
  const t0 = process.hrtime.bigint();
  await ensureDatabase(databaseUrl);
  const r = await generateBareosSource({
    databaseUrl,
    jobs: opts.jobs,
    seed: opts.seed,
    endDate: opts.endDate,
    endTime: opts.endTime,
    clients: opts.clients,
    files: opts.files,
  });
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(
    `jobs=${r.jobs} maxJobId=${r.maxJobId} clients=${r.clients} firstStart=${r.firstStart ?? '-'} ` +
      `lastStart=${r.lastStart ?? '-'}` +
      (r.files
        ? ` files=${r.files.files} paths=${r.files.paths} jobsWithFiles=${r.files.jobsWithFiles} largestJob=${r.files.largestJob}`
        : '') +
      ` seconds=${seconds.toFixed(2)}`,
  );
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
