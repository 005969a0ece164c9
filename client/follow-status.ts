/**
 * `catalog-rebuild status --follow`: samples a running rebuild every second (its facts,
 * client/rebuild-facts.ts: the `progress` query, or the catalog database when no worker answers),
 * draws a progress bar on a terminal or a line every few seconds otherwise, and warns when no worker
 * of the rebuild's build polls or no page commits.
 */
import type { SingleBar } from 'cli-progress';
import { MultiBar, Presets } from 'cli-progress';
import type { RebuildProgress } from '../workflows/definitions';
import type { DatabaseStatus } from './status';
import type { RebuildFacts } from './rebuild-facts';
import { livePollersOf } from './rebuild-facts';

/** One observation of a rebuild by `status --follow`. */
export type FollowSample = (
  | { answeredBy: 'workflow'; progress: RebuildProgress }
  | { answeredBy: 'database'; queryError: string; database: DatabaseStatus }
) & {
  /** Workers of the rebuild's build polling within the no-poller window; null when unknown. */
  pollers?: number | null;
  /** The build the rebuild is pinned to; null or absent when unknown. */
  build?: string | null;
};

/** What `status --follow` needs; the CLI wires it to Temporal and the catalog database. */
export interface FollowDeps {
  /** The rebuild's facts as one sample ({@link followSampleOf}); `error` when neither Temporal nor the database answered. */
  sample(): Promise<FollowSample | { error: string }>;
  /** Settles when the rebuild closes, with its exit code and result lines. */
  outcome: Promise<{ code: number; lines: string[] }>;
}

/**
 * One sample from a rebuild's facts at `nowMs`: the query's answer, else the catalog database's
 * view; pollers of the rebuild's build within `windowSeconds`. Pure.
 */
