import format from 'pg-format';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Writable } from 'node:stream';
import type { PoolClient, PoolConfig } from 'pg';
import { Pool } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { projectRoot } from './paths';
import { SchemaTooNewError } from './errors';

/** A pool or one checked-out client (inside a transaction): what a query function runs on. */
export type Queryable = Pool | PoolClient;

/** Options of a catalog or source connection pool. */
export interface PoolOptions {
  /** `application_name` of every session: shows in pg_stat_activity. */
  applicationName: string;
  /** Per-statement timeout (ms); default 30,000. */
  statementTimeoutMs?: number;
  /** Idle-in-transaction timeout (ms); default 60,000. */
  idleInTransactionTimeoutMs?: number;
  /** Pool size (connections); default 10. */
  max?: number;
  /** Sessions are read-only (source connections). */
  readOnly?: boolean;
  /**
   * Which database this is and which setting names it, without credentials (see
   * {@link databaseLabel}): every error of the pool and of its clients' queries then starts with
   * it, e.g. `catalog database 127.0.0.1:5439/catalog (catalogDatabaseUrl in /etc/c.json): …`.
   */
  describe?: string;
  /**
   * With `describe`: name the database only in errors about reaching it (SQLSTATE classes 08, 28,
   * 3D, 57P, and socket errors such as ECONNREFUSED), for pools whose callers already name what
   * they read in statement errors (sources). Default false: every error.
   */
  describeOnlyConnectionErrors?: boolean;
}

/**
 * Whether `err` is about reaching the database rather than about a statement: connection
 * exceptions (08), authorization (28), unknown database (3D000), shutdown (57P0x), socket errors.
 */
export function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^(08|28|3D|57P)/.test(code)) return true;
  if (typeof code === 'string' && /^E[A-Z_]+$/.test(code)) return true;
  const message = err instanceof Error ? err.message : '';
  return /Connection terminated|timeout exceeded when trying to connect/.test(message);
}

/**
 * `host:port/database` of a PostgreSQL URL (pure): no user, password or parameters, so it may
 * appear in any message; `(unparseable URL)` when it is not one.
 */
