/**
 * What a demo run started, in `.data/demo-state.json` of its checkout: the demo's own pid, the pids
 * of the workers it spawned and the rebuild it started. The next demo of the checkout stops only
 * what this file names, and only when the process still is what the demo started (its command line
 * holds this checkout's entrypoint): never another clone's worker, a worker started by hand, or a
 * rebuild the demo did not start.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** A rebuild the demo started: its workflow id and the run id of its first execution. */
export interface DemoRebuild {
  workflowId: string;
  firstRunId: string;
}

/** The contents of `.data/demo-state.json`. */
export interface DemoState {
  /** Pid of the demo process that wrote the file. */
  demoPid: number;
  /** Workers that demo spawned (each the leader of its own process group). */
  workers: { n: number; pid: number }[];
  /** The rebuild that demo started, once started. */
  rebuild?: DemoRebuild;
}

/** `.data/demo-state.json` of the checkout whose data folder is `dataDir`. */
export const demoStateFile = (dataDir: string): string => path.join(dataDir, 'demo-state.json');

/** The state in `file`; null when it is missing or unreadable (then nothing is known to be the demo's). */
export function readDemoState(file: string): DemoState | null {
  try {
    const s = JSON.parse(fs.readFileSync(file, 'utf8')) as DemoState;
    return Number.isInteger(s.demoPid) && Array.isArray(s.workers) ? s : null;
  } catch {
    return null;
  }
}

/** Writes `state` to `file` (replacing it atomically). */
export function writeDemoState(file: string, state: DemoState): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(state, null, 2) + '\n');
  fs.renameSync(tmp, file);
}

/**
 * Whether `pid` is alive and runs the script `marker` (an absolute path): one of its arguments,
 * resolved against its working directory, is `marker`. So `node dist/dev/demo/main.js` started by
 * `npm run demo` in the checkout counts, another clone's or a reused pid does not. False when /proc
 * cannot tell.
 */
export function processRuns(pid: number, marker: string): boolean {
  try {
    process.kill(pid, 0);
    const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    return args.some((a) => path.resolve(cwd, a) === marker);
  } catch {
    return false;
  }
}

/** The command-line marker of the checkout's worker entrypoint (`<root>/dist/worker/main.js`). */
export const workerMarker = (projectRoot: string): string => path.join(projectRoot, 'dist', 'worker', 'main.js');
/** The command-line marker of the checkout's demo entrypoint (`<root>/dist/dev/demo/main.js`). */
export const demoMarker = (projectRoot: string): string => path.join(projectRoot, 'dist', 'dev', 'demo', 'main.js');

/** `.data/demo.lock` of the checkout whose data folder is `dataDir`: the pid of the demo that runs. */
export const demoLockFile = (dataDir: string): string => path.join(dataDir, 'demo.lock');

/**
 * Takes the checkout's demo lock for `self`: creates `file` holding its pid, exclusively (`wx`), so
 * of two demos started at the same instant only one goes on. `npm run demo` takes it in its first
 * step (dist/dev/demo/guard.js) for the script's shell, before the build; the demo itself then takes
 * it over from `handOver` (that shell, its parent). A lock whose pid is no demo of the checkout any
 * more ({@link isDemoOf}: a demo killed with SIGKILL) is stale: it is removed, once, and taken.
 * @returns null when `self` holds the lock now; else the pid of the running demo that holds it.
 * @throws the file system's error other than EEXIST (e.g. EACCES); an Error when the lock keeps
 *   changing hands without a running holder (three tries).
 */
