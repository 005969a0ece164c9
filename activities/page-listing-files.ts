/**
 * The page write of a listing source with file records (restic, borg with a `filesCommand`): the
 * page's validated job rows, then each job's files, listed by the source's command per snapshot or
 * archive and streamed into the page stage, all in the page transaction. What each job's listing
 * held is recorded beside its files (the source side of the file reconciliation). A snapshot or
 * archive no longer in the repository (forgotten or pruned after the plan) is left out: neither its
 * job row nor any of its files is written, and it is returned as gone (the page records it).
 */
import format from 'pg-format';
import {
  copyFilesIntoStage,
  discardStagedJobFiles,
  ensureFileStage,
  insertStagedFiles,
  recordListingFileStats,
} from '../lib/catalog';
import { LISTING_STAGE_COLUMNS } from '../lib/sources/file-listing';
import type { GoneJob } from '../lib/sources/files-command';
import { filesCommandStream } from '../lib/sources/files-command';
import type { StagedFileSource } from '../lib/sources/staged-files';
import type { ValidatedRows } from '../lib/validate';
import type { CopyPageInput } from '../workflows/definitions';
import { validatedRowsWriter } from './page-rows';
import type { RowWriter } from './page-write';

/**
 * A writer of the page's rows and their jobs' files. The jobs' commands run first, streamed into
 * the page stage: the stage's COPY lasts as long as they run, so its statement timeout is the jobs'
 * command time limits plus the page's own. Then the rows of the jobs still in the repository are
 * written, the records a gone job staged are dropped from the stage, and the rest is written.
 * @returns the counts of what was written (gone jobs excluded) and the gone jobs, in `gone`.
 * @throws (from the writer) what the command stream throws: SourceDataInvalidError (non-retryable)
 *   for a listing that is not the job's, Error (retryable) for a failed command.
 */
export function listingFilesWriter(
  input: CopyPageInput,
  attempt: number,
  source: StagedFileSource,
  checked: ValidatedRows,
  statementTimeoutMs: number,
  signal: AbortSignal,
): RowWriter {
  return async (c) => {
    const jobs = source.commandJobs(checked.valid);
    const settings = source.commandSettings(signal);
    const timezone = await source.timezone();
    await ensureFileStage(c);
    await c.query(
      format('SET LOCAL statement_timeout = %L', String(statementTimeoutMs + settings.timeoutMs * jobs.length)),
    );
    const gone: GoneJob[] = [];
    await copyFilesIntoStage(
      c,
      filesCommandStream(settings, jobs, (g) => gone.push(g)),
      signal,
      LISTING_STAGE_COLUMNS,
    );
    await c.query(format('SET LOCAL statement_timeout = %L', String(statementTimeoutMs)));
    const goneKeys = new Set(gone.map((g) => g.jobKey));
    const kept = goneKeys.size
      ? { ...checked, valid: checked.valid.filter((r) => !goneKeys.has(r.job_key!)) }
      : checked;
    const written = await validatedRowsWriter(input.versionId, input.pageNo, attempt, kept)(c);
    await discardStagedJobFiles(c, [...goneKeys]);
    await recordListingFileStats(
      c,
      input.versionId,
      jobs.filter((j) => !goneKeys.has(j.jobKey)),
      timezone,
    );
    const legacyEncoding = source.legacyEncodingName();
    const r = await insertStagedFiles(c, input.versionId, input.pageNo, legacyEncoding, timezone);
    return {
      ...written,
      files: { rows: r.rows, rejects: r.rejects, firstRejects: r.firstRejects },
      ...(gone.length ? { gone } : {}),
    };
  };
}
