/**
 * `status` support: progress formatting, the catalog database fallback (when no worker answers the
 * `progress` query), live poller counting, and `status --follow` (a live bar on a terminal, a line
 * every 5 s otherwise) with warnings for "no worker answered", "no worker polls" and "stalled".
 */
import type { SingleBar } from 'cli-progress';
import { MultiBar, Presets } from 'cli-progress';
import type { Pool } from 'pg';
import { temporal } from '@temporalio/proto';
import type { TemporalSession } from './index';
import type { RebuildProgress, ReconcileSummary } from '../workflows/definitions';
import { activeVersionId as readActiveVersionId } from '../lib/catalog/publish';
import type { RebuildRunKey, StoredReconciliation } from '../lib/catalog/status';
import { readLatestReconciliation, readLatestVersionProgress } from '../lib/catalog/status';
import { readLastEventMessage } from '../lib/catalog/event-reads';

/** One-line human summary of a progress answer. */
export function formatProgress(p: RebuildProgress): string {
  const pct = p.pagesTotal ? Math.floor((100 * p.pagesDone) / p.pagesTotal) : 0;
  const eta = p.etaSeconds === null ? '?' : `${p.etaSeconds}s`;
  return (
    `${p.catalog}: ${p.phase}${p.paused ? ' (paused)' : ''}${p.draining ? ' (draining)' : ''} · version ${p.versionId ?? '-'} · ` +
    `page ${p.pagesDone}/${p.pagesTotal} (${pct}%) · checkpoint ${p.checkpoint} · ${p.rowsUpserted} rows · ` +
    `${p.rowsPerSecond} rows/s · eta ${eta} · ${p.retries} retries · ${p.rejects} rejects\nlast event: ${p.lastEvent}`
  );
}

/** What the catalog database says about a catalog's latest rebuild (when no worker answers). */
export interface DatabaseStatus {
  catalog: string;
  activeVersionId: string | null;
  latest: null | {
    versionId: string;
    status: string;
    pagesTotal: number;
    pagesCommitted: number;
    /** Highest n such that pages 1..n are committed. */
    checkpoint: number;
    rows: number;
    /** Quarantined records of the version. */
    rejects: number;
    /** Page attempts beyond the first of each page. */
    retries: number;
    /** Why the version failed or was abandoned; null otherwise. */
    failureReason: string | null;
    lastCommitAt: string | null;
    /** Seconds since the last committed page; null when no page has committed. */
    secondsSinceProgress: number | null;
    /** Seconds since the version was planned. */
    secondsSinceCreated: number;
  };
  /** The latest reconciliation round of that version; null when it was never reconciled. */
  reconciliation: ReconcileSummary | null;
  lastEvent: string | null;
}

/** The summary fields of a stored reconciliation report (missing numbers read as 0). */
function reconcileSummaryOf(r: StoredReconciliation): ReconcileSummary {
  const x = r.report;
  const n = (k: string) => (typeof x[k] === 'number' ? (x[k] as number) : 0);
  return {
    round: r.round,
    ok: r.ok,
    buckets: n('buckets'),
    sourceRows: n('sourceRows'),
    catalogRows: n('catalogRows'),
    rejects: n('rejects'),
    mismatched: Array.isArray(x.mismatched) ? (x.mismatched as string[]) : [],
    delta: n('delta'),
    duplicateJobNames: n('duplicateJobNames'),
    sampleMismatches: n('sampleMismatches'),
    sampled: n('sampled'),
  };
}

/**
 * The catalog database's view of a catalog: its active version, its latest version (with `run`:
 * the version that rebuild planned) with ledger counts and latest reconciliation
 * (`lib/catalog/status.ts`), and the newest event message (`lib/catalog/event-reads.ts`), read one
 * after the other (not one snapshot). Ages are rounded to whole seconds.
 */
