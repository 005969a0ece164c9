/**
 * Finds a PostgreSQL server for the demo and the tests, in the order design.md gives:
 * CATALOG_DATABASE_URL / DATABASE_URL, then 127.0.0.1:5432 as postgres, then (as root) the local
 * cluster started with pg_ctlcluster, then the embedded PostgreSQL 15 of `embedded-postgres.ts`.
 * Creates and drops databases with escaped names.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import format from 'pg-format';
import { Client } from 'pg';
import { canConnect, startEmbeddedPostgres } from './embedded-postgres';

const LOCAL = 'postgres://postgres@127.0.0.1:5432/postgres';

/** Environment variable that forces the embedded server (same as `skipLocal`). */
export const FORCE_EMBEDDED_ENV = 'CATALOG_REBUILD_FORCE_EMBEDDED_PG';

/** Options of `resolveAdminUrl`. */
export interface ResolveOptions {
  /**
   * Skip DATABASE_URL / CATALOG_DATABASE_URL, the server on 127.0.0.1:5432 and pg_ctlcluster: go
   * straight to the embedded server. Also set by the environment variable
   * `CATALOG_REBUILD_FORCE_EMBEDDED_PG=1`.
   */
  skipLocal?: boolean;
  /**
   * When this call starts the embedded server, leave it running after this process exits (the demo)
   * instead of stopping it when the process exits (tests). A server already running is reused as is.
   */
  detached?: boolean;
  /** Folder of the embedded server (default `.data/embedded-pg` of the project). */
  embeddedDir?: string;
}

/**
 * An admin connection URL (may create databases).
 * @throws Error saying exactly what is missing when no server can be found or started.
 */
export async function resolveAdminUrl(
  log: (line: string) => void = () => undefined,
  env: NodeJS.ProcessEnv = process.env,
  opts: ResolveOptions = {},
): Promise<string> {
  const forced = opts.skipLocal || /^(1|true|yes)$/i.test(env[FORCE_EMBEDDED_ENV] ?? '');
  if (!forced) {
    const given = env.DATABASE_URL || env.CATALOG_DATABASE_URL;
    if (given) {
      if (await canConnect(given)) return given;
      throw new Error(
        `cannot connect to PostgreSQL at DATABASE_URL/CATALOG_DATABASE_URL (${given.replace(/:[^:@/]*@/, ':***@')})`,
      );
    }
    if (await canConnect(LOCAL)) return LOCAL;
    if (process.getuid?.() === 0 && fs.existsSync('/etc/postgresql')) {
      const versions = fs.readdirSync('/etc/postgresql');
      if (versions.length) {
        log(`starting the local PostgreSQL cluster ${versions[0]}/main`);
        let started = true;
        try {
          execFileSync('pg_ctlcluster', ['--skip-systemctl-redirect', versions[0], 'main', 'start'], { stdio: 'pipe' });
        } catch (err) {
          started = false;
          log(
            `pg_ctlcluster failed: ${(err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message}`,
          );
        }
        for (let i = 0; i < (started ? 20 : 2); i++) {
          if (await canConnect(LOCAL)) return LOCAL;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    }
  }
  try {
    const server = await startEmbeddedPostgres({ log, detached: opts.detached, dir: opts.embeddedDir });
    return server.adminUrl;
  } catch (err) {
    throw new Error(
      `no PostgreSQL server found: ${forced ? '' : 'DATABASE_URL is not set, nothing answers on 127.0.0.1:5432 as postgres, and '}` +
        `the embedded PostgreSQL could not start: ${(err as Error).message}\n` +
        'fix: set DATABASE_URL to an admin connection (postgres://user:password@host:port/postgres), ' +
        'or run a PostgreSQL 13+ server on 127.0.0.1:5432 that accepts the user postgres ' +
        '(Debian: apt-get install postgresql && pg_ctlcluster --skip-systemctl-redirect 15 main start)',
      { cause: err },
    );
  }
}

/** `adminUrl` with its database replaced by `database`. */
export function databaseUrl(adminUrl: string, database: string): string {
  const u = new URL(adminUrl);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Creates `name` on the admin connection's server if it does not exist; returns its URL. */
export async function createDatabase(
  adminUrl: string,
  name: string,
  opts: { dropFirst?: boolean } = {},
): Promise<string> {
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
