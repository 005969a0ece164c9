/**
 * The one write of file records, for a page (rebuilds with `--files`) and for a bucket's repair:
 * a source's file stream ({@link FileRead}: a director catalog's snapshot, a listing's spooled
 * `filesCommand` output) COPYed into the transaction's stage, then moved into the version's file
 * table in one statement that decodes each LStat in the catalog database; records that cannot be
 * written (a dangling PathId, an LStat that does not decode) are quarantined alone, their job and
 * its other files are written.
 */
import type { PoolClient } from 'pg';
import { copyFilesIntoStage, ensureFileStage, insertStagedFiles } from '../lib/catalog';
import type { FileRead } from '../lib/sources/types';

/** What a file write did. */
export interface PageFilesWritten {
  /** File records written. */
  rows: number;
  /** File records quarantined. */
  rejects: number;
  /** The first quarantined records (at most 5), for the `rejected` event. */
  firstRejects: { jobId: string; fileId: string; reason: string }[];
}

/**
 * Writes the file records of `read`: COPY into `pg_temp.file_stage`, the source's own records
 * beside them (`beforeInsert`), then one INSERT … SELECT into `file_v<version>` and one INSERT of
 * the records quarantined into `reject` (`pageNo` 0 for a repair). A page attempt whose ledger
 * insert succeeded holds no committed file of its range (the ledger row and the files commit
 * together), so nothing is deleted first. Must run inside the page's (or the repair's)
 * transaction; memory does not depend on the number of files.
 * @throws the database errors of either side (the attempt fails and is retried).
 */
export async function writeFiles(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  read: FileRead,
  signal?: AbortSignal,
): Promise<PageFilesWritten> {
  await ensureFileStage(c);
  await copyFilesIntoStage(c, await read.copyFilesOut(), signal, read.stageColumns);
  await read.beforeInsert?.(c, versionId);
  const r = await insertStagedFiles(c, versionId, pageNo, read.legacyEncoding, read.timezone);
  return { rows: r.rows, rejects: r.rejects, firstRejects: r.firstRejects };
}