export function followSampleOf(
  facts: RebuildFacts,
  windowSeconds: number,
  nowMs = Date.now(),
): FollowSample | { error: string } {
  const pollers = facts.pollers.error || !facts.run ? null : livePollersOf(facts, nowMs, windowSeconds).length;
  const build = facts.run?.build?.buildId ?? null;
  if (facts.progress) return { answeredBy: 'workflow', progress: facts.progress as RebuildProgress, pollers, build };
  if (facts.view)
    return { answeredBy: 'database', queryError: facts.queryError ?? '', database: facts.view.status, pollers, build };
  return {
    error: `no answer from the workflow (${facts.queryError ?? facts.temporalError}) nor from the catalog database (${facts.databaseError})`,
  };
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

/** Warnings of `status --follow` that hold until their condition clears: each is said once, and its end too. */
class FollowWarnings {
  private readonly active = new Map<string, string>();
  constructor(private readonly say: (s: string) => void) {}

  /** Sets warning `key` on (saying `text` when it starts) or off (saying that it cleared). */
  set(key: 'no-answer' | 'no-pollers' | 'stalled', on: boolean, text: string): void {
    if (on && this.active.get(key) !== text) {
      if (!this.active.has(key)) this.say(`warning: ${text}`);
      this.active.set(key, text);
    } else if (!on && this.active.has(key)) {
      this.active.delete(key);
      this.say(
        `ok: ${key === 'no-answer' ? 'the workflow answers the progress query again' : key === 'no-pollers' ? 'a worker polls the task queue again' : 'pages are committing again'}`,
      );
    }
  }

  /** The active warnings as progress-bar flags (` ! no-pollers`). */
  flags(): string {
    return [...this.active.keys()].map((k) => ` ! ${k}`).join('');
  }
}

/** Pages done and total, and the progress bar's payload, of one sample. */
function barState(
  sample: FollowSample,
  flags: string,
): { done: number; total: number; payload: Record<string, unknown> } {
  if (sample.answeredBy === 'workflow') {
    const p = sample.progress;
    return {
      done: p.pagesDone,
      total: p.pagesTotal,
      payload: {
        rps: p.rowsPerSecond.toLocaleString('en-US'),
        etaText: fmtSeconds(p.etaSeconds),
        retries: p.retries,
        phase: `${p.phase}${p.paused ? ' (paused)' : ''}${p.draining ? ' (draining)' : ''}`,
        flags,
      },
    };
  }
  const l = sample.database.latest;
  return {
    done: l?.pagesCommitted ?? 0,
    total: l?.pagesTotal ?? 0,
    payload: { rps: '?', etaText: '?', retries: '?', phase: `${l?.status ?? 'no version'} (from the database)`, flags },
  };
}

/** The progress bar of `status --follow` on a terminal, created at the first sample. */
class FollowBar {
  multi: MultiBar | null = null;
  private bar: SingleBar | null = null;
  constructor(
    private readonly catalog: string,
    private readonly tty: NodeJS.WritableStream,
  ) {}

  /** Shows `done` of `total` pages with the sample's figures. */
  update(done: number, total: number, payload: Record<string, unknown>): void {
    if (!this.multi) {
      this.multi = new MultiBar(
        {
          stream: this.tty,
          format: `${this.catalog} [{bar}] {value}/{total} pages {percentage}% | {rps} rows/s | ETA {etaText} | {retries} retries | {phase}{flags}`,
          hideCursor: true,
          clearOnComplete: false,
          gracefulExit: true,
        },
        Presets.shades_classic,
      );
      this.bar = this.multi.create(Math.max(total, 1), done, payload);
    } else {
      this.bar!.setTotal(Math.max(total, 1));
      this.bar!.update(done, payload);
    }
  }
}

/**
 * One sample of the rebuild's facts.
 * @returns the sample, or null when neither answered (said through `say`).
 */
async function takeSample(deps: FollowDeps, say: (s: string) => void): Promise<FollowSample | null> {
  const s = await deps.sample().catch((err: Error) => ({ error: `no answer: ${err.message}` }));
  if ('error' in s) {
    say(`warning: ${s.error}`);
    return null;
  }
  return s;
}

/** Tracks when the workflow's progress last changed, for the stall warning. */
class ProgressClock {
  private lastKey = '';
  private lastChangeMs = Date.now();

  /** Seconds without a committed page per the sample (null when not copying or unknown). */
  idleSeconds(sample: FollowSample, now: number): number | null {
    if (sample.answeredBy !== 'workflow') return databaseIdleSeconds(sample.database);
    const p = sample.progress;
    const key = `${p.phase}|${p.pagesDone}|${p.rowsUpserted}`;
    if (key !== this.lastKey) {
      this.lastKey = key;
      this.lastChangeMs = now;
    }
    return p.phase === 'copying' && !p.paused && p.pagesDone < p.pagesTotal
      ? Math.floor((now - this.lastChangeMs) / 1000)
      : null;
  }
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
  const stallAfterMs = o.stallAfterMs ?? 600_000;
  const queryTimeoutS = Math.round((o.queryTimeoutMs ?? 5_000) / 1000);
  let closed = false;
  const outcome = deps.outcome.finally(() => {
    closed = true;
  });
  outcome.catch(() => undefined);
  const pause = (ms: number) => Promise.race([new Promise((r) => setTimeout(r, ms)), outcome.catch(() => undefined)]);

  const bar = o.tty ? new FollowBar(o.catalog, o.tty) : null;
  const say = (s: string) => (bar?.multi ? bar.multi.log(`${s}\n`) : o.out(s));
  const warnings = new FollowWarnings(say);
  const clock = new ProgressClock();
  let lastLineMs = 0;

  try {
    while (!closed) {
      const tick = Date.now();
      const sample = await takeSample(deps, say);
      if (closed) break;
      if (!sample) {
        await pause(pollMs);
        continue;
      }
      const now = Date.now();
      const asBuild = sample.build ? ` as build ${sample.build}` : '';
      warnings.set('no-pollers', sample.pollers === 0, `no worker polls task queue ${o.taskQueue}${asBuild}`);
      warnings.set(
        'no-answer',
        sample.answeredBy === 'database',
        `no worker answered the progress query within ${queryTimeoutS} s; showing the catalog database`,
      );
      // Stalled: no page committed for stallAfterMs (from the ledger, or from progress not changing).
      const idleS = clock.idleSeconds(sample, now);
      const stalled = idleS !== null && idleS * 1000 >= stallAfterMs;
      warnings.set('stalled', stalled, `stalled: no page committed for ${fmtSeconds(idleS)}`);

      if (bar) {
        const { done, total, payload } = barState(sample, warnings.flags());
        bar.update(done, total, payload);
      } else if (now - lastLineMs >= lineEveryMs) {
        lastLineMs = now;
        o.out(`${new Date(now).toISOString()} ${formatSample(sample)}${stalled ? ' · STALLED' : ''}`);
      }
      await pause(Math.max(0, tick + pollMs - Date.now()));
    }
  } finally {
    bar?.multi?.stop();
  }
  const r = await outcome;
  for (const line of r.lines) o.out(line);
  return r.code;
}
