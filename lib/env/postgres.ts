/**
 * Finds a PostgreSQL server for the demo and the tests, in the order design.md gives:
 * CATALOG_DATABASE_URL / DATABASE_URL, then 127.0.0.1:5432 as postgres, then (as root) the local
 * cluster started with pg_ctlcluster. Creates and drops databases with escaped names.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import format from 'pg-format';
import { Client } from 'pg';

const LOCAL = 'postgres://postgres@127.0.0.1:5432/postgres';

async function canConnect(url: string): Promise<boolean> {
  const c = new Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * An admin connection URL (may create databases).
 * @throws Error saying exactly what is missing when no server can be found or started.
 */
export async function resolveAdminUrl(log: (line: string) => void = () => undefined, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const given = env.DATABASE_URL || env.CATALOG_DATABASE_URL;
  if (given) {
    if (await canConnect(given)) return given;
    throw new Error(`cannot connect to PostgreSQL at DATABASE_URL/CATALOG_DATABASE_URL (${given.replace(/:[^:@/]*@/, ':***@')})`);
  }
  if (await canConnect(LOCAL)) return LOCAL;
  if (process.getuid?.() === 0 && fs.existsSync('/etc/postgresql')) {
    const versions = fs.readdirSync('/etc/postgresql');
    if (versions.length) {
      log(`starting the local PostgreSQL cluster ${versions[0]}/main`);
      try {
        execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', versions[0], 'main', 'start'], { stdio: 'pipe' });
      } catch (err) {
        log(`pg_ctlcluster failed: ${(err as { stderr?: Buffer }).stderr?.toString().trim() ?? (err as Error).message}`);
      }
      for (let i = 0; i < 20; i++) {
        if (await canConnect(LOCAL)) return LOCAL;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }
  throw new Error(
    'no PostgreSQL server found: set DATABASE_URL to an admin connection (postgres://user@host:port/postgres), ' +
      'or run a PostgreSQL 13+ server on 127.0.0.1:5432 that accepts the user postgres ' +
      '(Debian: apt-get install postgresql && pg_ctlcluster --skip-systemctl-redirect 15 main start)',
  );
}

/** `adminUrl` with its database replaced by `database`. */
export function databaseUrl(adminUrl: string, database: string): string {
  const u = new URL(adminUrl);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Creates `name` on the admin connection's server if it does not exist; returns its URL. */
export async function createDatabase(adminUrl: string, name: string, opts: { dropFirst?: boolean } = {}): Promise<string> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  try {
    if (opts.dropFirst) await c.query(format('DROP DATABASE IF EXISTS %I WITH (FORCE)', name));
    const r = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!r.rowCount) await c.query(format('CREATE DATABASE %I', name));
  } finally {
    await c.end();
  }
  return databaseUrl(adminUrl, name);
}

/** Drops `name` (closing its sessions). */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  try {
    await c.query(format('DROP DATABASE IF EXISTS %I WITH (FORCE)', name));
  } finally {
    await c.end();
  }
}
