/**
 * The backup check (`catalog-rebuild check`): a Nagios/Icinga plugin over the *active* version of a
 * catalog. Its reads (`lib/catalog/check.ts`) see the reader view `active_jobs` (and the `active`
 * pointer, to tell "no active version" from "active but empty"), so a rebuild in progress never
 * changes its answer until the atomic publish; this module turns them into the Nagios status line.
 *
 * Rules: only backup jobs (type `B`) count. Clients in scope are the `clients` given, else every
 * non-empty client with a backup job in the lookback window (none at all: CRITICAL). Per client the
 * time of a job is its start time, else its end time; a good backup (`T` without `JobErrors`) within
 * the maximum age is OK, else a warning backup (`W`, or `T` with `JobErrors` > 0: Bacula's "Backup
 * OK -- with warnings") within the maximum age is WARNING, else CRITICAL. No active version, or a
 * database that cannot be read: UNKNOWN. Ages are measured from the database's `now()`.
 */
import type { Pool, PoolClient } from 'pg';
import type { BackupCheckSnapshot } from '../lib/catalog/check';
import { readBackupCheck } from '../lib/catalog/check';

/** Nagios plugin states and their exit codes. */
export const NagiosState = { OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3 } as const;
/** A Nagios exit code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. */
export type NagiosCode = (typeof NagiosState)[keyof typeof NagiosState];

const STATE_NAMES = ['OK', 'WARNING', 'CRITICAL', 'UNKNOWN'] as const;

/** Default maximum age of the newest good backup: 26 hours (seconds). */
export const DEFAULT_MAX_AGE_SECONDS = 26 * 3600;
/** Default lookback that decides which clients are in scope: 35 days (seconds). */
export const DEFAULT_LOOKBACK_SECONDS = 35 * 86400;
/** Client names listed in the status line at most; the rest are counted. */
export const MAX_NAMED_CLIENTS = 8;

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/**
 * Parses a duration like `26h`, `35d`, `90m` or `3600s` into seconds.
 * @throws Error naming the accepted forms for anything else (zero, negative, bare numbers).
 */
export function parseDuration(text: string): number {
  const m = /^(\d{1,9})([smhd])$/.exec(text.trim());
  if (!m || Number(m[1]) === 0)
    throw new Error(
      `invalid duration ${JSON.stringify(text)}: use a positive whole number with s, m, h or d (e.g. 26h, 35d, 90m, 3600s)`,
    );
  return Number(m[1]) * UNIT_SECONDS[m[2]];
}

/** Formats seconds as a short duration (`35d`, `26h`, `90m`, `45s`) for messages. */
export function formatDuration(seconds: number): string {
  for (const [unit, n] of [
    ['d', 86400],
    ['h', 3600],
    ['m', 60],
  ] as const)
    if (seconds >= n && seconds % n === 0) return `${seconds / n}${unit}`;
  return `${seconds}s`;
}

/** Options of {@link checkCatalog}. */
export interface CheckOptions {
  /** Catalog name. */
  catalog: string;
  /** Maximum age (seconds) of the newest T (or W) backup of each client; default 26 h. */
  maxAgeSeconds?: number;
  /** Window (seconds) in which a client must have a backup job to be in scope; default 35 d. Ignored with `clients`. */
  lookbackSeconds?: number;
  /** Clients to check (exact names); default: every client with a backup job in the lookback. */
  clients?: string[];
  /** Reference time (ISO 8601) instead of the database's `now()`; for tests. */
  now?: string;
}

/** The state of one client. */
export interface ClientState {
  client: string;
  state: 'OK' | 'WARNING' | 'CRITICAL';
  /** Seconds since the newest T or W backup (any age), null when there is none. */
  ageSeconds: number | null;
}

/** Result of {@link checkCatalog}: the exit code and the one status line (with perfdata). */
export interface CheckResult {
  code: NagiosCode;
  line: string;
  /** Per-client states (empty for UNKNOWN). */
  clients: ClientState[];
  /** The active version read, null for UNKNOWN. */
  versionId: string | null;
}

function nameList(names: string[]): string {
  const shown = names.slice(0, MAX_NAMED_CLIENTS).join(', ');
  return names.length > MAX_NAMED_CLIENTS ? `${shown}, ... (${names.length - MAX_NAMED_CLIENTS} more)` : shown;
}

