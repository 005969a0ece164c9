/**
 * The one page write of every source: the page read's `COPY (SELECT …) TO STDOUT` (a director
 * catalog's snapshot, a staged listing in the catalog database) piped into the page transaction's
 * `COPY … FROM STDIN` (no row becomes a JavaScript object), then the page's file stream; should the
 * catalog refuse a value, the page falls back to writing rows, quarantining the refused ones.
 */
import { Transform } from 'node:stream';
import type { Readable } from 'node:stream';
import { log } from '@temporalio/activity';
import { copyRowsFromStream } from '../lib/catalog';
import { isDataError, withSavepoint } from '../lib/db';
import type { PageRead, PageSource } from '../lib/sources/types';
import { validateRows } from '../lib/validate';
import type { RejectRecord } from '../lib/validate';
import type { CopyPageInput } from '../workflows/definitions';
import type { ActivityContext, PageAttempt } from './context';
import { writeFiles } from './page-files';
import { upsertQuarantining } from './page-rows';
import type { RowWriter, WrittenRows } from './page-write';

/** Where a page reads from, and under which limits. */
export interface StreamedPage {
  /** The page's source. */
  source: PageSource;
  /** The page's job-id range (decimal text). */
  range: { firstKey: string; lastKey: string };
  /** statement_timeout of its statements (ms). */
  statementTimeoutMs: number;
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
  ctx: ActivityContext,
  input: CopyPageInput,
  page: PageAttempt,
  read: PageRead,
  streamed: StreamedPage,
): RowWriter {
  return async (c) => {
    let rows: number;
    try {
      rows = await withSavepoint(c, 'page_stream', () =>
        copyRowsFromStream(
          c,
          input.versionId,
          withHook(ctx, page, read.copyOut(input.versionId, input.pageNo)),
          streamed.signal,
        ),
      );
    } catch (err) {
      await read.close(err as Error);
      const code = (err as { code?: unknown } | null)?.code;
      if (!isDataError(err) && code !== '23505') throw err;
      log.warn('page written row by row: the catalog refused its streamed rows', {
        pageNo: input.pageNo,
        code,
        error: (err as Error).message,
      });
      return writeRowByRow(c, input, streamed);
    }
    // The files follow their jobs on the same source snapshot. Their values cannot be refused by
    // the catalog (typed at the source, LStat checked before it is decoded): an error fails the attempt.
    const files = streamed.files
      ? await writeFiles(c, input.versionId, input.pageNo, await read.openFiles(), streamed.signal)
      : undefined;
    return {
      rows,
      rejects: read.rejects,
      warnings: read.warnings,
      duplicates: read.duplicates,
      decoded: read.decoded,
      files,
      ...(read.gone.length ? { gone: read.gone } : {}),
    };
  };
}

/**
 * The per-row fallback: a fresh read (its own snapshot, its own quarantined records; a listing's
 * `filesCommand` runs again), rows validated and upserted.
 */
async function writeRowByRow(
  c: Parameters<RowWriter>[0],
  input: CopyPageInput,
  streamed: StreamedPage,
): Promise<WrittenRows> {
  const again = await streamed.source.openPageRead(streamed.range, {
    statementTimeoutMs: streamed.statementTimeoutMs,
    files: streamed.files,
    signal: streamed.signal,
  });
  try {
    const checked = validateRows(await again.readRows());
    const rejects: RejectRecord[] = [...again.rejects, ...checked.rejects];
    const rows = await upsertQuarantining(c, input.versionId, input.pageNo, checked.valid, rejects);
    const files = streamed.files
      ? await writeFiles(c, input.versionId, input.pageNo, await again.openFiles(), streamed.signal)
      : undefined;
    return {
      rows,
      rejects,
      warnings: again.warnings,
      duplicates: checked.duplicates,
      decoded: again.decoded,
      files,
      ...(again.gone.length ? { gone: again.gone } : {}),
    };
  } finally {
    await again.close();
  }
}

/**
 * The stream itself, or (test workers only, when `hooks.whileStreaming` is set) the stream held at
 * its first chunk until the hook returns, so a test can stop the worker in the middle of a unit.
 */
function withHook(ctx: ActivityContext, page: PageAttempt, rows: Readable): Readable {
  const hook = ctx.hooks?.whileStreaming;
  if (!hook) return rows;
  let first = true;
  const held = new Transform({
    transform(chunk: Buffer, _enc, done) {
      if (!first) return done(null, chunk);
      first = false;
      hook(page).then(
        () => done(null, chunk),
        (err: unknown) => done(err as Error),
      );
    },
  });
  rows.on('error', (err) => held.destroy(err));
  return rows.pipe(held);
}