export async function catalogStatusFromDatabase(
  pool: Pool,
  catalog: string,
  run?: RebuildRunKey,
): Promise<DatabaseStatus> {
  const activeVersionId = await readActiveVersionId(pool, catalog);
  const l = await readLatestVersionProgress(pool, catalog, run);
  const reconciliation = l ? await readLatestReconciliation(pool, l.versionId) : null;
  const lastEvent = await readLastEventMessage(pool, catalog);
  return {
    catalog,
    activeVersionId,
    latest: l
      ? {
          versionId: l.versionId,
          status: l.status,
          pagesTotal: l.pagesTotal,
          pagesCommitted: l.pagesCommitted,
          checkpoint: l.checkpoint,
          rows: l.rows,
          rejects: l.rejects,
          retries: l.retries,
          failureReason: l.failureReason,
          lastCommitAt: l.lastCommitAt ? l.lastCommitAt.toISOString() : null,
          secondsSinceProgress: l.secondsSinceLastCommit === null ? null : Math.round(l.secondsSinceLastCommit),
          secondsSinceCreated: Math.round(l.secondsSinceCreated),
        }
      : null,
    reconciliation: reconciliation ? reconcileSummaryOf(reconciliation) : null,
    lastEvent,
  };
}

/**
 * Seconds within which a poller must have polled to count as live. An idle worker's long poll
 * lasts up to about 60 s before it polls again, so a live worker is always seen within this window;
 * the server itself lists a dead worker's pollers for minutes (its poller history TTL).
 */
export const LIVE_POLLER_WINDOW_SECONDS = 75;

/** A worker seen polling the task queue. */
export interface PollerSeen {
  identity: string;
  /** Seconds since its last poll started (by this machine's clock). */
  lastPollSecondsAgo: number | null;
}

/**
 * Workers (distinct identities) that polled the task queue for workflow or activity tasks within
 * `windowSeconds` (default {@link LIVE_POLLER_WINDOW_SECONDS}).
 */
export async function livePollers(
  session: TemporalSession,
  windowSeconds = LIVE_POLLER_WINDOW_SECONDS,
): Promise<PollerSeen[]> {
  const kinds = [
    temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
  ];
  const seen = new Map<string, number | null>();
  const now = Date.now();
  for (const taskQueueType of kinds) {
    const r = await session.client.workflowService.describeTaskQueue({
      namespace: session.namespace,
      taskQueue: { name: session.taskQueue },
      taskQueueType,
    });
    for (const p of r.pollers ?? []) {
      if (!p.identity) continue;
      const ago =
        p.lastAccessTime?.seconds != null
          ? Math.max(0, Math.round((now - Number(p.lastAccessTime.seconds) * 1000) / 1000))
          : null;
      const prev = seen.get(p.identity);
      seen.set(
        p.identity,
        prev === undefined ? ago : prev === null || ago === null ? (prev ?? ago) : Math.min(prev, ago),
      );
    }
  }
  return [...seen]
    .filter(([, ago]) => ago === null || ago <= windowSeconds)
    .map(([identity, lastPollSecondsAgo]) => ({ identity, lastPollSecondsAgo }));
}

/** One observation of a rebuild by `status --follow`. */
export type FollowSample =
  | { answeredBy: 'workflow'; progress: RebuildProgress }
  | { answeredBy: 'database'; queryError: string; database: DatabaseStatus };

/** What `status --follow` needs; the CLI wires it to Temporal and the catalog database. */
export interface FollowDeps {
  /** Queries `progress`; rejects when no worker answers within the query timeout. */
  query(): Promise<RebuildProgress>;
  /** The catalog database's view of the latest version. */
  fromDatabase(): Promise<DatabaseStatus>;
  /** Live workers polling the task queue; rejects when Temporal cannot tell. */
  pollers(): Promise<number>;
  /** Settles when the rebuild closes, with its exit code and result lines. */
  outcome: Promise<{ code: number; lines: string[] }>;
}

/** Options of {@link followStatus}. */
export interface FollowOptions {
  catalog: string;
  taskQueue: string;
  /** Normal output (one call per line). */
  out: (s: string) => void;
  /** Draw a live bar on this terminal stream; otherwise print a line every `lineEveryMs`. */
  tty?: NodeJS.WriteStream | null;
  /** Poll period (ms); default 1,000. */
  pollMs?: number;
  /** Line period on a non-terminal (ms); default 5,000. */
  lineEveryMs?: number;
  /** Period of the poller check (ms); default 5,000. */
  pollersEveryMs?: number;
  /** No committed page for this long is a stall (ms); default 600,000 (10 minutes). */
  stallAfterMs?: number;
  /** The query timeout used by `deps.query` (ms), for messages; default 5,000. */
  queryTimeoutMs?: number;
}

