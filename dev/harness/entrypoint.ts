/**
 * The product's worker entrypoint (`dist/worker/main.js`, what `npm run worker` runs) run to its
 * exit, for tests of how it refuses to start (bad configuration, a newer schema).
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { projectRoot } from '../../lib/paths';

/** Exit of one worker run: exit code (null when killed), its stdout and stderr interleaved, and its duration (ms). */
export interface WorkerExit {
  code: number | null;
  out: string;
  ms: number;
}

/**
 * Runs `node dist/worker/main.js` with `env` in its own process group until it exits; after
 * `timeoutMs` (default 60,000 ms) the group is SIGKILLed (code null).
 */
export function runWorkerToExit(env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<WorkerExit> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(projectRoot(), 'dist/worker/main.js')], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out, ms: Date.now() - t0 });
    });
  });
}
