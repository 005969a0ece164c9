/**
 * A previous release of catalog-rebuild for compatibility tests: its tree taken from this clone's
 * git history (`git archive`), this project's `node_modules` linked in, its product compiled with
 * its own `tsconfig.build.json` and its workflow bundle written by its own `build-bundle`. The build
 * is cached under the OS temporary folder, keyed by the commit and this project's dependencies, so
 * only the first run pays for it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { projectRoot } from '../../lib/paths';

/**
 * The previous release: commit f389c7f ("The status fallback's version shape derives from the
 * data-access type"), the last release before the streaming page path.
 */
export const PREVIOUS_RELEASE = 'f389c7fc23657972e2a618bed378e11ba8329848';

/** A built release tree. */
export interface ReleaseBuild {
  /** Full commit hash. */
  commit: string;
  /** The tree: `dist/worker/main.js` (worker), `bin/catalog-rebuild.js` (CLI), `migrations/`. */
  dir: string;
  /** True when an earlier run's build was reused. */
  cached: boolean;
  /** Wall time of this call (ms). */
  ms: number;
  /** Each build step and its wall time (`tsc 30512 ms`); empty when cached. */
  steps: string[];
}

/**
 * Why `commit` cannot be built from the git repository at `repo` (default this project), or null
 * when it can: no git, not a repository (e.g. an unpacked archive), or the commit is not in this
 * clone (a shallow clone: `git fetch --unshallow` brings it).
 */
export function releaseUnavailableReason(commit: string, repo: string = projectRoot()): string | null {
  const git = (args: string[]) => spawnSync('git', ['-C', repo, ...args], { encoding: 'utf8' });
  const inside = git(['rev-parse', '--is-inside-work-tree']);
  if (inside.error) return `git is not available (${inside.error.message}), so release ${commit} cannot be built`;
  if (inside.status !== 0) return `${repo} is not a git repository, so release ${commit} cannot be built`;
  if (git(['cat-file', '-e', `${commit}^{commit}`]).status === 0) return null;
  const shallow = git(['rev-parse', '--is-shallow-repository']).stdout.trim() === 'true';
  return (
    `commit ${commit} (the previous release) is not in this clone` +
    (shallow ? ' (a shallow clone: run `git fetch --unshallow` to test against it)' : '')
  );
}

/** Runs `cmd args` in `cwd`; rejects with its output when it fails. */
function run(cmd: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} ended with ${code ?? signal}:\n${out}`)),
    );
  });
}

/** This project's `node_modules` (its real path) and a short key of it and of package-lock.json. */
function dependencies(): { nodeModules: string; key: string } {
  const nodeModules = fs.realpathSync(path.join(projectRoot(), 'node_modules'));
  const lock = fs.readFileSync(path.join(projectRoot(), 'package-lock.json'));
  const key = createHash('sha256').update(nodeModules).update('\0').update(lock).digest('hex').slice(0, 12);
  return { nodeModules, key };
}

/** Marker file written last into a complete build. */
const BUILT = '.release-built';

/** Renames the complete build `work` to `dir`; when a concurrent run got there first, keeps its copy. */
function moveIntoPlace(work: string, dir: string): void {
  try {
    fs.renameSync(work, dir);
  } catch (err) {
    if (fs.existsSync(path.join(dir, BUILT))) {
      fs.rmSync(work, { recursive: true, force: true });
      return;
    }
    if (!fs.existsSync(dir)) throw err;
    fs.rmSync(dir, { recursive: true, force: true }); // an incomplete build left by a killed run
    fs.renameSync(work, dir);
  }
}

/**
 * The build of release `commit` (see {@link releaseUnavailableReason} first): reused from
 * `<os tmp>/catalog-rebuild-release-<commit>-<deps key>` when complete, otherwise built in a folder
 * of its own and renamed into place (a concurrent run builds its own copy; the first rename wins).
 * @throws Error naming the failed step (git archive, tar, tsc, build-bundle) and its output.
 */
export async function buildRelease(commit: string): Promise<ReleaseBuild> {
  const t0 = Date.now();
  const deps = dependencies();
  const dir = path.join(os.tmpdir(), `catalog-rebuild-release-${commit}-${deps.key}`);
  if (fs.existsSync(path.join(dir, BUILT))) return { commit, dir, cached: true, ms: Date.now() - t0, steps: [] };
  const work = `${dir}.build-${process.pid}-${randomBytes(3).toString('hex')}`;
  fs.mkdirSync(work, { recursive: true });
  const steps: string[] = [];
  const timed = async (what: string, cmd: string, args: string[]) => {
    const s = Date.now();
    await run(cmd, args, work);
    steps.push(`${what} ${Date.now() - s} ms`);
  };
  try {
    const tar = path.join(work, 'release.tar');
    await timed('git archive', 'git', ['-C', projectRoot(), 'archive', '--format=tar', '-o', tar, commit]);
    await timed('tar', 'tar', ['-xf', tar, '-C', work]);
    fs.rmSync(tar);
    fs.symlinkSync(deps.nodeModules, path.join(work, 'node_modules'), 'dir');
    // The release's product build (its Dockerfile's): the product folders only, no dev/ or test/.
    // The release was type-checked when it was made; --noCheck emits the same JavaScript in less time.
    const tsc = path.join(deps.nodeModules, 'typescript/bin/tsc');
    await timed('tsc', process.execPath, [tsc, '-p', 'tsconfig.build.json', '--noCheck']);
    await timed('build-bundle', process.execPath, ['dist/worker/build-bundle.js']);
    fs.writeFileSync(path.join(work, BUILT), `${commit}\n`);
    moveIntoPlace(work, dir);
  } catch (err) {
    fs.rmSync(work, { recursive: true, force: true });
    throw err;
  }
  return { commit, dir, cached: false, ms: Date.now() - t0, steps };
}