function pct(done: number, total: number): number {
  return total ? Math.floor((100 * done) / total) : 0;
}

function fmtSeconds(s: number | null): string {
  if (s === null) return '?';
  if (s < 90) return `${s}s`;
  if (s < 5400) return `${Math.round(s / 60)}m`;
  return `${(s / 3600).toFixed(1)}h`;
}

/** One line of `status --follow` on a non-terminal. */
export function formatSample(x: FollowSample): string {
  if (x.answeredBy === 'workflow') {
    const p = x.progress;
    return (
      `${p.catalog}: ${p.phase}${p.paused ? ' (paused)' : ''}${p.draining ? ' (draining)' : ''} · page ${p.pagesDone}/${p.pagesTotal} (${pct(p.pagesDone, p.pagesTotal)}%) · ` +
      `${p.rowsUpserted} rows · ${p.rowsPerSecond} rows/s · eta ${fmtSeconds(p.etaSeconds)} · ${p.retries} retries`
    );
  }
  const l = x.database.latest;
  if (!l) return `${x.database.catalog}: no version in the catalog database (from the database)`;
  return (
    `${x.database.catalog}: version ${l.versionId} ${l.status} · page ${l.pagesCommitted}/${l.pagesTotal} (${pct(l.pagesCommitted, l.pagesTotal)}%) · ` +
    `${l.rows} rows · last page ${l.secondsSinceProgress === null ? 'none yet' : `${fmtSeconds(l.secondsSinceProgress)} ago`} (from the database)`
  );
}

/** Seconds without a committed page per the database sample, when the version is still being built. */
function databaseIdleSeconds(d: DatabaseStatus): number | null {
  const l = d.latest;
  if (!l || l.status !== 'building') return null;
  return l.secondsSinceProgress ?? l.secondsSinceCreated;
}

/**
 * Follows a rebuild until it closes: polls every second, falls back to the catalog database when
 * the query does not answer, warns when no worker polls the task queue or no page committed for
 * `stallAfterMs`. Returns the exit code of the outcome (0 published, 1 otherwise).
 * @throws what `deps.outcome` rejects with (e.g. the workflow does not exist).
 */
