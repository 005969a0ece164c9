/**
 * The file records' part of a reconciliation round (rebuilds with `--files`): per bucket, the count
 * and order-independent fingerprint of the source's file records at the watermark against the
 * catalog's written and quarantined ones; per job, the repair compares them (repair-files.ts). Orphan
 * `File` rows and jobs whose file count differs from `Job.JobFiles` are information, not mismatches.
 */
import type { FileBucketStat } from '../lib/catalog';
import { countFileRejects, fileBucketStats, versionHasFiles } from '../lib/catalog';
import { withLongSession } from '../lib/db';
import type { RowHashKind } from '../lib/fingerprint';
import type { JobSource } from '../lib/sources/types';
import { isFileSource } from '../lib/sources/types';
import type { ActivityContext } from './context';
import { readSource } from './failures';
import { compareBucketFigures } from './reconcile-compare';

/** A bucket whose file records differ. */
export interface FileMismatch {
  bucket: string;
  /** File records of the bucket's jobs in the source at the watermark. */
  source: number;
  /** File records in the catalog plus quarantined ones. */
  catalog: number;
  reason: 'files' | 'file fingerprint';
}

/** The file records' figures of a round. */
export interface FileReconciliation {
  /** File records in the source (jobs at or below the watermark). */
  sourceFiles: number;
  /** File records written to the catalog. */
  catalogFiles: number;
  /** File records quarantined. */
  fileRejects: number;
  /** Buckets whose file records differ (each repaired by its bucket's RepairBucket child). */
  mismatched: FileMismatch[];
  /** `File` rows whose `JobId` has no `Job` row (never copied; information). */
  orphanFiles: number;
  /** Jobs whose `File` rows differ in number from `Job.JobFiles` (pruned files; information). */
  jobFilesMismatch: {
    jobs: number;
    /** `files` = all its records; `saved` (FileIndex > 0) and `deleted` (FileIndex <= 0) apart. */
    examples: { jobId: string; jobFiles: string | null; files: number; saved?: number; deleted?: number }[];
  };
  /** The limit of quarantined file records (`maxFileRejects`, default 0.1% of the file records and at least 100). */
  maxFileRejects: number;
}

/** Default share of a version's file records that may be quarantined. */
export const FILE_REJECT_SHARE = 0.001;
/** Default least number of file records that may be quarantined. */
export const FILE_REJECT_MIN = 100;

/**
 * The file records' figures of a round, or null for a version without file records.
 * @throws SourceUnreadable when the source cannot be read (the caller names every bucket unreadable).
 */
export async function reconcileFiles(
  ctx: ActivityContext,
  sourceName: string,
  versionId: string,
  source: JobSource,
  maxKey: string | null,
  hash: RowHashKind,
): Promise<FileReconciliation | null> {
  if (!(await versionHasFiles(ctx.pool, versionId))) return null;
  if (!isFileSource(source)) throw new Error(`source ${sourceName} (${source.kind}) has no file records`);
  const what = `file records of source ${sourceName}`;
  const none = { buckets: [], orphanFiles: 0, jobFilesMismatch: { jobs: 0, examples: [] } };
  const [cat, fromSource, fileRejects] = await Promise.all([
    fileBucketStats(ctx.pool, versionId, hash),
    maxKey ? readSource(what, () => source.fileReconciliation(maxKey, hash)) : Promise.resolve(none),
    withLongSession(ctx.pool, (c) => countFileRejects(c, versionId)),
  ]);
  const { buckets: src, orphanFiles, jobFilesMismatch } = fromSource;
  const sourceFiles = src.reduce((n, s) => n + s.files, 0);
  const catalogAndRejects = cat.reduce((n, s) => n + s.files, 0);
  const configured = ctx.sources.config(sourceName).maxFileRejects;
  return {
    sourceFiles,
    catalogFiles: catalogAndRejects - fileRejects,
    fileRejects,
    mismatched: compareFileBuckets(src, cat),
    orphanFiles,
    jobFilesMismatch,
    maxFileRejects: configured ?? Math.max(FILE_REJECT_MIN, Math.ceil(sourceFiles * FILE_REJECT_SHARE)),
  };
}

/**
 * Buckets whose file count or fingerprint differs between the source and the catalog (written plus
 * quarantined), by bucket name (`none` for jobs without a start time), sorted.
 */
export function compareFileBuckets(source: FileBucketStat[], catalog: FileBucketStat[]): FileMismatch[] {
  return compareBucketFigures(source, catalog, (s) => s.files, { count: 'files', fingerprint: 'file fingerprint' });
}

/** The file records' part of the round's stored report (`reconciliation.report.files`). */
export function fileReport(f: FileReconciliation): Record<string, unknown> {
  return {
    source: f.sourceFiles,
    catalog: f.catalogFiles,
    rejects: f.fileRejects,
    maxFileRejects: f.maxFileRejects,
    sourceEqualsCatalogPlusRejects: f.sourceFiles === f.catalogFiles + f.fileRejects,
    mismatchedBuckets: f.mismatched.slice(0, 1000),
    // Information, never a mismatch:
    orphanFiles: f.orphanFiles,
    jobFilesMismatch: f.jobFilesMismatch,
  };
}

/** Why a rebuild with more quarantined file records than `maxFileRejects` is not published. */
export function fileRejectThresholdMessage(
  source: string,
  versionId: string,
  f: Pick<FileReconciliation, 'fileRejects' | 'maxFileRejects'>,
): string {
  return (
    `version ${versionId} quarantined ${f.fileRejects} file records of source ${source}, more than maxFileRejects ` +
    `(${f.maxFileRejects}); it is not published: see catalog-rebuild rejects, fix the source or raise maxFileRejects`
  );
}
