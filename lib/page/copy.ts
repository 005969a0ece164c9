/**
 * One page copied (design.md, "Page transaction"): its read opened on the source, then ONE catalog
 * transaction that writes it (lib/page/write.ts), the statement in flight cancelled when the
 * attempt's cancellation signal fires. The `copyPage` activity claims the attempt, names the
 * previous one and ends its zombie sessions first (activities/copy-page.ts).
 */
import type { AttemptClaim, PlannedPage } from '../catalog';
import { cancelOnAbort, withTransaction } from '../db';
import { PageCancelledError } from '../errors';
import { pageStatementTimeoutMs } from '../page-cost';
import type { CopyPageInput, CopyPageResult } from '../../workflows/definitions';
import type { PageAttempt, PageContext } from './types';
import { pageReadWriter, writePage } from './write';

/** One attempt of a planned page, as the activity hands it over. */
export interface PageCopy {
  /** The attempt's claim (Temporal attempt number, claim id). */
  claim: AttemptClaim;
  /** The page's plan row: key range, a refresh's keys, `files`, the version's status at read time. */
  plan: PlannedPage;
  /** How the previous attempt failed (a retry), returned in the result. */
  previousFailure: string | null;
  /** The attempt's cancellation (the activity's): ends the read and the transaction. */
  signal: AbortSignal;
  /** Where the attempt is, for its heartbeat details: set to `reading`, then `writing`. */
  progress: { stage: string };
}

/**
 * Reads the page `input` names (version, page number, source, catalog: the workflow's) from its source and writes it in one catalog transaction: ledger row
 * first, fence, rows and file records, rejects, gone jobs, ledger totals (lib/page/write.ts).
 * Statements run under `pageStatementTimeoutMs(plan.plannedRows)`.
 * @returns the committed page, or null when another attempt holds the ledger row (nothing written).
 * @throws PageCancelledError (retryable) when the signal fired before or while writing;
 *   VersionFencedError when the version is no longer building; database and source errors as thrown.
 */
export async function copyPlannedPage(
  ctx: PageContext,
  input: CopyPageInput,
  copy: PageCopy,
): Promise<CopyPageResult | null> {
  const { claim, plan, signal } = copy;
  const page: PageAttempt = { pageNo: input.pageNo, attempt: claim.attempt };
  const statementTimeoutMs = pageStatementTimeoutMs(plan.plannedRows);
  const source = ctx.sources.get(input.source, input.versionId);
  // A refresh's page reads only its own jobs (plan.keys) within its bounds.
  const range = { firstKey: plan.firstKey, lastKey: plan.lastKey, ...(plan.keys ? { keys: plan.keys } : {}) };
  copy.progress.stage = 'reading';
  const open = () => source.openPageRead(range, { statementTimeoutMs, files: plan.files, signal });
  const read = await open();
  try {
    const write = pageReadWriter(ctx, input, page, read, { reopen: open, signal, files: plan.files });
    await ctx.hooks?.afterRead?.(page);
    copy.progress.stage = 'writing';
    if (signal.aborted) throw new PageCancelledError(input.pageNo, false);
    return await withTransaction(ctx.pool, async (c) => {
      try {
        return await cancelOnAbort(ctx.pool, c, signal, () =>
          writePage(ctx, c, input, claim, plan, statementTimeoutMs, write, copy.previousFailure),
        );
      } catch (err) {
        if (signal.aborted) throw new PageCancelledError(input.pageNo, true, { cause: err });
        throw err;
      }
    });
  } finally {
    await read.close();
  }
}
