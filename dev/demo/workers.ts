/**
 * The demo's worker processes: the product's worker entrypoint (`dist/worker/main.js`), each in its
 * own process group with its output in `.data/demo-worker-<n>.log`; the demo records their pids in
 * its state file (state.ts), so an interrupted demo's workers, and only those, are stopped next time.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { dataDir, projectRoot } from '../../lib/paths';
import type { WorkerBuild } from '../../worker/build-id';
import { productWorkerEnv } from '../harness/product-worker-env';
import { waitFor } from '../harness/wait';

/** Whether `pid` is alive and its command line contains `marker`. */
export function processMatches(pid: number, marker: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(marker);
  } catch {
    return true; // no /proc: trust the pid file
  }
}

/** The pid in a pid file, or null when it is missing or not a pid. */
export function readPid(file: string): number | null {
  try {
    const pid = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 1 ? pid : null;
  } catch {
    return null;
  }
}

/** A worker process of the demo: its own process group, output in a log file. */
export interface DemoWorker {
  n: number;
  child: ChildProcess;
  pid: number;
  logFile: string;
  exited: Promise<number | null>;
  /** The Worker Deployment Version it polls as (from its log's `polling … as build B of deployment D`). */
  build: WorkerBuild;
}

/** Every worker the demo started, in order (worker 1 first). */
export const workers: DemoWorker[] = [];

/**
 * Spawns `node dist/worker/main.js` detached (own process group); calls `spawned` with it at once
 * (to record its pid) and resolves once it polls.
 */
export async function spawnDemoWorker(
  n: number,
  env: NodeJS.ProcessEnv,
  spawned: (w: DemoWorker) => void = () => undefined,
): Promise<DemoWorker> {
  const logFile = path.join(dataDir(), `demo-worker-${n}.log`);
  const fd = fs.openSync(logFile, 'w');
  const child = spawn(process.execPath, [path.join(projectRoot(), 'dist/worker/main.js')], {
    env: productWorkerEnv(env),
    detached: true,
    stdio: ['ignore', fd, fd],
  });
  fs.closeSync(fd);
  const w: DemoWorker = {
    n,
    child,
    pid: child.pid!,
    logFile,
    exited: new Promise((r) => child.once('exit', (code, signal) => r(code ?? (signal ? 128 : null)))),
    build: { deploymentName: '', buildId: '' },
  };
  workers.push(w);
  spawned(w);
  let exitCode: number | null | undefined;
  void w.exited.then((c) => (exitCode = c));
  await waitFor(
    `worker ${n} to poll (see ${logFile})`,
    () => {
      const out = fs.readFileSync(logFile, 'utf8');
      if (exitCode !== undefined && !out.includes('polling task queue'))
        throw new Error(
          `worker ${n} ended (${child.signalCode ?? `code ${exitCode}`}) before polling; its log ${logFile}` +
            (out.trim() ? `:\n${out.trim()}` : ' is empty'),
        );
      return out.includes('polling task queue');
    },
    { timeoutMs: 120_000, intervalMs: 100, rethrow: true },
  );
  const m = / as build (\S+) of deployment (\S+)/.exec(fs.readFileSync(logFile, 'utf8'));
  if (m) w.build = { buildId: m[1], deploymentName: m[2] };
  return w;
}

/** Sends `signal` to a worker's whole process group. */
export function signalGroup(w: DemoWorker, signal: NodeJS.Signals): void {
  try {
    process.kill(-w.pid, signal);
  } catch {
    /* already gone */
  }
}

/** Stops a worker: SIGTERM to its group (graceful shutdown), SIGKILL after `graceMs`. */
export async function stopWorker(w: DemoWorker, graceMs = 25_000): Promise<void> {
  if (w.child.exitCode === null && w.child.signalCode === null) {
    signalGroup(w, 'SIGTERM');
    const t = setTimeout(() => signalGroup(w, 'SIGKILL'), graceMs);
    await w.exited;
    clearTimeout(t);
  }
}

/** The Temporal identity of a demo worker on this host (the worker's `<pid>@<host>`). */
export const workerIdentity = (pid: number): string => `${pid}@${os.hostname()}`;

/**
 * Kills the process groups of `pids` (workers an earlier, interrupted demo of this checkout
 * started; see state.ts `leftovers`), announcing each on `log`.
 */
export function killLeftoverWorkers(pids: { n: number; pid: number }[], log: (line: string) => void): void {
  for (const w of pids) {
    log(`stopping worker ${w.n} (pid ${w.pid}) that an earlier, interrupted demo of this checkout started`);
    try {
      process.kill(-w.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}
