/**
 * Starts a Temporal dev server (`temporal server start-dev`) with the catalog-rebuild search
 * attributes and a persistent `--db-filename`, and waits until it answers.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { Connection } from '@temporalio/client';

/** Options of a dev server. */
export interface DevServerOptions {
  /** Path of the `temporal` binary. */
  cli: string;
  /** gRPC port (default 7233). */
  port: number;
  /** Web UI port (default 8233); omit with `headless`. */
  uiPort: number;
  /** SQLite file that keeps workflows across restarts. */
  dbFile: string;
  /** Log file of the server. */
  logFile: string;
  /** Run without the Web UI. */
  headless?: boolean;
  /** Leave the server running after this process exits (own process group). */
  detached?: boolean;
  /** Create the CatalogName and RebuildPhase search attributes (default true). */
  searchAttributes?: boolean;
}

/** A started dev server. */
export interface DevServer {
  address: string;
  uiUrl: string | null;
  process: ChildProcess;
  /** Stops the server (SIGTERM to its process group) and waits for it to exit. */
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
export async function portOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Waits until a Temporal frontend answers at `address` (GetSystemInfo).
 * @throws Error after `timeoutMs` (default 60,000 ms).
 */
export async function waitForTemporal(address: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const c = await Connection.connect({ address, connectTimeout: '2s' });
      await c.workflowService.getSystemInfo({});
      await c.close();
      return;
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(`Temporal at ${address} did not answer within ${timeoutMs} ms: ${(last as Error)?.message}`);
}

/**
 * Starts `temporal server start-dev` on 127.0.0.1 with CatalogName and RebuildPhase keyword search
 * attributes (unless `searchAttributes: false`) and Temporal's own workflow pause enabled
 * (`frontend.WorkflowPauseEnabled`, off by default on server 1.32), and waits until it answers.
 * @throws Error with the server log's tail when it does not come up.
 */
export async function startDevServer(o: DevServerOptions): Promise<DevServer> {
  fs.mkdirSync(path.dirname(o.dbFile), { recursive: true });
  fs.mkdirSync(path.dirname(o.logFile), { recursive: true });
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(o.port),
    '--db-filename',
    o.dbFile,
    '--log-level',
    'warn',
    '--dynamic-config-value',
    'frontend.WorkflowPauseEnabled=true',
  ];
  if (o.searchAttributes ?? true)
    args.push('--search-attribute', 'CatalogName=Keyword', '--search-attribute', 'RebuildPhase=Keyword');
  if (o.headless) args.push('--headless');
  else args.push('--ui-port', String(o.uiPort), '--ui-ip', '127.0.0.1', '--ui-disable-news-fetch');
  const out = fs.openSync(o.logFile, 'a');
  const child = spawn(o.cli, args, { stdio: ['ignore', out, out], detached: true });
  fs.closeSync(out);
  if (o.detached) child.unref();
  const address = `127.0.0.1:${o.port}`;
  // A server that exits while starting (a port taken meanwhile, its own start deadline) fails at once.
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) =>
      reject(
        new Error(`temporal server start-dev exited (${signal ?? `code ${code}`}) before answering at ${address}`),
      ),
    ),
  );
  exited.catch(() => undefined);
  try {
    await Promise.race([waitForTemporal(address, 60_000), exited]);
  } catch (err) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* already gone */
    }
    const tail = fs.existsSync(o.logFile) ? fs.readFileSync(o.logFile, 'utf8').split('\n').slice(-20).join('\n') : '';
    throw new Error(`${(err as Error).message}\n${tail}`);
  }
  return {
    address,
    uiUrl: o.headless ? null : `http://127.0.0.1:${o.uiPort}`,
    process: child,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      try {
        process.kill(-child.pid!, 'SIGTERM');
      } catch {
        return;
      }
      const t = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
      }, 10_000);
      await exited;
      clearTimeout(t);
    },
  };
}
