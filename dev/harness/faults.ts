/**
 * Fault-injection harness for crash tests and the recovery bench: a fleet of real worker processes
 * (spawned detached, killed or stopped by process group), the page transaction a worker is inside
 * (found through `pg_stat_activity` and the worker pid in `application_name`), and read-outs of the
 * ledger, the attempts and the events of a version.
 */
import * as net from 'node:net';
import * as os from 'node:os';
import type { Pool } from 'pg';
import format from 'pg-format';
import type { WorkerProcess } from './harness';
import { spawnWorker } from './harness';
import { waitFor, within } from './wait';

/** A spawned worker with the identity it records in the ledger and events (`<pid>@<hostname>`). */
export interface FleetWorker extends WorkerProcess {
  identity: string;
  /** Spawn order, from 1. */
  n: number;
  /** When it started polling (ms since epoch). */
  startedAt: number;
  /** Set once the test killed it. */
  killedAt: number | null;
}

/**
 * The worker processes of one test. `stopAll()` (call it in the test's cleanup) SIGKILLs every
 * worker ever spawned by this fleet, continuing stopped ones first, and waits for them to exit.
 */
export class WorkerFleet {
  readonly all: FleetWorker[] = [];
  constructor(private readonly env: NodeJS.ProcessEnv) {}

  /** Spawns one worker (optionally with extra environment) and waits until it polls. */
  async spawn(extra: Record<string, string> = {}): Promise<FleetWorker> {
    const w = await spawnWorker({ ...this.env, ...extra });
    const fw: FleetWorker = Object.assign(w, {
      identity: `${w.pid}@${os.hostname()}`,
      n: this.all.length + 1,
      startedAt: Date.now(),
      killedAt: null,
    });
    this.all.push(fw);
    return fw;
  }

  /** Workers not killed by the test (and not exited). */
  live(): FleetWorker[] {
    return this.all.filter((w) => w.killedAt === null && w.child.exitCode === null && w.child.signalCode === null);
  }

  byPid(pid: number): FleetWorker | undefined {
    return this.all.find((w) => w.pid === pid);
  }

  /** SIGKILLs a worker's process group; returns the kill time (ms since epoch). */
  kill(w: FleetWorker): number {
    w.kill('SIGKILL');
    w.killedAt = Date.now();
    return w.killedAt;
  }

  /** SIGSTOP / SIGCONT to a worker's process group (a frozen, not dead, worker). */
  stop(w: FleetWorker): void {
    process.kill(-w.pid, 'SIGSTOP');
  }

  cont(w: FleetWorker): void {
    process.kill(-w.pid, 'SIGCONT');
  }

  /** Kills every worker ever spawned and waits (up to 10 s) for each to exit. */
  async stopAll(): Promise<void> {
    for (const w of this.all) {
      try {
        process.kill(-w.pid, 'SIGCONT');
      } catch {
        /* gone */
      }
      w.kill('SIGKILL');
    }
    await Promise.all(this.all.map((w) => within(w.exited, 10_000)));
  }

  /** Output of every worker, for failure messages. */
  outputs(): string {
    return this.all
      .map((w) => `--- worker ${w.n} (${w.identity})${w.killedAt ? ' [killed]' : ''}\n${w.output().slice(-4000)}`)
      .join('\n');
  }
}

/** A catalog session that is inside a page transaction. */
export interface PageTransactionSession {
  /** Worker process id (from `application_name` `catalog-rebuild:worker:<pid>`). */
  workerPid: number;
  /** PostgreSQL backend pid. */
  backendPid: number;
  /** The transaction's id: the same id later means the same, still open, transaction. */
  xid: string;
  state: string;
  query: string;
  /** The session's `application_name` (a page transaction's ends with `:page:<version>:<page>`). */
  app: string;
}

/**
 * Sessions of workers inside a page transaction right now: a write transaction (`backend_xid`
 * assigned: the ledger row is inserted first) that is idle between the page's statements or runs
 * one of them (ledger insert, version `FOR SHARE`, row upsert, checksum, ledger update).
 */
export async function pageTransactions(catalogPool: Pool, workerPids?: number[]): Promise<PageTransactionSession[]> {
  const { rows } = await catalogPool.query<{ app: string; pid: number; xid: string; state: string; query: string }>(
    `SELECT application_name AS app, pid, backend_xid::text AS xid, state, query FROM pg_stat_activity
     WHERE datname = current_database() AND application_name LIKE 'catalog-rebuild:worker:%'
       AND backend_xid IS NOT NULL AND xact_start IS NOT NULL
       AND (state LIKE 'idle in transaction%'
            OR query ~ '(INSERT INTO page \\(|FROM version WHERE version_id = \\$1 FOR SHARE|INSERT INTO "?job_v|COPY "?job_v|COPY pg_temp.file_stage|INSERT INTO "?file_v|pg_sleep|UPDATE page SET rows|string_agg\\(s::text|set_config\\(''application_name'')')`,
  );
  return rows
    .map((r) => ({
      workerPid: Number(r.app.split(':')[2]),
      backendPid: r.pid,
      xid: r.xid,
      state: r.state,
      query: r.query,
      app: r.app,
    }))
    .filter((s) => !workerPids || workerPids.includes(s.workerPid));
}

