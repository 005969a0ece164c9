/**
 * `catalog-rebuild check`: the Nagios/Icinga backup check on the active catalog version, or with
 * `--rebuild` the health check of the catalog's latest rebuild. Its own failures are UNKNOWN (3)
 * with a status line on stdout, never a usage exit code.
 */
import type { Pool } from 'pg';
import { checkCatalog, NagiosState, unknownLine } from '../check';
import type { TemporalSession } from '../index';
import { evaluateRebuildHealth, rebuildUnknownLine } from '../rebuild-health';
import { rebuildThresholds } from '../rebuild-thresholds';
import type { CommandContext } from './context';

/** How long `check --rebuild` waits for the `progress` query before it goes on without it (ms). */
export const PROGRESS_QUERY_TIMEOUT_MS = 2_000;

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
  /** Check the latest rebuild's health instead of the active version (`--rebuild`). */
  rebuild?: boolean;
}

/**
 * Runs the check and prints its one status line.
 * @returns the Nagios code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (no configuration, no active
 *   version, database unreachable or silent for `timeout` seconds).
 */
export async function checkCommand(ctx: CommandContext, o: CheckCommandOptions): Promise<number> {
  if (o.rebuild) return rebuildCheckCommand(ctx, o);
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

/**
 * `check --rebuild`: reads the facts about the catalog's latest rebuild (Temporal, its pollers,
 * the catalog database; `client/rebuild-facts.ts`) and prints the verdict of `evaluateRebuildHealth`.
 * @returns the Nagios code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (no rebuild ever ran, Temporal
 *   unreachable, or no answer within `timeout` seconds).
 */
async function rebuildCheckCommand(ctx: CommandContext, o: CheckCommandOptions): Promise<number> {
  const held: { session: TemporalSession | null; pool: Pool | null; released: boolean } = {
    session: null,
    pool: null,
    released: false,
  };
  const release = async () => {
    held.released = true;
    await held.pool?.end().catch(() => undefined);
    await held.session?.close().catch(() => undefined);
    held.pool = null;
    held.session = null;
  };
  const check = async (): Promise<{ code: number; line: string }> => {
    let session: TemporalSession;
    try {
      session = held.session = await ctx.connectTemporal();
    } catch (e) {
      return { code: NagiosState.UNKNOWN, line: rebuildUnknownLine((e as Error).message) };
    }
    // The deadline passed while connecting: the caller has answered; close what came late.
    if (held.released) {
      await release();
      return { code: NagiosState.UNKNOWN, line: '' };
    }
    let poolError: string | null = null;
    try {
      held.pool = ctx.catalogPool({ purpose: 'check', max: 2, statementTimeoutMs: o.timeout * 1000 });
    } catch (e) {
      poolError = (e as Error).message;
    }
    // Loaded here: a check of the catalog alone never loads @temporalio/client.
    const { readRebuildFacts } = await import('../rebuild-facts');
    const { withScheduleHealth } = await import('../schedule-check');
    const thresholds = rebuildThresholds();
    const facts = await readRebuildFacts(session, held.pool, o.catalog, {
      poolError,
      noPollerSeconds: thresholds.noPollerSeconds,
      queryTimeoutMs: PROGRESS_QUERY_TIMEOUT_MS,
    });
    // The catalog's schedule, when it has one (client/schedule-health.ts).
    const r = await withScheduleHealth(evaluateRebuildHealth(facts, Date.now(), thresholds), session.client, o.catalog);
    return { code: r.code, line: r.line };
  };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<{ code: number; line: string }>((resolve) => {
    timer = setTimeout(
      () =>
        resolve({
          code: NagiosState.UNKNOWN,
          line: rebuildUnknownLine(`no answer from Temporal and the catalog database within ${o.timeout} s`),
        }),
      o.timeout * 1000,
    );
  });
  // Past the deadline the check goes on against a released session and may fail: nobody waits for it.
  const checking = check();
  checking.catch(() => undefined);
  try {
    const r = await Promise.race([checking, deadline]);
    ctx.out(r.line);
    return r.code;
  } finally {
    clearTimeout(timer);
    await release();
  }
}
