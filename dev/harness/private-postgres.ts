/**
 * A private PostgreSQL cluster for tests that restart the database server: `initdb` (as the
 * `postgres` user when running as root) on a free port, never the machine's own cluster.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from '../env/dev-server';

/** Folder of initdb/pg_ctl, or null when no PostgreSQL server binaries are installed. */
export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql';
  if (!fs.existsSync(root)) return null;
  for (const v of fs.readdirSync(root).sort().reverse()) {
    const bin = path.join(root, v, 'bin');
    if (fs.existsSync(path.join(bin, 'initdb'))) return bin;
  }
  return null;
}

/** A running private cluster. */
export interface PrivatePostgres {
  port: number;
  adminUrl: string;
  /** Restarts the server (fast shutdown: sessions are terminated with 57P01). */
  restart(): void;
  stop(): void;
}

/** Creates and starts a private cluster; `stop()` removes it. */
export function startPrivatePostgres(bin: string, port: number): PrivatePostgres {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-pg-'));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) execFileSync('chown', ['postgres:postgres', dir]);
  const run = (cmd: string, args: string[]) =>
    asRoot
      ? execFileSync('runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args], { stdio: 'pipe' })
      : execFileSync(path.join(bin, cmd), args, { stdio: 'pipe' });
  const data = path.join(dir, 'data');
  run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync']);
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  run('pg_ctl', ['-D', data, '-o', opts, '-l', path.join(dir, 'server.log'), '-w', 'start']);
  return {
    port,
    adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart() {
      run('pg_ctl', ['-D', data, '-o', opts, '-l', path.join(dir, 'server.log'), '-m', 'fast', '-w', 'restart']);
    },
    stop() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        /* already stopped */
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A free port for a private cluster. */
export const freePgPort = freePort;