export function acquireDemoLock(
  file: string,
  projectRoot: string,
  self = process.pid,
  handOver: number | null = null,
): number | null {
  for (let tries = 0; tries < 3; tries++) {
    try {
      fs.writeFileSync(file, `${self}\n`, { flag: 'wx' });
      return null;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = lockHolder(file);
    if (holder === self) return null;
    if (holder !== null && holder === handOver) {
      fs.writeFileSync(file, `${self}\n`);
      return null;
    }
    if (holder !== null && isDemoOf(holder, projectRoot)) return holder;
    // Stale (or being written): remove it only while it still names the same holder.
    if (holder !== null && lockHolder(file) === holder) fs.rmSync(file, { force: true });
  }
  throw new Error(`the demo lock ${file} could not be taken: if no demo of this checkout runs, remove it`);
}

/**
 * Whether `pid` is a demo of the checkout at `projectRoot`: its process runs the demo's entrypoint
 * ({@link processRuns}), or it is the shell of `npm run demo` in that checkout (its working
 * directory is the checkout and its command line names `dist/dev/demo/main.js`), which holds the
 * lock while the demo's build runs.
 */
export function isDemoOf(pid: number, projectRoot: string): boolean {
  if (processRuns(pid, demoMarker(projectRoot))) return true;
  try {
    process.kill(pid, 0);
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
    return cwd === fs.realpathSync(projectRoot) && cmdline.includes('dist/dev/demo/main.js');
  } catch {
    return false;
  }
}

/**
 * The pid of the demo of the checkout at `projectRoot` that runs now, by its lock or (a demo of an
 * older build, without the lock) its state file; null when none runs. Changes nothing.
 */
export function runningDemo(dataDir: string, projectRoot: string, self = process.pid): number | null {
  const holder = lockHolder(demoLockFile(dataDir));
  if (holder !== null && holder !== self && isDemoOf(holder, projectRoot)) return holder;
  return leftovers(readDemoState(demoStateFile(dataDir)), projectRoot, self).runningDemo;
}

/** The refusal of a second demo of the checkout while the one with `pid` runs. */
export const anotherDemoRuns = (pid: number): string =>
  `another demo of this checkout is running (pid ${pid}); let it finish or stop it (kill ${pid}), then run the demo again`;

/** Removes the demo lock if this process holds it. */
export function releaseDemoLock(file: string, self = process.pid): void {
  if (lockHolder(file) === self) fs.rmSync(file, { force: true });
}

/** The pid in the lock file; null when it is missing or not (yet) a pid. */
function lockHolder(file: string): number | null {
  try {
    const pid = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** What an earlier demo of the checkout left running, by the state file. */
export interface Leftovers {
  /** Pid of a demo of this checkout that still runs (not this process); null when none. */
  runningDemo: number | null;
  /** Workers of that demo that still run this checkout's worker entrypoint. */
  workers: { n: number; pid: number }[];
  /** The rebuild it started (running or not: the caller asks Temporal). */
  rebuild: DemoRebuild | null;
}

/**
 * What of `state` still runs and belongs to the checkout at `projectRoot`: a pid counts only while
 * its command line holds the checkout's entrypoint (a reused pid or another clone's process does not).
 * @param self this process's pid (never reported as a running demo).
 */
export function leftovers(state: DemoState | null, projectRoot: string, self = process.pid): Leftovers {
  if (!state) return { runningDemo: null, workers: [], rebuild: null };
  const runningDemo =
    state.demoPid !== self && processRuns(state.demoPid, demoMarker(projectRoot)) ? state.demoPid : null;
  return {
    runningDemo,
    workers: state.workers.filter((w) => processRuns(w.pid, workerMarker(projectRoot))),
    rebuild: state.rebuild ?? null,
  };
}

/** What the demo does about the catalog's rebuild that runs when it starts. */
export type RunningRebuildAction =
  { kind: 'none' } | { kind: 'terminate'; runId: string } | { kind: 'refuse'; message: string };

/**
 * The decision on a running rebuild of the demo's catalog (pure): terminate it only when an earlier
 * demo of this checkout started it (its first run id is in the state file), else refuse to go on
 * (the demo would regenerate the source under it).
 * @param running the running rebuild (null when none runs): its workflow id, run id and first run id.
 */
export function decideRunningRebuild(
  running: { workflowId: string; runId: string; firstRunId: string } | null,
  recorded: DemoRebuild | null,
  catalog: string,
): RunningRebuildAction {
  if (!running) return { kind: 'none' };
  if (recorded && recorded.workflowId === running.workflowId && recorded.firstRunId === running.firstRunId)
    return { kind: 'terminate', runId: running.runId };
  return {
    kind: 'refuse',
    message:
      `a rebuild of catalog ${catalog} that this demo did not start is running (workflow ${running.workflowId}, run ${running.runId}); ` +
      `the demo leaves it alone: wait for it (catalog-rebuild wait --catalog ${catalog}) or cancel it (catalog-rebuild cancel --catalog ${catalog}), then run the demo again`,
  };
}