export async function followStatus(deps: FollowDeps, o: FollowOptions): Promise<number> {
  const pollMs = o.pollMs ?? 1_000;
  const lineEveryMs = o.lineEveryMs ?? 5_000;
  const pollersEveryMs = o.pollersEveryMs ?? 5_000;
  const stallAfterMs = o.stallAfterMs ?? 600_000;
  const queryTimeoutS = Math.round((o.queryTimeoutMs ?? 5_000) / 1000);
  let closed = false;
  const outcome = deps.outcome.finally(() => {
    closed = true;
  });
  outcome.catch(() => undefined);

  let multi: MultiBar | null = null;
  let bar: SingleBar | null = null;
  const say = (s: string) => (multi ? multi.log(`${s}\n`) : o.out(s));
  const warnings = new Map<string, string>();
  const setWarning = (key: string, on: boolean, text: string) => {
    if (on && warnings.get(key) !== text) {
      if (!warnings.has(key)) say(`warning: ${text}`);
      warnings.set(key, text);
    } else if (!on && warnings.has(key)) {
      warnings.delete(key);
      say(
        `ok: ${key === 'no-answer' ? 'the workflow answers the progress query again' : key === 'no-pollers' ? 'a worker polls the task queue again' : 'pages are committing again'}`,
      );
    }
  };

  let lastKey = '';
  let lastChangeMs = Date.now();
  let lastLineMs = 0;
  let lastPollersMs = 0;
  let pollers: number | null = null;

  try {
    while (!closed) {
      const tick = Date.now();
      let sample: FollowSample;
      try {
        sample = { answeredBy: 'workflow', progress: await deps.query() };
      } catch (err) {
        if (closed) break;
        let database: DatabaseStatus;
        try {
          database = await deps.fromDatabase();
        } catch (dbErr) {
          say(
            `warning: no answer from the workflow (${(err as Error).message}) nor from the catalog database (${(dbErr as Error).message})`,
          );
          await Promise.race([new Promise((r) => setTimeout(r, pollMs)), outcome.catch(() => undefined)]);
          continue;
        }
        sample = { answeredBy: 'database', queryError: (err as Error).message, database };
      }
      if (closed) break;
      const now = Date.now();

      if (now - lastPollersMs >= pollersEveryMs) {
        lastPollersMs = now;
        pollers = await deps.pollers().catch(() => null);
      }
      setWarning('no-pollers', pollers === 0, `no worker polls task queue ${o.taskQueue}`);
      setWarning(
        'no-answer',
        sample.answeredBy === 'database',
        `no worker answered the progress query within ${queryTimeoutS} s; showing the catalog database`,
      );

      // Stalled: no page committed for stallAfterMs (from the ledger, or from progress not changing).
      let idleS: number | null = null;
      if (sample.answeredBy === 'workflow') {
        const p = sample.progress;
        const key = `${p.phase}|${p.pagesDone}|${p.rowsUpserted}`;
        if (key !== lastKey) {
          lastKey = key;
          lastChangeMs = now;
        }
        if (p.phase === 'copying' && !p.paused && p.pagesDone < p.pagesTotal)
          idleS = Math.floor((now - lastChangeMs) / 1000);
      } else {
        idleS = databaseIdleSeconds(sample.database);
      }
      const stalled = idleS !== null && idleS * 1000 >= stallAfterMs;
      setWarning('stalled', stalled, `stalled: no page committed for ${fmtSeconds(idleS)}`);

      if (o.tty) {
        const done =
          sample.answeredBy === 'workflow' ? sample.progress.pagesDone : (sample.database.latest?.pagesCommitted ?? 0);
        const total =
          sample.answeredBy === 'workflow' ? sample.progress.pagesTotal : (sample.database.latest?.pagesTotal ?? 0);
        const payload =
          sample.answeredBy === 'workflow'
            ? {
                rps: sample.progress.rowsPerSecond.toLocaleString('en-US'),
                etaText: fmtSeconds(sample.progress.etaSeconds),
                retries: sample.progress.retries,
                phase: `${sample.progress.phase}${sample.progress.paused ? ' (paused)' : ''}${sample.progress.draining ? ' (draining)' : ''}`,
                flags: [...warnings.keys()].map((k) => ` ! ${k}`).join(''),
              }
            : {
                rps: '?',
                etaText: '?',
                retries: '?',
                phase: `${sample.database.latest?.status ?? 'no version'} (from the database)`,
                flags: [...warnings.keys()].map((k) => ` ! ${k}`).join(''),
              };
        if (!multi) {
          multi = new MultiBar(
            {
              stream: o.tty,
              format: `${o.catalog} [{bar}] {value}/{total} pages {percentage}% | {rps} rows/s | ETA {etaText} | {retries} retries | {phase}{flags}`,
              hideCursor: true,
              clearOnComplete: false,
              gracefulExit: true,
            },
            Presets.shades_classic,
          );
          bar = multi.create(Math.max(total, 1), done, payload);
        } else {
          bar!.setTotal(Math.max(total, 1));
          bar!.update(done, payload);
        }
      } else if (now - lastLineMs >= lineEveryMs) {
        lastLineMs = now;
        const extra = stalled ? ' · STALLED' : '';
        o.out(`${new Date(now).toISOString()} ${formatSample(sample)}${extra}`);
      }

      const wait = Math.max(0, tick + pollMs - Date.now());
      await Promise.race([new Promise((r) => setTimeout(r, wait)), outcome.catch(() => undefined)]);
    }
  } finally {
    multi?.stop();
  }
  const r = await outcome;
  for (const line of r.lines) o.out(line);
  return r.code;
}
