/**
 * The page write of a listing source with file records (restic, borg with a `filesCommand`): the
 * page's validated job rows, then each job's files, listed by the source's command per snapshot or
 * archive and streamed into the page stage, all in the page transaction. What each job's listing
 * held is recorded beside its files (the source side of the file reconciliation).
 */
import format from 'pg-format';
import { copyFilesIntoStage, ensureFileStage, insertStagedFiles, recordListingFileStats } from '../lib/catalog';
import { LISTING_STAGE_COLUMNS } from '../lib/sources/file-listing';
import { filesCommandStream } from '../lib/sources/files-command';
import type { StagedFileSource } from '../lib/sources/staged-files';
import type { ValidatedRows } from '../lib/validate';
import type { CopyPageInput } from '../workflows/definitions';
import { validatedRowsWriter } from './page-rows';
import type { RowWriter } from './page-write';

/**
 * A writer of the page's rows and their jobs' files. The stage's COPY lasts as long as the
 * commands run: its statement timeout is the jobs' command time limits plus the page's own.
 * @throws (from the writer) what the command stream throws: SourceDataInvalidError (non-retryable)
 *   for a snapshot pruned after the plan, Error (retryable) for a failed command.
 */
export function listingFilesWriter(
  input: CopyPageInput,
  attempt: number,
  source: StagedFileSource,
  checked: ValidatedRows,
  statementTimeoutMs: number,
  signal: AbortSignal,
): RowWriter {
  const writeRows = validatedRowsWriter(input.versionId, input.pageNo, attempt, checked);
  return async (c) => {
    const written = await writeRows(c);
    const jobs = source.commandJobs(checked.valid);
    const settings = source.commandSettings(signal);
    const timezone = await source.timezone();
    await ensureFileStage(c);
    await c.query(
      format('SET LOCAL statement_timeout = %L', String(statementTimeoutMs + settings.timeoutMs * jobs.length)),
    );
    await copyFilesIntoStage(c, filesCommandStream(settings, jobs), signal, LISTING_STAGE_COLUMNS);
    await c.query(format('SET LOCAL statement_timeout = %L', String(statementTimeoutMs)));
    await recordListingFileStats(c, input.versionId, jobs, timezone);
    const legacyEncoding = source.legacyEncodingName();
    const r = await insertStagedFiles(c, input.versionId, input.pageNo, legacyEncoding, timezone);
    return { ...written, files: { rows: r.rows, rejects: r.rejects, firstRejects: r.firstRejects } };
  };
}