/**
 * SIGKILLs a worker while it is inside a page transaction, without a race: finds a worker whose
 * session is in a page transaction, freezes it (SIGSTOP: it cannot send COMMIT any more), checks
 * that the same transaction is still open, then SIGKILLs it (PostgreSQL rolls the transaction
 * back). When the transaction ended before the freeze, the worker is continued and the hunt goes on.
 * `match` narrows the sessions hunted (default: any page transaction).
 * @throws Error when no candidate is inside a page transaction within `timeoutMs`.
 */
export async function killInsidePageTransaction(
  catalogPool: Pool,
  fleet: WorkerFleet,
  candidates: () => FleetWorker[] | Promise<FleetWorker[]> = () => fleet.live(),
  timeoutMs = 30_000,
  match: (s: PageTransactionSession) => boolean = () => true,
): Promise<{ worker: FleetWorker; session: PageTransactionSession; at: number }> {
  return waitFor(
    'a worker inside a page transaction',
    async () => {
      const live = await candidates();
      const sessions = (
        await pageTransactions(
          catalogPool,
          live.map((w) => w.pid),
        )
      ).filter(match);
      if (!sessions.length) return null;
      const s = sessions[0];
      const worker = live.find((w) => w.pid === s.workerPid)!;
      fleet.stop(worker);
      const still = (await pageTransactions(catalogPool, [worker.pid])).some(
        (x) => x.backendPid === s.backendPid && x.xid === s.xid,
      );
      if (!still) {
        fleet.cont(worker);
        return null;
      }
      const at = fleet.kill(worker);
      return { worker, session: s, at };
    },
    { timeoutMs, intervalMs: 5 },
  );
}

/** One row of the ledger. */
export interface LedgerRow {
  pageNo: number;
  attempt: number;
  workerIdentity: string;
  rows: number;
  checksum: string;
  /** ms since epoch; null while (never, outside a transaction) uncommitted. */
  committedAt: number | null;
  startedAt: number;
}

/** The ledger of a version, by page number. */
export async function ledger(catalogPool: Pool, versionId: string): Promise<LedgerRow[]> {
  const { rows } = await catalogPool.query<{
    page_no: number;
    attempt: number;
    worker_identity: string;
    rows: number;
    checksum: string;
    committed_ms: string | null;
    started_ms: string;
  }>(
    `SELECT page_no, attempt, worker_identity, rows, checksum,
            (extract(epoch FROM committed_at) * 1000)::bigint::text AS committed_ms,
            (extract(epoch FROM started_at) * 1000)::bigint::text AS started_ms
     FROM page WHERE version_id = $1 ORDER BY page_no`,
    [versionId],
  );
  return rows.map((r) => ({
    pageNo: r.page_no,
    attempt: r.attempt,
    workerIdentity: r.worker_identity,
    rows: r.rows,
    checksum: r.checksum,
    committedAt: r.committed_ms === null ? null : Number(r.committed_ms),
    startedAt: Number(r.started_ms),
  }));
}

/** Ledger checkpoint: highest n such that pages 1..n are committed. */
export function ledgerCheckpoint(rows: LedgerRow[]): number {
  const done = new Set(rows.filter((r) => r.committedAt !== null).map((r) => r.pageNo));
  let n = 0;
  while (done.has(n + 1)) n++;
  return n;
}

/** Attempts registered in `page_attempt` (every attempt, committed or not). */
export async function pageAttempts(
  catalogPool: Pool,
  versionId: string,
): Promise<{ pageNo: number; attempt: number; workerIdentity: string; startedAt: number }[]> {
  const { rows } = await catalogPool.query<{
    page_no: number;
    attempt: number;
    worker_identity: string;
    started_ms: string;
  }>(
    `SELECT page_no, attempt, worker_identity, (extract(epoch FROM started_at) * 1000)::bigint::text AS started_ms
     FROM page_attempt WHERE version_id = $1 ORDER BY page_no, attempt`,
    [versionId],
  );
  return rows.map((r) => ({
    pageNo: r.page_no,
    attempt: r.attempt,
    workerIdentity: r.worker_identity,
    startedAt: Number(r.started_ms),
  }));
}

/**
 * Pages worker `identity` attempted but did not commit: its claim rows, and pages whose
 * `page_retry` event names it (an attempt can die after its first heartbeat, which names its worker,
 * and before its claim row).
 */
export async function lostPages(catalogPool: Pool, versionId: string, identity: string): Promise<number[]> {
  const { rows } = await catalogPool.query<{ page_no: number }>(
    `SELECT DISTINCT x.page_no FROM (
       SELECT a.page_no FROM page_attempt a WHERE a.version_id = $1 AND a.worker_identity = $2
       UNION
       SELECT (e.details->>'pageNo')::int FROM event e
       WHERE e.version_id = $1 AND e.kind = 'page_retry' AND e.details->>'lastWorkerIdentity' = $2
     ) x
     LEFT JOIN page p ON p.version_id = $1 AND p.page_no = x.page_no
     WHERE p.worker_identity IS DISTINCT FROM $2
     ORDER BY 1`,
    [versionId, identity],
  );
  return rows.map((r) => r.page_no);
}

