/**
 * The demo's worker processes: the product's worker entrypoint (`dist/worker/main.js`), each in its
 * own process group with its output in `.data/demo-worker-<n>.log` and its pid in
 * `.data/demo-worker-<n>.pid`, so an interrupted demo's workers can be found and killed next time.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { dataDir, projectRoot } from '../../lib/paths';
import type { WorkerBuild } from '../../worker/build-id';
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
/** `.data/demo-worker-<n>.pid`. */
export const workerPidFile = (n: number): string => path.join(dataDir(), `demo-worker-${n}.pid`);

/** Spawns `node dist/worker/main.js` detached (own process group); resolves once it polls. */
export async function spawnDemoWorker(n: number, env: NodeJS.ProcessEnv): Promise<DemoWorker> {
  const logFile = path.join(dataDir(), `demo-worker-${n}.log`);
  const fd = fs.openSync(logFile, 'w');
  const child = spawn(process.execPath, [path.join(projectRoot(), 'dist/worker/main.js')], {
    env,
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
  fs.writeFileSync(workerPidFile(n), `${w.pid}\n`);
  let exitCode: number | null | undefined;
  void w.exited.then((c) => (exitCode = c));
  await waitFor(
    `worker ${n} to poll (see ${logFile})`,
    () => {
      const out = fs.readFileSync(logFile, 'utf8');
      if (exitCode !== undefined && !out.includes('polling task queue'))
        throw new Error(`worker ${n} exited with ${exitCode} before polling; its log ${logFile}:\n${out.trim()}`);
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
  fs.rmSync(workerPidFile(w.n), { force: true });
}

/** Kills workers a previous, interrupted demo run left behind (pid files in .data/), announcing each on `log`. */
export function killStaleWorkers(log: (line: string) => void): void {
  for (const f of fs.readdirSync(dataDir())) {
    const m = /^demo-worker-(\d+)\.pid$/.exec(f);
    if (!m) continue;
    const pid = readPid(path.join(dataDir(), f));
    if (pid && processMatches(pid, 'dist/worker/main.js')) {
      log(`killing worker ${pid} left behind by an earlier demo run`);
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    fs.rmSync(path.join(dataDir(), f), { force: true });
  }
}
