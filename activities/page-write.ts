/**
 * The page transaction (design.md, "Page transaction"): ledger row first, the fence, the rows
 * (streamed or as rows), the page's quarantined records and their events, the ledger's totals.
 */
import type { PoolClient } from 'pg';
import type { AttemptClaim, PlannedPage } from '../lib/catalog';
import type { GoneJobRecord } from '../lib/catalog';
import { claimPage, completePage, lockVersion, recordGoneJobs, tagPageSession, writeRejects } from '../lib/catalog';
import type { RejectRecord } from '../lib/validate';
import type { CopyPageInput, CopyPageResult } from '../workflows/definitions';
import type { ActivityContext } from './context';
import { pageDuplicatesMessage, pageFileRejectsMessage, pageGoneMessage, pageRejectsMessage } from './messages';
import type { PageFilesWritten } from './page-files';

/** What a page's write put in the catalog (rows) and set aside (rejects), with its counts. */
export interface WrittenRows {
  /** Rows written in the page's key range. */
  rows: number;
  /** Records quarantined. */
  rejects: RejectRecord[];
  /** Rows with a code the product does not know (kept verbatim). */
  warnings: number;
  /** Rows dropped as repeats of a job id of the page. */
  duplicates: number;
  /** Values decoded from the source's legacy encoding, per catalog column. */
  decoded?: Record<string, number>;
  /** The page's file records (rebuilds with `--files`). */
  files?: PageFilesWritten;
  /** Jobs of the page gone from the source after the plan: left out (no row, no file), recorded by the page. */
  gone?: GoneJobRecord[];
}

/** Writes a page's rows inside the page transaction (after the ledger row and the fence). */
export type RowWriter = (c: PoolClient) => Promise<WrittenRows>;

/**
 * The page transaction's statements, in order: ledger row, fence, session tag and statement
 * timeout, rows (`write`), rejects and their events, the jobs gone from the source (`gone_job`, a
 * `gone` event), ledger completion. There is no read-back of
 * the written rows: reconciliation verifies per bucket (the ledger's checksum stays empty).
 * @returns null when another attempt holds the ledger row (the caller rolls back and reads its result).
 */
export async function writePage(
  ctx: ActivityContext,
  c: PoolClient,
  input: CopyPageInput,
  claim: AttemptClaim,
  plan: PlannedPage,
  statementTimeoutMs: number,
  write: RowWriter,
  previousFailure: string | null,
): Promise<CopyPageResult | null> {
  const { versionId, pageNo } = input;
  const attempt = claim.attempt;
  const claimed = await claimPage(
    c,
    { versionId, pageNo, attempt, firstKey: plan.firstKey, lastKey: plan.lastKey },
    ctx.identity,
  );
  if (!claimed) return null; // another attempt committed: roll back, report its result
  await lockVersion(c, versionId, { mode: 'share', allowed: ['building'] });
  await tagPageSession(c, claim, statementTimeoutMs);
  const written = await write(c);
  await ctx.hooks?.insideTransaction?.({ pageNo, attempt }, c);
  const rejects = written.rejects.length;
  if (rejects) {
    await writeRejects(c, versionId, pageNo, written.rejects);
    await ctx.events.record(c, {
      catalog: input.catalog,
      versionId,
      kind: 'rejected',
      message: pageRejectsMessage(pageNo, written.rejects),
      details: {
        pageNo,
        rejects,
        first: written.rejects.slice(0, 5).map((r) => ({ jobKey: r.jobKey, jobId: r.jobId, reason: r.reason })),
      },
    });
  }
  if (written.duplicates) {
    await ctx.events.record(c, {
      catalog: input.catalog,
      versionId,
      kind: 'duplicates',
      message: pageDuplicatesMessage(pageNo, written.duplicates),
      details: { pageNo, duplicates: written.duplicates },
    });
  }
  if (written.files?.rejects) {
    await ctx.events.record(c, {
      catalog: input.catalog,
      versionId,
      kind: 'rejected',
      message: pageFileRejectsMessage(pageNo, written.files.rejects, written.files.firstRejects),
      details: { pageNo, fileRejects: written.files.rejects, first: written.files.firstRejects },
    });
  }
  const gone = written.gone ?? [];
  if (gone.length) {
    await recordGoneJobs(c, versionId, pageNo, gone);
    await ctx.events.record(c, {
      catalog: input.catalog,
      versionId,
      kind: 'gone',
      message: pageGoneMessage(pageNo, gone),
      details: {
        pageNo,
        gone: gone.length,
        first: gone.slice(0, 5).map((g) => ({ jobKey: g.jobKey, jobId: g.jobId, reason: g.reason })),
      },
    });
  }
  const totals = {
    rows: written.rows,
    checksum: '',
    rejects,
    warnings: written.warnings,
    duplicates: written.duplicates,
  };
  const files = written.files ? { rows: written.files.rows, rejects: written.files.rejects } : undefined;
  await completePage(c, versionId, pageNo, { ...totals, decoded: written.decoded, files });
  return {
    pageNo,
    ...totals,
    ...(files ? { files: files.rows, fileRejects: files.rejects } : {}),
    ...(gone.length ? { gone: gone.length } : {}),
    attempt,
    activityAttempt: attempt,
    alreadyCommitted: false,
    durationMs: 0,
    previousFailure,
  };
}