/** One entry of the catalog's event log. */
export interface EventRow {
  kind: string;
  message: string;
  details: Record<string, unknown>;
  createdAt: number;
}

/** Events of a version (optionally of one kind), oldest first. */
export async function events(catalogPool: Pool, versionId: string, kind?: string): Promise<EventRow[]> {
  const { rows } = await catalogPool.query<{
    kind: string;
    message: string;
    details: Record<string, unknown>;
    created_ms: string;
  }>(
    `SELECT kind, message, details, (extract(epoch FROM created_at) * 1000)::bigint::text AS created_ms
     FROM event WHERE version_id = $1 AND ($2::text IS NULL OR kind = $2) ORDER BY event_id`,
    [versionId, kind ?? null],
  );
  return rows.map((r) => ({ kind: r.kind, message: r.message, details: r.details, createdAt: Number(r.created_ms) }));
}

/** Row count and a fingerprint of every row of a version's partition, including each row's `xmin`
 *  (so any rewrite of a row, even with identical values, changes it). */
export async function partitionFingerprint(
  catalogPool: Pool,
  versionId: string,
  where = 'true',
): Promise<{ rows: number; md5: string; xminMd5: string }> {
  const table = `job_v${versionId}`;
  const { rows } = await catalogPool.query<{ n: number; md5: string; xmin_md5: string }>(
    format(
      `SELECT count(*)::int AS n,
              md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t.job_key), '')) AS md5,
              md5(coalesce(string_agg(t.job_key::text || ':' || t.xmin::text, ',' ORDER BY t.job_key), '')) AS xmin_md5
       FROM %I t WHERE ${where}`,
      table,
    ),
  );
  return { rows: rows[0].n, md5: rows[0].md5, xminMd5: rows[0].xmin_md5 };
}

/** What a reader of `active_jobs` sees for one catalog: row count, content md5, versions seen. */
export interface ReaderObservation {
  at: number;
  rows: number;
  md5: string;
  versions: string[];
}

/** The reader's query: one statement, so one snapshot. */
export async function readActive(pool: Pool, catalog: string): Promise<ReaderObservation> {
  const { rows } = await pool.query<{ n: number; md5: string | null; versions: string[] | null }>(
    `SELECT count(*)::int AS n,
            md5(string_agg(concat_ws('|', job_id, job, job_name, client, type, level, status, start_time, end_time, files, bytes, pool, fileset),
                           E'\\n' ORDER BY job_id::bigint)) AS md5,
            array_agg(DISTINCT version_id::text) AS versions
     FROM active_jobs WHERE catalog_name = $1`,
    [catalog],
  );
  return {
    at: Date.now(),
    rows: rows[0].n,
    md5: rows[0].md5 ?? '',
    versions: (rows[0].versions ?? []).filter((v) => v !== null),
  };
}

/**
 * A reader of `active_jobs` that queries in a loop until stopped, like the backup check does.
 * `stop()` returns every observation.
 */
export function startReaderLoop(
  pool: Pool,
  catalog: string,
): { stop(): Promise<ReaderObservation[]>; errors: unknown[] } {
  const seen: ReaderObservation[] = [];
  const errors: unknown[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        seen.push(await readActive(pool, catalog));
      } catch (err) {
        errors.push(err);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    errors,
    async stop() {
      running = false;
      await loop;
      return seen;
    },
  };
}

/** Median of numbers (mean of the middle two for an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * A TCP proxy in front of the Temporal frontend for one worker, so a test can partition that worker
 * from Temporal (`cut()`: every proxied connection is closed and new ones are refused; the server
 * drops the worker's pending polls) and heal it again (`heal()`), while its PostgreSQL sessions stay.
 */
export class TemporalProxy {
  private readonly sockets = new Set<net.Socket>();
  private cutOff = false;
  private constructor(
    private readonly server: net.Server,
    /** `127.0.0.1:<port>`: the address to give the worker as TEMPORAL_ADDRESS. */
    readonly address: string,
  ) {}

  /** Starts a proxy on a free port forwarding to `target` (`host:port`). */
  static async start(target: string): Promise<TemporalProxy> {
    const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
    let proxy: TemporalProxy | undefined;
    const server = net.createServer((inbound) => {
      if (!proxy || proxy.cutOff) {
        inbound.destroy();
        return;
      }
      const outbound = net.connect({ host, port });
      for (const s of [inbound, outbound]) {
        proxy.sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          proxy!.sockets.delete(s);
          inbound.destroy();
          outbound.destroy();
        });
      }
      inbound.pipe(outbound);
      outbound.pipe(inbound);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const addr = server.address() as net.AddressInfo;
    proxy = new TemporalProxy(server, `127.0.0.1:${addr.port}`);
    return proxy;
  }

  /** Closes every proxied connection and refuses new ones. */
  cut(): void {
    this.cutOff = true;
    for (const s of this.sockets) s.destroy();
  }

  /** Accepts connections again. */
  heal(): void {
    this.cutOff = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
