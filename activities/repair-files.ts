/**
 * The file records' part of a bucket's repair (rebuilds with `--files`): per job of the bucket, the
 * source's file count and fingerprint against the catalog's (written plus quarantined); exactly the
 * jobs that differ (and jobs that moved into the bucket) have their files replaced, and jobs gone
 * from the source lose theirs, in one transaction behind the version fence.
 */
import { Context } from '@temporalio/activity';
import { deleteJobFiles, fileJobStats, lockVersion, versionHasFiles, writeFileRead } from '../lib/catalog';
import { withTransaction } from '../lib/db';
import type { RowHashKind } from '../lib/fingerprint';
import type { FileSource, JobSource } from '../lib/sources/types';
import { isFileSource } from '../lib/sources/types';
import type { ActivityContext } from './context';
import { readSource } from './failures';

/** What a bucket's file repair did. */
export interface FileRepair {
  /** Jobs whose files were replaced (they differed, or moved into the bucket). */
  replacedJobs: string[];
  /** File records written for them. */
  files: number;
  /** File records quarantined for them. */
  rejects: number;
  /** Jobs gone from the source whose files were deleted. */
  deletedJobs: number;
}

/** Jobs compared per statement, and whose files one repair transaction replaces at most. */
const JOBS_PER_BATCH = 500;

/**
 * Repairs the file records of a bucket's jobs, or returns null for a version without files.
 * @param jobIds the bucket's jobs in the source at the watermark (written or quarantined).
 * @param movedIds jobs that moved into the bucket: replaced whatever their figures say.
 * @param goneIds jobs of the bucket gone from the source: their files are deleted.
 * @throws SourceUnreadable when the source cannot be read; VERSION_FENCED past the fence.
 */
export async function repairBucketFiles(
  ctx: ActivityContext,
  sourceName: string,
  versionId: string,
  source: JobSource,
  hash: RowHashKind,
  ids: { jobIds: string[]; movedIds: string[]; goneIds: string[] },
): Promise<FileRepair | null> {
  if (!(await versionHasFiles(ctx.pool, versionId))) return null;
  if (!isFileSource(source)) throw new Error(`source ${sourceName} (${source.kind}) has no file records`);
  const what = `file records of source ${sourceName}`;
  const out: FileRepair = { replacedJobs: [], files: 0, rejects: 0, deletedJobs: ids.goneIds.length };
  const moved = new Set(ids.movedIds);
  const all = [...new Set([...ids.jobIds, ...ids.movedIds])];
  for (let i = 0; i < all.length || (i === 0 && ids.goneIds.length); i += JOBS_PER_BATCH) {
    const batch = all.slice(i, i + JOBS_PER_BATCH);
    const [src, cat] = batch.length
      ? await Promise.all([
          readSource(what, () => source.fileJobStats(batch, hash)),
          fileJobStats(ctx.pool, versionId, batch, hash),
        ])
      : [[], []];
    const key = (s: { files: number; fingerprint: string } | undefined) => (s ? `${s.files}:${s.fingerprint}` : '0:0');
    const srcBy = new Map(src.map((s) => [s.jobId, s]));
    const catBy = new Map(cat.map((s) => [s.jobId, s]));
    const differing = batch.filter((id) => moved.has(id) || key(srcBy.get(id)) !== key(catBy.get(id)));
    const gone = i === 0 ? ids.goneIds : [];
    if (!differing.length && !gone.length) continue;
    const written = await replaceJobFiles(ctx, versionId, source, differing, gone);
    out.replacedJobs.push(...differing);
    out.files += written.rows;
    out.rejects += written.rejects;
    Context.current().heartbeat({ stage: 'repairing files', jobs: out.replacedJobs.length });
  }
  return out;
}

/**
 * One transaction behind the fence: deletes the files (and quarantined file records) of `jobIds`
 * and `goneIds`, then streams the source's files of `jobIds` (one snapshot) into the stage and
 * the version's file table.
 */
async function replaceJobFiles(
  ctx: ActivityContext,
  versionId: string,
  source: JobSource & FileSource,
  jobIds: string[],
  goneIds: string[],
): Promise<{ rows: number; rejects: number }> {
  return withTransaction(
    ctx.pool,
    async (c) => {
      await lockVersion(c, versionId, { mode: 'share', allowed: ['building', 'verifying'] });
      await deleteJobFiles(c, versionId, [...jobIds, ...goneIds]);
      if (!jobIds.length) return { rows: 0, rejects: 0 };
      const read = await source.openFileRead(jobIds, 0);
      try {
        const r = await writeFileRead(c, versionId, 0, read);
        await read.close();
        return { rows: r.rows, rejects: r.rejects };
      } catch (err) {
        await read.close(err as Error);
        throw err;
      }
    },
    { long: true },
  );
}
