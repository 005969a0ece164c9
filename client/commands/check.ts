/**
 * `catalog-rebuild check`: the Nagios/Icinga backup check on the active catalog version. Its own
 * failures are UNKNOWN (3) with a status line on stdout, never a usage exit code.
 */
import { checkCatalog, NagiosState, unknownLine } from '../check';
import type { CommandContext } from './context';

/** Options of `check` (durations already in seconds). */
export interface CheckCommandOptions {
  catalog: string;
  /** Maximum age of the newest good backup of each client (s). */
  maxAge: number;
  /** Window in which a client must have a backup job to be in scope (s). */
  lookback: number;
  /** Clients to check; default every client with a backup job in the lookback. */
  client?: string[];
  /** Give up with UNKNOWN after this long (s); also the statement timeout. */
  timeout: number;
  /** Reference time (ISO 8601) instead of the database's now(). */
  now?: string;
}

/**
 * Runs the check and prints its one status line.
 * @returns the Nagios code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (no configuration, no active
 *   version, database unreachable or silent for `timeout` seconds).
 */
export async function checkCommand(ctx: CommandContext, o: CheckCommandOptions): Promise<number> {
  let pool;
  try {
    pool = ctx.catalogPool({ purpose: 'check', max: 1, statementTimeoutMs: o.timeout * 1000 });
  } catch (e) {
    ctx.out(unknownLine((e as Error).message));
    return NagiosState.UNKNOWN;
  }
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<{ code: number; line: string }>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            code: NagiosState.UNKNOWN,
            line: unknownLine(`no answer from the catalog database within ${o.timeout} s`),
          }),
        o.timeout * 1000,
      );
    });
    const r = await Promise.race([
      checkCatalog(pool, {
        catalog: o.catalog,
        maxAgeSeconds: o.maxAge,
        lookbackSeconds: o.lookback,
        clients: o.client,
        now: o.now,
      }),
      timeout,
    ]);
    ctx.out(r.line);
    return r.code;
  } finally {
    clearTimeout(timer);
    await pool.end().catch(() => undefined);
  }
}
