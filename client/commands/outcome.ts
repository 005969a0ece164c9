/**
 * The end of a rebuild as the CLI reports it (`start --wait`, `wait`, `status --follow`): the
 * result lines, and exit code 0 when published, 1 otherwise.
 */
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type { RebuildCatalogResult, TemporalSession } from '../index';
import { rebuildHandle, waitForResult } from '../index';
import { ExitCode } from './context';

/**
 * The lines describing a closed rebuild: the version's fate and counts (duration rounded to whole
 * seconds), then the reconciliation report when there is one.
 */
export function formatRebuildResult(r: RebuildCatalogResult): string[] {
  const lines = [
    `catalog ${r.catalog}: version ${r.versionId} ${r.published ? 'published' : r.cancelled ? 'cancelled (abandoned)' : 'NOT published'}; ` +
      `${r.pagesTotal} pages, ${r.rowsUpserted} rows, ${r.rejects} rejects, ${r.retries} retries, ${Math.round(r.durationMs / 1000)} s, ${r.runs} run(s)`,
  ];
  if (r.reconciliation) {
    const x = r.reconciliation;
    lines.push(
      `reconciliation: ${x.ok ? 'ok' : 'MISMATCH'}: ${x.buckets} buckets, source ${x.sourceRows} = catalog ${x.catalogRows}${x.rejects ? ` + ${x.rejects} quarantined` : ''}; delta after watermark ${x.delta}; duplicate job names ${x.duplicateJobNames}; sample ${x.sampled} checked, ${x.sampleMismatches} differ`,
    );
  }
  return lines;
}

/** How a rebuild ended: exit code, lines to print, and the failure message when it failed. */
export interface RebuildOutcome {
  /** 0 when published, 1 otherwise (failed, cancelled, terminated, not published). */
  code: number;
  lines: string[];
  /** Set when the workflow failed: the innermost cause, for stderr. */
  failure?: string;
}

/**
 * Waits for the catalog's rebuild to close (following continue-as-new) and describes the outcome.
 * @throws ExitCode 1 when no rebuild of the catalog exists; other Temporal errors as they are.
 */
export async function rebuildOutcome(session: TemporalSession, catalog: string): Promise<RebuildOutcome> {
  try {
    const r = await waitForResult(rebuildHandle(session.client, catalog));
    return { code: r.published ? 0 : 1, lines: formatRebuildResult(r) };
  } catch (err) {
    if (err instanceof WorkflowFailedError) {
      let e: unknown = err;
      while (e instanceof Error && e.cause instanceof Error) e = e.cause;
      const failure = `rebuild of ${catalog} failed, not published: ${(e as Error).message}`;
      return { code: 1, lines: [failure], failure };
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
 * Waits for the rebuild and prints its result lines.
 * @returns 0 when published, 1 otherwise.
 * @throws ExitCode 1 with the failure when the rebuild failed (printed on stderr instead).
 */
export async function waitAndReport(
  session: TemporalSession,
  catalog: string,
  out: (line: string) => void,
): Promise<number> {
  const r = await rebuildOutcome(session, catalog);
  if (r.failure) throw new ExitCode(r.code, r.failure);
  for (const l of r.lines) out(l);
  return r.code;
}
