/**
 * What a CLI command handler works with: an output function, the terminal (if any), a way to
 * connect to Temporal and a way to open a pool on the catalog database. The CLI builds the real
 * one with {@link processContext}; tests pass their own.
 */
import type { Pool } from 'pg';
import type { TemporalSession } from '../index';
import { catalogDatabaseDescription, loadConfig } from '../../lib/config';
import { createPool } from '../../lib/db';

/**
 * A command's outcome with a diagnostic: the CLI prints `catalog-rebuild: <message>` on stderr
 * (nothing when the message is empty) and exits with `code`.
 */
export class ExitCode extends Error {
  constructor(
    readonly code: number,
    message = '',
  ) {
    super(message);
  }
}

/** Options of {@link CommandContext.catalogPool}. */
export interface CatalogPoolRequest {
  /** Who opens it, shown in `application_name` as `catalog-rebuild:<purpose>:<pid>`. */
  purpose: 'cli' | 'check';
  /** Pool size (connections). */
  max: number;
  /** Per-statement timeout (ms); default that of `createPool` (30,000). */
  statementTimeoutMs?: number;
}

/** The surroundings of a command handler. */
export interface CommandContext {
  /** Normal output, one call per line (stdout for the CLI). */
  out: (line: string) => void;
  /** Terminal to draw live progress on; null when stdout is not a terminal. */
  tty: NodeJS.WriteStream | null;
  /**
   * Connects to Temporal; the caller closes the session.
   * @throws ExitCode 1 naming the address when the service is unreachable.
   */
  connectTemporal(): Promise<TemporalSession>;
  /**
   * Opens a pool on the catalog database named by the configuration; the caller ends it. Its
   * errors name the database and its setting (`catalog database host:port/db (catalogDatabaseUrl in
   * <file>)`), without credentials.
   * @throws the configuration error (missing file, invalid key) before any connection.
   */
  catalogPool(request: CatalogPoolRequest): Pool;
}

/**
 * The context of a CLI process: Temporal from the `@temporalio/envconfig` variables, the catalog
 * database from `CATALOG_REBUILD_CONFIG` / `CATALOG_DATABASE_URL`, the terminal from stdout.
 * @param out receives normal output lines.
 */
export function processContext(out: (line: string) => void): CommandContext {
  return {
    out,
    get tty() {
      return process.stdout.isTTY ? process.stdout : null;
    },
    async connectTemporal() {
      // Loaded here, not at the top: commands that only read the catalog database never load
      // @temporalio/client (about 40 % of such a command's start-up).
      const { connectTemporal } = await import('../index');
      try {
        return await connectTemporal();
      } catch (err) {
        throw new ExitCode(
          1,
          `cannot connect to Temporal at ${process.env.TEMPORAL_ADDRESS ?? 'localhost:7233'}: ${(err as Error).message}`,
        );
      }
    },
    catalogPool(request) {
      const config = loadConfig();
      return createPool(config.catalogDatabaseUrl, {
        describe: catalogDatabaseDescription(config.catalogDatabaseUrl),
        applicationName: `catalog-rebuild:${request.purpose}:${process.pid}`,
        max: request.max,
        statementTimeoutMs: request.statementTimeoutMs,
      });
    },
  };
}

/** Runs `fn` with a Temporal session and closes it afterwards. */
export async function withTemporal<T>(ctx: CommandContext, fn: (session: TemporalSession) => Promise<T>): Promise<T> {
  const session = await ctx.connectTemporal();
  try {
    return await fn(session);
  } finally {
    await session.close();
  }
}

/**
 * Runs `fn` with a pool of 2 connections on the catalog database and ends it afterwards.
 * @throws the configuration error when the catalog database is not configured.
 */
export async function withCatalogPool<T>(ctx: CommandContext, fn: (pool: Pool) => Promise<T>): Promise<T> {
  const pool = ctx.catalogPool({ purpose: 'cli', max: 2 });
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}
