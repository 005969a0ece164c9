/**
 * `npm run check:fresh`: a fresh clone of this repository in a temporary folder passes
 * `npm ci && npm test` (issue 8 test 5). Clones the committed HEAD of the project root with
 * `git clone`, then runs `npm ci` and `npm test` there with their output streamed, and exits with
 * their exit code. Not part of `npm test` (it runs the whole suite again and takes minutes).
 *
 * Options:
 *   --working-tree  also copy this working tree's uncommitted changes (modified and untracked,
 *                   not ignored, files; deletions) into the clone: checks what is about to be committed
 *   --keep          keep the clone (it is always kept when a step fails)
 *   --keep-env      keep DATABASE_URL, TEMPORAL_CLI_PATH, TEMPORAL_ADDRESS, CATALOG_* ... (by default
 *                   they are removed, as on a machine where nothing is configured)
 *   any other arguments are passed to `npm test` (test file name filters)
 */
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { projectRoot } from '../lib/paths';

/** Variables a fresh machine would not have; removed unless --keep-env. */
const PROJECT_VARS = /^(DATABASE_URL|CATALOG_DATABASE_URL|CATALOG_REBUILD_.*|TEMPORAL_.*|npm_.*)$/;

function say(line: string): void {
  console.log(`[check:fresh] ${line}`);
}

function git(args: string[], cwd: string): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Runs a command with inherited stdio; resolves with its exit code (128 + n for a signal). */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve) => {
    say(`$ ${[cmd, ...args].join(' ')}   (in ${cwd})`);
    const child = spawn(cmd, args, { cwd, env, stdio: 'inherit' });
    const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
    const onInt = forward('SIGINT');
    const onTerm = forward('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
    child.on('error', (err) => {
      say(`${cmd} could not start: ${err.message}`);
      resolve(127);
    });
    child.on('exit', (code, signal) => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      resolve(code ?? 128 + (signal ? os.constants.signals[signal] : 0));
    });
  });
}

/** Copies the working tree's uncommitted changes (read-only git commands only) into `clone`. */
function overlayWorkingTree(root: string, clone: string): void {
  const z = (args: string[]) => git(args, root).split('\0').filter(Boolean);
  const changed = [
    ...new Set([...z(['ls-files', '-z', '--modified']), ...z(['ls-files', '-z', '--others', '--exclude-standard'])]),
  ];
  const deleted = new Set(z(['ls-files', '-z', '--deleted']));
  let copied = 0;
  for (const rel of changed) {
    if (deleted.has(rel)) continue;
    const src = path.join(root, rel);
    if (!fs.existsSync(src) || fs.statSync(src).isDirectory()) continue;
    fs.mkdirSync(path.dirname(path.join(clone, rel)), { recursive: true });
    fs.copyFileSync(src, path.join(clone, rel));
    copied++;
  }
  for (const rel of deleted) fs.rmSync(path.join(clone, rel), { force: true });
  say(`copied ${copied} uncommitted file(s) and removed ${deleted.size} deleted file(s) from the working tree`);
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const flags = new Set(argv.filter((a) => a.startsWith('--')));
  const testArgs = argv.filter((a) => !a.startsWith('--'));
  for (const f of flags)
    if (!['--working-tree', '--keep', '--keep-env'].includes(f)) {
      console.error(`check:fresh: unknown option ${f} (options: --working-tree, --keep, --keep-env)`);
      return 2;
    }
  const root = projectRoot();
  const head = git(['rev-parse', '--short', 'HEAD'], root).trim();
  const dirty = git(['status', '--porcelain'], root).trim();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-fresh-'));
  const clone = path.join(tmp, 'catalog-rebuild');
  const started = Date.now();

  say(`cloning ${root} (HEAD ${head}) into ${clone}`);
  if (dirty && !flags.has('--working-tree'))
    say(
      'note: the working tree has uncommitted changes; they are NOT in the clone (use --working-tree to include them)',
    );
  try {
    git(['clone', '--quiet', '--no-hardlinks', root, clone], tmp);
  } catch (err) {
    console.error(`check:fresh: git clone failed: ${(err as { stderr?: string }).stderr || (err as Error).message}`);
    return 1;
  }
  if (flags.has('--working-tree')) overlayWorkingTree(root, clone);

  const env: NodeJS.ProcessEnv = {};
  const removed: string[] = [];
  for (const [k, v] of Object.entries(process.env)) {
    if (!flags.has('--keep-env') && PROJECT_VARS.test(k)) {
      if (!k.startsWith('npm_')) removed.push(k);
      continue;
    }
    env[k] = v;
  }
  if (removed.length) say(`not passed to the clone (as on a fresh machine): ${removed.sort().join(', ')}`);

  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  let code = await run(npm, ['ci'], clone, env);
  const ciSeconds = Math.round((Date.now() - started) / 1000);
  if (code === 0) code = await run(npm, ['test', ...(testArgs.length ? ['--', ...testArgs] : [])], clone, env);
  const total = Math.round((Date.now() - started) / 1000);
  if (code === 0) {
    say(
      `PASS: a fresh clone of ${head}${flags.has('--working-tree') ? ' + working tree' : ''} passes npm ci (${ciSeconds} s) && npm test (${total} s in all)`,
    );
    if (!flags.has('--keep')) fs.rmSync(tmp, { recursive: true, force: true });
    else say(`clone kept in ${clone}`);
  } else {
    say(`FAIL (exit ${code}) after ${total} s; the clone is kept in ${clone}`);
  }
  return code;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(`check:fresh: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
