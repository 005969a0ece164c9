/**
 * The end of a rebuild as the CLI reports it (`start --wait`, `wait`, `status`, `status --follow`):
 * the result lines, the renumbered job ids the publish recorded, and exit code 0 when published,
 * 1 otherwise.
 */
import type { Pool } from 'pg';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { RebuildCatalogResult, ReconcileSummary, TemporalSession } from '../index';
import { rebuildHandle, waitForResult } from '../index';
import type { PublishReport, RenumberedJobsReport } from '../../lib/catalog/event-reads';
import { prunedFilesSentence, readPublishReport, renumberedSentence } from '../../lib/catalog/event-reads';
import { goneJobsSentence } from '../../lib/catalog/gone-jobs';
import { readLedgerProgress } from '../../lib/catalog/rebuild-health';
import type { CommandContext } from './context';
import { ExitCode, processContext } from './context';
import { rootMessage } from '../../workflows/failure-text';

/**
 * The reconciliation line: `reconciliation: ok|MISMATCH: <buckets>, source = catalog (+ quarantined); …`,
 * with files (`start --files`) `…; file records: source N = catalog M (+ K quarantined)`, and after
 * the delta, when a page found jobs gone from the source after the plan, `, N jobs gone from the
 * source after the plan` (left out of both sides).
 */
export function formatReconciliation(x: ReconcileSummary, unit: 'buckets' | 'key ranges' = 'buckets'): string {
  const files = x.files
    ? `; file records: source ${x.files.source} = catalog ${x.files.catalog}${x.files.rejects ? ` + ${x.files.rejects} quarantined` : ''}`
    : '';
  return `reconciliation: ${x.ok ? 'ok' : 'MISMATCH'}: ${x.buckets} ${unit}, source ${x.sourceRows} = catalog ${x.catalogRows}${x.rejects ? ` + ${x.rejects} quarantined` : ''}${files}; delta after watermark ${x.delta}${x.gone ? `, ${goneJobsSentence(x.gone)}` : ''}; duplicate job names ${x.duplicateJobNames}; sample ${x.sampled} checked, ${x.sampleMismatches} differ`;
}

/**
 * The lines describing a closed rebuild: the version's fate and counts (duration rounded to whole
 * seconds), then the reconciliation report when there is one.
 */
export function formatRebuildResult(r: RebuildCatalogResult): string[] {
  if (r.upToDate)
    return [
      `catalog ${r.catalog}: refresh: up to date: nothing changed in the source since version ${r.refresh?.baseVersionId ?? '?'}, which stays active; ${Math.round(r.durationMs / 1000)} s`,
    ];
  const refresh = r.refresh
    ? `; a refresh of version ${r.refresh.baseVersionId}: ${r.refresh.newJobs} new, ${r.refresh.changedJobs} changed, ${r.refresh.deletedJobs} deleted jobs`
    : r.fullRebuildBecause
      ? `; refresh ran as a full rebuild: ${r.fullRebuildBecause}`
      : '';
  if (r.cancelled && !r.versionId)
    return [
      `catalog ${r.catalog}: cancelled before a version was planned: nothing was written; ${Math.round(r.durationMs / 1000)} s`,
    ];
  const lines = [
    `catalog ${r.catalog}: version ${r.versionId} ${r.published ? 'published' : r.cancelled ? 'cancelled (abandoned)' : 'NOT published'}; ` +
      `${r.published ? `${r.pagesTotal} pages` : `${r.pagesDone} of ${r.pagesTotal} pages`}, ${r.rowsUpserted} rows, ${r.rejects} rejects, ${r.retries} retries, ${Math.round(r.durationMs / 1000)} s, ${r.runs} run(s)${refresh}`,
  ];
  // A refresh reconciles per key range of its version (activities/reconcile-refresh.ts).
  if (r.reconciliation) lines.push(formatReconciliation(r.reconciliation, r.refresh ? 'key ranges' : 'buckets'));
  return lines;
}

/**
 * What the publish of `versionId` recorded (renumbered job ids, the director's prunes), read with a
 * pool of one connection from `pools`. A report only: any error (no configuration, database
 * unreachable) gives null parts.
 */
export async function publishReportOfVersion(
  pools: Pick<CommandContext, 'catalogPool'>,
  catalog: string,
  versionId: string,
): Promise<PublishReport> {
  let pool: Pool | undefined;
  try {
    pool = pools.catalogPool({ purpose: 'cli', max: 1 });
    return await readPublishReport(pool, catalog, versionId);
  } catch {
    return { renumbered: null, prunedFiles: null };
  } finally {
    await pool?.end().catch(() => undefined);
  }
}