/** Status line for an UNKNOWN result (no perfdata). */
export function unknownLine(message: string): string {
  return `CATALOG UNKNOWN - ${message.replace(/[\r\n|]+/g, ' ')}`;
}

/**
 * The status line, exit code and per-client states of a check from what the catalog database
 * returned (pure: no I/O).
 * @param o the check's options (catalog, limits); defaults as in {@link checkCatalog}.
 * @param snapshot the active version and the clients in scope, from `readBackupCheck`.
 */
export function checkResult(o: CheckOptions, snapshot: BackupCheckSnapshot): CheckResult {
  const maxAge = o.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS;
  const lookback = o.lookbackSeconds ?? DEFAULT_LOOKBACK_SECONDS;
  const versionId = snapshot.versionId;
  if (!versionId) {
    return {
      code: NagiosState.UNKNOWN,
      line: unknownLine(`catalog ${o.catalog} has no active (published) version`),
      clients: [],
      versionId: null,
    };
  }
  const states: ClientState[] = snapshot.clients.map((r) => ({
    client: r.client,
    state: r.hasGoodBackup ? 'OK' : r.hasWarningBackup ? 'WARNING' : 'CRITICAL',
    ageSeconds: r.newestAgeSeconds === null ? null : Math.max(0, Math.round(r.newestAgeSeconds)),
  }));
  const ok = states.filter((s) => s.state === 'OK');
  const warning = states.filter((s) => s.state === 'WARNING');
  const critical = states.filter((s) => s.state === 'CRITICAL');
  const ages = states.map((s) => s.ageSeconds).filter((a): a is number => a !== null);
  const perf =
    `clients_ok=${ok.length} clients_warning=${warning.length} clients_critical=${critical.length} ` +
    `oldest_age_seconds=${ages.length ? Math.max(...ages) : 'U'}`;
  const where = `catalog ${o.catalog} version ${versionId}`;
  const limit = `max age ${formatDuration(maxAge)}`;

  let code: NagiosCode;
  let text: string;
  if (!states.length) {
    code = NagiosState.CRITICAL;
    text = `no client has a backup job in the last ${formatDuration(lookback)} (${where})`;
  } else if (critical.length) {
    code = NagiosState.CRITICAL;
    const w = warning.length ? `; ${warning.length} warning: ${nameList(warning.map((s) => s.client))}` : '';
    text = `${critical.length} of ${states.length} clients without a good backup within ${limit}: ${nameList(critical.map((s) => s.client))}${w} (${where})`;
  } else if (warning.length) {
    code = NagiosState.WARNING;
    text = `${warning.length} of ${states.length} clients with only warning backups (W, or T with job errors) within ${limit}: ${nameList(warning.map((s) => s.client))} (${where})`;
  } else {
    code = NagiosState.OK;
    text = `${ok.length} clients ok (${where}, ${limit})`;
  }
  return {
    code,
    line: `CATALOG ${STATE_NAMES[code]} - ${text.replace(/[\r\n|]+/g, ' ')} | ${perf}`,
    clients: states,
    versionId,
  };
}

/**
 * Runs the backup check against the catalog database in one read-only, repeatable-read
 * transaction (pointer and rows from the same snapshot; `readBackupCheck`).
 * Never throws for database errors: an unreachable or unreadable database is UNKNOWN.
 */
export async function checkCatalog(pool: Pool, o: CheckOptions): Promise<CheckResult> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    return {
      code: NagiosState.UNKNOWN,
      // A pool that names its database (the CLI's) already says `catalog database host:port/db (setting): …`.
      line: unknownLine(
        `cannot connect to the ${(err as Error).message.replace(/^(?!catalog database )/, 'catalog database: ')}`,
      ),
      clients: [],
      versionId: null,
    };
  }
  let failed = false;
  try {
    const snapshot = await readBackupCheck(client, {
      catalog: o.catalog,
      maxAgeSeconds: o.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS,
      lookbackSeconds: o.lookbackSeconds ?? DEFAULT_LOOKBACK_SECONDS,
      clients: [...new Set(o.clients ?? [])],
      now: o.now ?? null,
    });
    return checkResult(o, snapshot);
  } catch (err) {
    failed = true;
    return {
      code: NagiosState.UNKNOWN,
      line: unknownLine(`cannot read catalog ${o.catalog}: ${(err as Error).message}`),
      clients: [],
      versionId: null,
    };
  } finally {
    // After a failed read the session may be unusable (its rollback may have failed too): discard it.
    client.release(failed);
  }
}
