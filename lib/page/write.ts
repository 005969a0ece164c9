/**
 * The page transaction (design.md, "Page transaction") and the one page write of every source:
 * ledger row first, the fence, the rows of the page read (its `COPY (SELECT …) TO STDOUT` from a
 * director catalog's snapshot or a staged listing in the catalog database, piped into the page
 * transaction's `COPY … FROM STDIN`: no row becomes a JavaScript object), the page's file stream,
 * the page's quarantined records and gone jobs with their events, the ledger's totals. Should the
 * catalog refuse a value, the page falls back to writing rows, quarantining the refused ones.
 */
import { Transform } from 'node:stream';
import type { Readable } from 'node:stream';
import type { PoolClient } from 'pg';
import type { AttemptClaim, FilesWritten, GoneJobRecord, PlannedPage } from '../catalog';
import {
  claimPage,
  completePage,
  copyRowsFromStream,
  lockVersion,
  recordGoneJobs,
  rowsDigest,
  storePageBuckets,
  storePageCells,
  supersedeRows,
  tagPageSession,
  upsertRowsQuarantining,
  writeFileRead,
  writeRejects,
} from '../catalog';
import { isDataError, withSavepoint } from '../db';
import { isFileSource as isListing } from '../config';
import type { PageRead } from '../sources/types';
import type { RejectRecord } from '../validate';
import { validateRows } from '../validate';
import type { CopyPageInput, CopyPageResult } from '../../workflows/definitions';
import type { StoredCellFigures } from '../catalog';
import type { PageBucketFigures, RowDigest } from './digest';
import { RowDigestStream } from './digest';
import { pageDuplicatesMessage, pageFileRejectsMessage, pageGoneMessage, pageRejectsMessage } from './messages';
import type { PageAttempt, PageContext } from './types';

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
  files?: FilesWritten;
  /** Jobs of the page gone from the source after the plan: left out (no row, no file), recorded by the page. */
  gone?: GoneJobRecord[];
  /** The written rows' digest (lib/page/digest.ts), `''` when the rows were not streamed. */
  digest?: string;
  /** The written rows' figures per dated bucket, when the stream's digest covers every row written. */
  buckets?: PageBucketFigures[];
  /** The written rows' figures per cell of job keys, when the stream's digest covers every row written. */
  cells?: StoredCellFigures[];
}

/** Writes a page's rows inside the page transaction (after the ledger row and the fence). */
export type RowWriter = (c: PoolClient) => Promise<WrittenRows>;

/**
 * The page transaction's statements, in order: ledger row, fence, session tag and statement
 * timeout, rows (`write`), rejects and their events, the jobs gone from the source (`gone_job`, a
 * `gone` event), the streamed rows' figures per bucket and per cell of job keys (`page_bucket`,
 * `page_cell`), ledger completion (with
 * the rows' digest). There is no read-back of the written rows: the figures were added up as the
 * rows streamed.
 * @returns null when another attempt holds the ledger row (the caller rolls back and reads its result).
 */
export async function writePage(
  ctx: PageContext,
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
  // A refresh's page: the base's rows of its jobs leave the version first (rewritten, or deleted).
  if (plan.baseVersionId && plan.keys)
    await supersedeRows(c, versionId, plan.baseVersionId, plan.keys, {
      files: plan.files,
      keysAreJobIds: !isListing(ctx.sources.config(input.source)),
    });
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
    checksum: written.digest ?? '',
    rejects,
    warnings: written.warnings,
    duplicates: written.duplicates,
  };
  const files = written.files ? { rows: written.files.rows, rejects: written.files.rejects } : undefined;
  if (written.buckets) await storePageBuckets(c, versionId, pageNo, written.buckets);
  if (written.cells) await storePageCells(c, versionId, pageNo, written.cells);
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

/** How a page's writer reads and stops. */
export interface StreamedPage {
  /**
   * Opens a fresh read of the same page (its own snapshot; a listing's `filesCommand` runs again),
   * for the per-row fallback. @throws the source's errors.
   */
  reopen(): Promise<PageRead>;
  /** The attempt's cancellation: ends both streams. */
  signal: AbortSignal;
  /** The version rebuilds file records: the page writes its jobs' files after their rows. */
  files: boolean;
}