/**
 * Pages and rows of `versionId` committed in the ledger, read with a pool of one connection from
 * `pools`; null when they cannot be read (no configuration, database unreachable) or the version has
 * no ledger.
 */
export async function ledgerOfVersion(
  pools: Pick<CommandContext, 'catalogPool'>,
  versionId: string,
): Promise<{ pages: number; rows: number } | null> {
  if (!versionId) return null;
  let pool: Pool | undefined;
  try {
    pool = pools.catalogPool({ purpose: 'cli', max: 1 });
    const l = await readLedgerProgress(pool, versionId, 1);
    return { pages: l.pagesCommitted, rows: l.rows };
  } catch {
    return null;
  } finally {
    await pool?.end().catch(() => undefined);
  }
}

/** How a rebuild ended: exit code, lines to print, and the failure message when it failed. */
export interface RebuildOutcome {
  /** 0 when published (or a refresh found the catalog up to date), 1 otherwise (failed, cancelled, terminated, not published). */
  code: number;
  lines: string[];
  /** Set when the workflow failed: `rebuild of C failed, not published: <reason>`, for stderr. */
  failure?: string;
  /** Set when the workflow failed: the innermost cause's message. */
  reason?: string;
  /** The workflow's result, when it completed. */
  result?: RebuildCatalogResult;
  /** Job ids renumbered by the publish, when published and `pools` could read them. */
  renumbered?: RenumberedJobsReport | null;
}

/**
 * Waits for the catalog's rebuild to close (following continue-as-new) and describes the outcome
 * (for a closed rebuild it answers at once). With `pools`, a published rebuild's lines end with the
 * {@link renumberedSentence} when the publish recorded renumbered job ids, and the director's prunes
 * (`files of N jobs pruned by the director since version V: M records`) when it recorded some.
 * @throws ExitCode 1 when no rebuild of the catalog exists; other Temporal errors as they are.
 */
export async function rebuildOutcome(
  session: TemporalSession,
  catalog: string,
  pools?: Pick<CommandContext, 'catalogPool'>,
): Promise<RebuildOutcome> {
  try {
    const r = await waitForResult(rebuildHandle(session.client, catalog));
    // An unpublished rebuild's pages and rows done as the ledger counts them (a page that committed
    // as a cancel arrived is not in the workflow's own count), as status shows them.
    const ledger = !r.published && !r.upToDate && pools ? await ledgerOfVersion(pools, r.versionId) : null;
    const lines = formatRebuildResult(
      ledger === null ? r : { ...r, pagesDone: ledger.pages, rowsUpserted: ledger.rows },
    );
    const report = r.published && pools ? await publishReportOfVersion(pools, catalog, r.versionId) : null;
    const renumbered = report?.renumbered ?? null;
    if (renumbered) lines.push(renumberedSentence(renumbered));
    const pruned = report?.prunedFiles;
    if (pruned) lines.push(prunedFilesSentence(pruned, pruned.since)!);
    // A refresh that found nothing changed is a success: the active version is current.
    return { code: r.published || r.upToDate ? 0 : 1, lines, result: r, renumbered };
  } catch (err) {
    if (err instanceof WorkflowFailedError) {
      const reason = rootMessage(err);
      const failure = `rebuild of ${catalog} failed, not published: ${reason}`;
      return { code: 1, lines: [failure], failure, reason };
    }
    if (err instanceof WorkflowNotFoundError) {
      throw new ExitCode(
        1,
        `no rebuild of catalog ${catalog} exists (workflow ${rebuildHandle(session.client, catalog).workflowId})`,
      );
    }
    throw err;
  }
}

/**
 * Waits for the rebuild and prints its result lines (with the renumbered job ids the publish
 * recorded, read through `pools`: by default this process's catalog database configuration).
 * @returns 0 when published, 1 otherwise.
 * @throws ExitCode 1 with the failure when the rebuild failed (printed on stderr instead).
 */
export async function waitAndReport(
  session: TemporalSession,
  catalog: string,
  out: (line: string) => void,
  pools: Pick<CommandContext, 'catalogPool'> = processContext(out),
): Promise<number> {
  const r = await rebuildOutcome(session, catalog, pools);
  if (r.failure) throw new ExitCode(r.code, r.failure);
  for (const l of r.lines) out(l);
  return r.code;
}