export function databaseLabel(url: string): string {
  try {
    const u = new URL(url);
    const db = decodeURIComponent(u.pathname.replace(/^\//, '')) || '(default database)';
    return `${u.hostname || 'localhost'}:${u.port || '5432'}/${db}`;
  } catch {
    return '(unparseable URL)';
  }
}

/** Marks errors already prefixed, so an error passing two wrappers is named once. */
const LABELLED = Symbol('labelled');

/** How a pool labels errors: the label, and whether only connection errors get it. */
interface Labelling {
  label: string;
  onlyConnection: boolean;
}

/**
 * A server message about authorization (SQLSTATE class 28: `role "u" does not exist`, `password
 * authentication failed for user "u"`, `no pg_hba.conf entry for host …, user "u", …`) without the
 * user it names, as the label names the database without it; other messages as they are.
 */
export function withoutUserName(code: unknown, message: string): string {
  return typeof code === 'string' && code.startsWith('28')
    ? message.replace(/\b(role|user) "(?:[^"]|"")*"/g, "$1 (the URL's user)")
    : message;
}

/** `err` with `label: ` before its message (once), and no user name in it; its `code` and other fields kept. */
function labelled(err: unknown, l: Labelling): unknown {
  if (l.onlyConnection && !isConnectionError(err)) return err;
  const label = l.label;
  if (err instanceof Error && !(err as { [LABELLED]?: boolean })[LABELLED]) {
    err.message = `${label}: ${withoutUserName((err as { code?: unknown }).code, err.message)}`;
    Object.defineProperty(err, LABELLED, { value: true });
  }
  return err;
}

/** Wraps a `query` function so a rejected promise's error is {@link labelled}; streams and callbacks pass as they are. */
function labelQuery<F extends (...args: never[]) => unknown>(query: F, label: Labelling): F {
  return ((...args: never[]) => {
    const r = query(...args) as { then?: unknown; catch?: (f: (e: unknown) => never) => unknown };
    return typeof r?.then === 'function'
      ? r.catch!((e: unknown) => {
          throw labelled(e, label);
        })
      : r;
  }) as F;
}

/** Makes every promise-returning `query` and `connect` of `pool` (and of its clients) label its errors. */
function labelPoolErrors(pool: Pool, label: Labelling): void {
  pool.query = labelQuery(pool.query.bind(pool) as (...args: never[]) => unknown, label) as Pool['query'];
  const connect = pool.connect.bind(pool) as (...args: unknown[]) => unknown;
  pool.connect = ((...args: unknown[]) => {
    if (args.length) return connect(...args);
    return (connect() as Promise<PoolClient>).then(
      (client) => {
        if (!(client as { [LABELLED]?: boolean })[LABELLED]) {
          client.query = labelQuery(
            client.query.bind(client) as (...a: never[]) => unknown,
            label,
          ) as PoolClient['query'];
          Object.defineProperty(client, LABELLED, { value: true });
        }
        return client;
      },
      (e: unknown) => {
        throw labelled(e, label);
      },
    );
  }) as Pool['connect'];
}

/**
 * Creates a `pg` pool whose sessions carry `application_name`, `statement_timeout` and
 * `idle_in_transaction_session_timeout`, with an `error` handler so an idle client's
 * connection loss (server restart) never crashes the process; with `describe`, its errors name the
 * database.
 */
export function createPool(connectionString: string, opts: PoolOptions): Pool {
  const options = [
    `-c statement_timeout=${opts.statementTimeoutMs ?? 30_000}`,
    `-c idle_in_transaction_session_timeout=${opts.idleInTransactionTimeoutMs ?? 60_000}`,
  ];
  if (opts.readOnly) options.push('-c default_transaction_read_only=on');
  const config: PoolConfig = {
    connectionString,
    application_name: opts.applicationName,
    max: opts.max ?? 10,
    options: options.join(' '),
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
  };
  const pool = new Pool(config);
  if (opts.describe)
    labelPoolErrors(pool, { label: opts.describe, onlyConnection: opts.describeOnlyConnectionErrors === true });
  pool.on('error', () => {
    /* an idle client lost its connection; the next checkout reconnects */
  });
  // pg-pool removes its listener while a client is checked out: a connection lost between two
  // statements of a transaction (server restart, 57P01) must fail the next query, not the process.
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  return pool;
}

/**
 * Round trip to the database (`SELECT 1`), for health checks.
 * @throws the connection or server error when the database cannot answer.
 */
export async function pingDatabase(db: Queryable): Promise<void> {
  await db.query('SELECT 1');
}

/**
 * Runs `fn` inside a transaction on one pooled client: BEGIN, fn, COMMIT; ROLLBACK on error. With
 * `long`, the transaction runs without statement timeout (`SET LOCAL`: the session's own setting
 * is back after it ends).
 * @throws whatever `fn` or the database throws, after rolling back.
 */
export async function withTransaction<T>(
  pool: Pool,
  fn: (client: PoolClient) => Promise<T>,
  opts: { long?: boolean } = {},
): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    if (opts.long) await client.query('SET LOCAL statement_timeout = 0');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch {
      broken = true;
    }
    throw err;
  } finally {
    client.release(broken);
  }
}

/**
 * Runs `fn` inside a savepoint of the open transaction on `client`: released when `fn` succeeds;
 * rolled back to (the transaction goes on without `fn`'s writes) when `fn` throws, and the error rethrown.
 * @param name savepoint name (an SQL identifier chosen by the caller, not user input).
 */
export async function withSavepoint<T>(client: PoolClient, name: string, fn: () => Promise<T>): Promise<T> {
  await client.query(format('SAVEPOINT %I', name));
  try {
    const result = await fn();
    await client.query(format('RELEASE SAVEPOINT %I', name));
    return result;
  } catch (err) {
    await client.query(format('ROLLBACK TO SAVEPOINT %I', name));
    throw err;
  }
}

/**
 * Waits for every one of `work` (steps on sessions of their own, run side by side) to settle, so
 * that none is still running when the caller returns or retries.
 * @returns their results, in order.
 * @throws the first rejection of `work`, once all have settled.
 */
export async function settleAll<T extends readonly unknown[]>(
  work: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T> {
  const settled = await Promise.allSettled(work);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/**
 * Runs `fn` on a session of its own checked out of `pool`, with `statement_timeout = 0` (for one
 * long statement whose time grows with a table: reconciliation, repair reads, index builds,
 * retirement). The session is discarded afterwards, never returned to the pool altered.
 * @throws whatever `fn` or the database throws.
 */
export async function withLongSession<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('SET statement_timeout = 0');
    return await fn(client);
  } finally {
    client.release(true);
  }
}