/**
 * The page's writer: streams the good rows of `read` into the version's table in a savepoint, then
 * the page's file records (rebuilds with `--files`) through the one file write. When the
 * catalog refuses a value (SQLSTATE class 22 or 54000) or a key exists already (23505, a page
 * replayed by hand), the savepoint is rolled back and the page is written again from a fresh read
 * of the source as rows: validated in Node, upserted, each refused row quarantined alone.
 */
export function pageReadWriter(
  ctx: PageContext,
  input: CopyPageInput,
  page: PageAttempt,
  read: PageRead,
  streamed: StreamedPage,
): RowWriter {
  return async (c) => {
    let rows: number;
    const digest = new RowDigestStream();
    try {
      // The source's COPY starts once the savepoint is set, and all its streams run in one pipeline.
      rows = await withSavepoint(c, 'page_stream', () =>
        copyRowsFromStream(c, input.versionId, read.copyOut(input.versionId, input.pageNo), streamed.signal, [
          ...heldByHook(ctx, page),
          digest,
        ]),
      );
    } catch (err) {
      await read.close(err as Error);
      const code = (err as { code?: unknown } | null)?.code;
      if (!isDataError(err) && code !== '23505') throw err;
      ctx.log.warn('page written row by row: the catalog refused its streamed rows', {
        pageNo: input.pageNo,
        code,
        error: (err as Error).message,
      });
      return writeRowByRow(c, input, streamed);
    }
    // The files follow their jobs on the same source snapshot. Their values cannot be refused by
    // the catalog (typed at the source, LStat checked before it is decoded): an error fails the attempt.
    const files = streamed.files
      ? await writeFileRead(c, input.versionId, input.pageNo, await read.openFiles(), streamed.signal)
      : undefined;
    return {
      rows,
      rejects: read.rejects,
      warnings: read.warnings,
      duplicates: read.duplicates,
      decoded: read.decoded,
      files,
      ...(read.gone.length ? { gone: read.gone } : {}),
      // A digest that does not cover every row (rows the source gave no hash) is left out.
      ...digestOf(digest.result(), rows),
    };
  };
}

/** The page's digest, bucket and cell figures when they cover all `rows` written, else digest `''` and no figures. */
function digestOf(d: RowDigest, rows: number): Pick<WrittenRows, 'digest' | 'buckets' | 'cells'> {
  return d.rows === rows && d.unhashed === 0
    ? { digest: d.digest, buckets: d.buckets, cells: d.cells }
    : { digest: '' };
}

/**
 * The per-row fallback: a fresh read (its own snapshot, its own quarantined records; a listing's
 * `filesCommand` runs again), rows validated and upserted.
 */
async function writeRowByRow(c: PoolClient, input: CopyPageInput, streamed: StreamedPage): Promise<WrittenRows> {
  const again = await streamed.reopen();
  try {
    const checked = validateRows(await again.readRows());
    const rejects: RejectRecord[] = [...again.rejects, ...checked.rejects];
    const rows = await upsertRowsQuarantining(c, input.versionId, input.pageNo, checked.valid, rejects);
    // Rows found identical keep the hash their first write stored; rows written now have none.
    const digest = await rowsDigest(
      c,
      input.versionId,
      checked.valid.map((r) => r.job_id!),
    );
    const files = streamed.files
      ? await writeFileRead(c, input.versionId, input.pageNo, await again.openFiles(), streamed.signal)
      : undefined;
    return {
      rows,
      rejects,
      warnings: again.warnings,
      duplicates: checked.duplicates,
      decoded: again.decoded,
      files,
      ...(again.gone.length ? { gone: again.gone } : {}),
      digest,
    };
  } finally {
    await again.close();
  }
}

/**
 * No stream, or (test workers only, when `hooks.whileStreaming` is set) a transform that holds the
 * rows at their first chunk until the hook returns, so a test can stop the worker in the middle of a unit.
 */
function heldByHook(ctx: PageContext, page: PageAttempt): Transform[] {
  const hook = ctx.hooks?.whileStreaming;
  if (!hook) return [];
  let first = true;
  return [
    new Transform({
      transform(chunk: Buffer, _enc, done) {
        if (!first) return done(null, chunk);
        first = false;
        hook(page).then(
          () => done(null, chunk),
          (err: unknown) => done(err as Error),
        );
      },
    }),
  ];
}
