/**
 * `status` support: progress formatting, the catalog database's view of a catalog (read by
 * client/rebuild-facts.ts; shown when no worker answers the `progress` query) and the no-poller
 * window within which a poll counts as a live worker.
 */
import type { Pool } from 'pg';
import type { RebuildProgress, ReconcileSummary } from '../workflows/definitions';
import { activeVersionId as readActiveVersionId } from '../lib/catalog/publish';
import type { LatestVersionProgress, RebuildRunKey, StoredReconciliation } from '../lib/catalog/status';
import { readLatestReconciliation, readLatestVersionProgress } from '../lib/catalog/status';
import { readLastEventMessage } from '../lib/catalog/event-reads';
import { DEFAULT_REBUILD_THRESHOLDS, rebuildThresholds } from './rebuild-thresholds';

/**
 * How the pages are sized, e.g. `pages of 31,250 rows (auto)`; `pages sized at plan (auto)` before
 * the plan; empty for an answer without the fields.
 */
export function formatPageSizing(p: Partial<Pick<RebuildProgress, 'pageSize' | 'pageSizing'>>): string {
  if (!p.pageSizing) return '';
  const size = p.pageSize == null ? 'pages sized at plan' : `pages of ${p.pageSize.toLocaleString('en-US')} rows`;
  return `${size} (${p.pageSizing})`;
}

/** One-line human summary of a progress answer. */
export function formatProgress(p: RebuildProgress): string {
  const pct = p.pagesTotal ? Math.floor((100 * p.pagesDone) / p.pagesTotal) : 0;
  const eta = p.etaSeconds === null ? '?' : `${p.etaSeconds}s`;
  const sizing = formatPageSizing(p);
  return (
    `${p.catalog}: ${p.phase}${p.paused ? ' (paused)' : ''}${p.draining ? ' (draining)' : ''} · version ${p.versionId ?? '-'}${p.files ? ' with files' : ''} · ` +
    `page ${p.pagesDone}/${p.pagesTotal} (${pct}%)${sizing ? ` · ${sizing}` : ''} · checkpoint ${p.checkpoint} · ${p.rowsUpserted} rows · ` +
    `${p.rowsPerSecond} rows/s · eta ${eta} · ${p.retries} retries · ${p.rejects} rejects\nlast event: ${p.lastEvent}`
  );
}

/** What the catalog database says about a catalog's latest rebuild (when no worker answers). */
export interface DatabaseStatus {
  catalog: string;
  activeVersionId: string | null;
  /**
   * The latest version with its ledger totals (lib/catalog/status.ts), as status prints it: the last
   * commit as ISO 8601 text, seconds since it as `secondsSinceProgress`.
   */
  latest:
    | null
    | (Omit<LatestVersionProgress, 'lastCommitAt' | 'secondsSinceLastCommit'> & {
        lastCommitAt: string | null;
        secondsSinceProgress: number | null;
      });
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
    ...(n('gone') ? { gone: n('gone') } : {}),
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
          pageSize: l.pageSize,
          pageSizing: l.pageSizing,
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
 * Seconds within which a poller must have polled to count as live: the no-poller window of
 * `check --rebuild` ({@link DEFAULT_REBUILD_THRESHOLDS}, 75 s; `CATALOG_REBUILD_CHECK_NO_POLLER_SECONDS`
 * shortens it for tests). An idle worker's long poll lasts up to about 60 s before it polls again,
 * so a live worker is always seen within 75 s; the server itself lists a dead worker's pollers for
 * minutes (its poller history TTL).
 */
export function liveWindowSeconds(env: NodeJS.ProcessEnv = process.env): number {
  return rebuildThresholds(env).noPollerSeconds;
}