/**
 * Runs `copySql` (a `COPY … FROM STDIN`) on `c`, fed by `fill`, which pipes a stream into it (e.g. a
 * source's `COPY … TO STDOUT`) and resolves when it has finished. Should `fill` fail before it
 * piped anything (its source could not connect, a bad argument), the COPY is ended here and the
 * error thrown: the session is then broken, and its stream's own error on the discarded
 * connection is not left to crash the process.
 * @throws `fill`'s errors, or the catalog's.
 */
export async function copyInto(c: PoolClient, copySql: string, fill: (into: Writable) => Promise<void>): Promise<void> {
  const into = c.query(copyFrom(copySql));
  // `fill`'s pipeline reports the stream's errors; before it listens, and after a failure, nothing
  // else would.
  into.on('error', () => undefined);
  try {
    await fill(into);
  } catch (err) {
    into.destroy();
    throw err;
  }
}

/**
 * As {@link withLongSession}, with JIT compilation off: for many short index range scans whose
 * summed estimates pass `jit_above_cost` (a refresh's deletion check), where compiling costs more
 * than running.
 * @throws whatever `fn` or the database throws.
 */
export function withRangeScanSession<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  return withLongSession(pool, async (c) => {
    await c.query('SET jit = off');
    return fn(c);
  });
}

/**
 * True for a PostgreSQL error about one value (SQLSTATE class 22, data exception, or 54000,
 * program limit exceeded, e.g. an index entry too large): retrying cannot help, quarantining the
 * value can.
 */
export function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('22') || code === '54000');
}

/**
 * Runs `fn` on `client` (checked out of `pool`) while `signal` is watched: when it aborts, the
 * statement in flight on the client's backend is cancelled (`pg_cancel_backend` on another pooled
 * session; SQLSTATE 57014), so `fn` fails promptly and its transaction can roll back.
 * @throws whatever `fn` throws.
 */
export async function cancelOnAbort<T>(
  pool: Pool,
  client: PoolClient,
  signal: AbortSignal,
  fn: () => Promise<T>,
): Promise<T> {
  let live = true;
  const backendPid = (client as unknown as { processID?: number }).processID;
  const onAbort = () => {
    if (live && backendPid) pool.query('SELECT pg_cancel_backend($1)', [backendPid]).catch(() => undefined);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await fn();
  } finally {
    live = false;
    signal.removeEventListener('abort', onAbort);
  }
}

/** Folder of the numbered `.sql` migration files. */
export const migrationsDir = (): string => path.join(projectRoot(), 'migrations');

/** One migration file: `NNN_name.sql`. */
export interface Migration {
  /** Its number, from the file name. */
  id: number;
  /** File name. */
  name: string;
  /** SQL text. */
  sql: string;
}

/** Lists the migration files in order. */
export function listMigrations(dir: string = migrationsDir()): Migration[] {
  return fs
    .readdirSync(dir)
    .filter((f) => /^\d+_.*\.sql$/.test(f))
    .sort()
    .map((name) => ({ id: Number(name.split('_')[0]), name, sql: fs.readFileSync(path.join(dir, name), 'utf8') }));
}

const MIGRATION_LOCK = 7_344_221_001; // advisory lock key of the migration runner

/**
 * Applies the pending migrations in order, each in its own transaction, under a session
 * advisory lock (concurrent workers wait), recording each in `schema_migration`.
 * @returns the ids applied now (empty when the schema was current).
 * @throws SchemaTooNewError when the database has a migration this build does not know.
 */
export async function migrate(pool: Pool, dir: string = migrationsDir()): Promise<number[]> {
  const migrations = listMigrations(dir);
  const known = migrations.length ? migrations[migrations.length - 1].id : 0;
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migration (
        id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      const { rows } = await client.query<{ id: number }>('SELECT id FROM schema_migration ORDER BY id');
      const applied = new Set(rows.map((r) => r.id));
      const newest = rows.length ? rows[rows.length - 1].id : 0;
      if (newest > known) throw new SchemaTooNewError(newest, known);
      const done: number[] = [];
      for (const m of migrations) {
        if (applied.has(m.id)) continue;
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO schema_migration (id, name) VALUES ($1, $2)', [m.id, m.name]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw new Error(`migration ${m.name} failed: ${(err as Error).message}`, { cause: err });
        }
        done.push(m.id);
      }
      return done;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } finally {
    client.release();
  }
}
