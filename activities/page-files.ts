/**
 * A page's file records (rebuilds with `--files`): streamed from the page's source snapshot into the
 * page transaction's stage, then moved into the version's file table in one statement that decodes
 * each LStat in the catalog database; records that cannot be written (a dangling PathId, an LStat
 * that does not decode) are quarantined alone, their job and its other files are written.
 */
import type { PoolClient } from 'pg';
import { copyFilesIntoStage, ensureFileStage, insertStagedFiles } from '../lib/catalog';
import type { PageRead } from '../lib/sources/types';

/** What a page's file write did. */
export interface PageFilesWritten {
  /** File records written. */
  rows: number;
  /** File records quarantined. */
  rejects: number;
  /** The first quarantined records (at most 5), for the `rejected` event. */
  firstRejects: { jobId: string; fileId: string; reason: string }[];
}

/**
 * Writes the files of the page's jobs from `read` (the same source snapshot as its job rows):
 * COPY into `pg_temp.file_stage`, then one INSERT … SELECT into `file_v<version>` and one INSERT of
 * the records quarantined into `reject`. A page attempt whose ledger insert succeeded holds no
 * committed file of its range (the ledger row and the files commit together), so nothing is deleted
 * first. Must run inside the page transaction; memory does not depend on the number of files.
 * @throws the database errors of either side (the page attempt fails and is retried).
 */
export async function writePageFiles(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  read: PageRead,
  signal?: AbortSignal,
): Promise<PageFilesWritten> {
  await ensureFileStage(c);
  await copyFilesIntoStage(c, await read.copyFilesOut(), signal);
  const r = await insertStagedFiles(c, versionId, pageNo, read.legacyEncoding);
  return { rows: r.rows, rejects: r.rejects, firstRejects: r.firstRejects };
}
