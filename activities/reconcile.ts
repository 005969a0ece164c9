/**
 * The `reconcile` activity: one round of comparing a version with its source at the watermark
 * (design.md G6, G10). The comparisons are in `reconcile-compare.ts`, the wording in `messages.ts`.
 */
import { log } from '@temporalio/activity';
import {
  baseVersionOf,
  catalogBucketStats,
  catalogHashProbe,
  countRejects,
  decodedValueCounts,
  duplicateJobNameCount,
  duplicateRecordCount,
  goneJobs,
  loadVersion,
  rejectSample,
  sampleCatalogRows,
  saveReconciliation,
  storedBucketStats,
  tableBucketCounts,
  versionWasRepaired,
  checkFiguresAgainstTable,
  unknownCodeCounts,
} from '../lib/catalog';
import { NotPublishableError } from '../lib/errors';
import type { CatalogStats, VersionRow } from '../lib/catalog';
import { isDataError, withLongSession } from '../lib/db';
import type { BucketStat, JobSource } from '../lib/sources/types';
import { KNOWN_CODES } from '../lib/validate';
import type { BucketDigestKind, RowHashKind } from '../lib/fingerprint';
import type { ReconcileInput } from '../workflows/activity-types';
import type { ReconcileSummary } from '../workflows/definitions';
import type { ActivityContext } from './context';
import { guard, readSource, SourceUnreadable } from './failures';
import { withHeartbeat } from './heartbeat';
import type { ReconcileWarnings } from './messages';
import { reconciledMessage, rejectThresholdError, sourceUnreadableMessage } from './messages';
import type { SampleComparison } from './reconcile-compare';
import type { MismatchedBucket } from './reconcile-compare';
import { bucketName, bucketSpans, compareBuckets, compareSample, sumBytes } from './reconcile-compare';
import type { FileMismatch, FileReconciliation } from './reconcile-files';
import { fileRejectThresholdMessage, fileReport, reconcileFiles } from './reconcile-files';
import { reconcileRefresh } from './reconcile-refresh';
import { compareSampleWithSource } from './reconcile-sample';

/** Records compared field by field per round unless the input says otherwise. */
const DEFAULT_SAMPLE_SIZE = 1000;

/**
 * Reconciles the version against the source at the watermark: per-bucket counts and
 * fingerprints, duplicate job names, a random sample compared field by field, and the delta
 * above the watermark, with the jobs at or below it that pages found gone from the source after the
 * plan (left out of both sides). Stores the report in `reconciliation` and a `reconciled` event.
 * @returns the round's summary; `ok` false names the buckets to repair.
 * @throws NOT_PUBLISHABLE when the source cannot be read (every bucket named unreadable) or the
 *   quarantined records exceed the source's `maxRejects`.
 */
export async function reconcile(ctx: ActivityContext, input: ReconcileInput): Promise<ReconcileSummary> {
  return withHeartbeat(
    () => ({ stage: 'reconciling', round: input.round }),
    () => guard(() => reconcileRound(ctx, input)),
  );
}

async function reconcileRound(ctx: ActivityContext, input: ReconcileInput): Promise<ReconcileSummary> {
  const v = await loadVersion(ctx.pool, input.versionId);
  const base = await baseVersionOf(ctx.pool, input.versionId);
  if (base) return reconcileRefresh(ctx, input, v, base);
  const source = ctx.sources.get(input.source, input.versionId);
  const maxKey = v.watermark_key;
  const hash = await rowHashKind(ctx, source);
  // The catalog side from the pages' stored figures when they hold (the table is only counted per
  // bucket, nothing hashed); then the source digests the row hashes the pages stored. Else one
  // hashing pass per side.
  let stored = await storedCatalogStats(ctx, input, v);
  let sides = await readSides(ctx, input, source, maxKey, hash, stored);
  if (stored && 'unreadable' in sides.sourceSide && isDataError(sides.sourceSide.unreadable.cause)) {
    // A value the row hash reads (every column) cannot be read now: the fingerprint reads fewer
    // columns, so the round still names the buckets it can and sends this one to its repair.
    log.warn('reconciliation scans the catalog: the source refused a value its row hashes read', {
      versionId: input.versionId,
      error: sides.sourceSide.unreadable.detail,
    });
    stored = null;
    sides = await readSides(ctx, input, source, maxKey, hash, stored);
  }
  const { catalogSide, sourceSide } = sides;
  const digest: BucketDigestKind = stored ? 'row' : hash;
  const cat = catalogSide.stats.buckets;
  if ('unreadable' in sourceSide) return reportUnreadable(ctx, input, maxKey, cat, sourceSide.unreadable);
  const { src, delta } = sourceSide;
  const { duplicateJobNames, rejects } = catalogSide;
  const sample = await compareSampleWithSource(ctx, input, source, maxKey);
  const mismatched = compareBuckets(src, cat, sample.buckets);
  const files = await readFileSide(ctx, input, source, maxKey, hash);
  if (files && 'unreadable' in files) return reportUnreadable(ctx, input, maxKey, cat, files.unreadable);
  if (files) addFileMismatches(mismatched, files.mismatched, src, cat);
  const sourceRows = src.reduce((n, s) => n + s.count, 0);
  // Bucket statistics of the catalog include its quarantined records: source = catalog + rejects.
  const catalogRows = cat.reduce((n, s) => n + s.count, 0) - rejects;
  const warnings = await readWarnings(ctx, input, source, maxKey, catalogSide.stats.unknownCodeJobs);
  // Left out of the version by their pages, and of the source side (staged.ts): a follow-up delta.
  const gone = await goneJobs(ctx.pool, input.versionId, maxKey);
  const summary: ReconcileSummary = {
    round: input.round,
    ok: mismatched.length === 0 && sample.mismatches === 0,
    buckets: new Set(src.map((s) => bucketName(s.bucket))).size,
    sourceRows,
    catalogRows,
    rejects,
    mismatched: mismatched.map((m) => m.bucket),
    delta,
    gone: gone.count,
    duplicateJobNames,
    sampleMismatches: sample.mismatches,
    sampled: sample.sampled,
    ...(files ? { files: { source: files.sourceFiles, catalog: files.catalogFiles, rejects: files.fileRejects } } : {}),
  };
  const maxRejects = ctx.sources.config(input.source).maxRejects ?? 0;
  const rejectRows = rejects ? await rejectSample(ctx.pool, input.versionId) : [];
  const overThreshold = summary.ok && rejects > maxRejects;
  const overFileThreshold = summary.ok && !!files && files.fileRejects > files.maxFileRejects;
  if (overThreshold || overFileThreshold) summary.ok = false;
  const report = {
    ...summary,
    mismatchedBuckets: mismatched.slice(0, 1000),
    // Each mismatched bucket's id span (source and catalog together), read by its repair.
    bucketSpans: bucketSpans(
      mismatched.map((m) => m.bucket),
      src,
      cat,
    ),
    sampleDiffs: sample.diffs,
    watermarkKey: maxKey,
    goneJobs: gone.first,
    sourceEqualsCatalogPlusRejects: sourceRows === catalogRows + rejects,
    // Byte totals summed in SQL per bucket and added here as BigInt: decimal text, exact.
    bytes: { source: sumBytes(src), catalogPlusRejects: sumBytes(cat) },
    maxRejects,
    rejectSample: rejectRows,
    warnings: warnings.unknownCodes.reduce((n, c) => n + c.jobs, 0),
    unknownCodes: warnings.unknownCodes,
    duplicateRecords: warnings.duplicateRecords,
    // Source text that was not UTF-8, decoded from the source's legacyEncoding, per catalog column.
    decodedValues: await decodedValueCounts(ctx.pool, input.versionId),
    // The bucket digests' row hash (lib/fingerprint.ts): `row` (the row hashes the pages stored),
    // else hashtext64 when both servers hash alike, else md5.
    rowHash: digest,
    // Where the catalog side came from: the pages' stored bucket figures, or a scan of the table.
    catalogSide: stored ? 'pages' : 'scan',
    ...(warnings.dst ? { dst: warnings.dst } : {}),
    ...(files ? { files: fileReport(files) } : {}),
  };
  await saveReconciliation(ctx.pool, input.versionId, input.round, summary.ok, report);
  await ctx.events.record(ctx.pool, {
    catalog: input.catalog,
    versionId: input.versionId,
    kind: 'reconciled',
    message: reconciledMessage({ ...summary, overThreshold, maxRejects }, warnings),
    details: report,
  });
  if (overFileThreshold)
    throw new NotPublishableError(fileRejectThresholdMessage(input.source, input.versionId, files));
  if (overThreshold)
    throw rejectThresholdError({
      source: input.source,
      versionId: input.versionId,
      rejects,
      maxRejects,
      sample: rejectRows,
    });
  return summary;
}

/** The file records' figures of the round (null without `--files`), or why the source could not be read. */
async function readFileSide(
  ctx: ActivityContext,
  input: ReconcileInput,
  source: JobSource,
  maxKey: string | null,
  hash: RowHashKind,
): Promise<FileReconciliation | { unreadable: SourceUnreadable } | null> {
  try {
    return await reconcileFiles(ctx, input.source, input.versionId, source, maxKey, hash);
  } catch (err) {
    if (!(err instanceof SourceUnreadable)) throw err;
    return { unreadable: err };
  }
}

/**
 * Adds the buckets whose file records differ to the round's mismatched buckets (a bucket already
 * named for its jobs keeps that reason): each is repaired by its bucket's RepairBucket child.
 */
function addFileMismatches(
  mismatched: MismatchedBucket[],
  fileMismatches: FileMismatch[],
  src: BucketStat[],
  cat: BucketStat[],
): void {
  const jobs = (stats: BucketStat[], b: string) => stats.find((s) => bucketName(s.bucket) === b)?.count ?? 0;
  for (const f of fileMismatches) {
    if (mismatched.some((m) => m.bucket === f.bucket)) continue;
    mismatched.push({ bucket: f.bucket, source: jobs(src, f.bucket), catalog: jobs(cat, f.bucket), reason: f.reason });
  }
  mismatched.sort((a, b) => a.bucket.localeCompare(b.bucket));
}

/**
 * The row hash both sides use: `hashtext64` when the source server hashes the probe text as the
 * catalog server does (same hash function and byte order), else `md5`. A source that cannot answer
 * is left to the stats read, which names it.
 */
export async function rowHashKind(ctx: ActivityContext, source: JobSource): Promise<RowHashKind> {
  if (!source.hashProbe) return 'hashtext64';
  try {
    const [mine, theirs] = await Promise.all([catalogHashProbe(ctx.pool), source.hashProbe()]);
    return mine === theirs ? 'hashtext64' : 'md5';
  } catch {
    return 'md5';
  }
}

/** Both sides of a round at once (each on a session without statement timeout). */
async function readSides(
  ctx: ActivityContext,
  input: ReconcileInput,
  source: JobSource,
  maxKey: string | null,
  hash: RowHashKind,
  stored: CatalogStats | null,
) {
  const [catalogSide, sourceSide] = await Promise.all([
    readCatalogSide(ctx, input.versionId, hash, stored),
    readSourceStats(input, source, maxKey, stored ? 'row' : hash),
  ]);
  return { catalogSide, sourceSide };
}

/**
 * The catalog side of a full rebuild's first round from its pages' stored bucket figures
 * (lib/catalog/bucket-figures.ts), or null when the round scans the table: a later round (a repair
 * rewrote rows since), `start --verify full`, quarantined records (their row hashes are not
 * stored), or a page written row by row (it stored no figures).
 */
async function storedCatalogStats(
  ctx: ActivityContext,
  input: ReconcileInput,
  v: VersionRow,
): Promise<CatalogStats | null> {
  if (input.round !== 1 || v.verify_full) return null;
  if (await countRejects(ctx.pool, input.versionId)) return null;
  // A round 1 run again after a repair (a workflow reset): the figures no longer describe the table.
  if (await versionWasRepaired(ctx.pool, input.catalog, input.versionId)) return null;
  return storedBucketStats(ctx.pool, input.versionId);
}

/**
 * The catalog side of a round: per-bucket statistics (`stored` checked against the table's counts
 * per bucket, or one hashing scan), duplicate job names, rejects.
 */
async function readCatalogSide(
  ctx: ActivityContext,
  versionId: string,
  hash: RowHashKind,
  stored: CatalogStats | null,
): Promise<{ stats: CatalogStats; duplicateJobNames: number; rejects: number }> {
  return withLongSession(ctx.pool, async (c) => ({
    stats: stored
      ? checkFiguresAgainstTable(stored, await tableBucketCounts(c, versionId))
      : await catalogBucketStats(c, versionId, KNOWN_CODES, hash),
    duplicateJobNames: await duplicateJobNameCount(c, versionId),
    rejects: await countRejects(c, versionId),
  }));
}

/**
 * The source's bucket statistics at the watermark and its delta above it, read in parallel; when
 * the source cannot be read, why.
 */
async function readSourceStats(
  input: ReconcileInput,
  source: JobSource,
  maxKey: string | null,
  digest: BucketDigestKind,
): Promise<{ src: BucketStat[]; delta: number } | { unreadable: SourceUnreadable }> {
  try {
    const [src, delta] = await Promise.all([
      readSource(`source ${input.source}`, () =>
        maxKey ? source.bucketStats(maxKey, digest) : Promise.resolve([] as BucketStat[]),
      ),
      readSource(`source ${input.source}`, () => source.deltaCount(maxKey)),
    ]);
    return { src, delta };
  } catch (err) {
    if (!(err instanceof SourceUnreadable)) throw err;
    return { unreadable: err };
  }
}

/**
 * An unreadable source: every catalog bucket is named unreadable (none is counted as empty), the
 * round's report and an `unreadable` event are stored, and the rebuild fails.
 * @throws NotPublishableError always.
 */
async function reportUnreadable(
  ctx: ActivityContext,
  input: ReconcileInput,
  maxKey: string | null,
  cat: BucketStat[],
  err: SourceUnreadable,
): Promise<never> {
  const names = cat.map((s) => bucketName(s.bucket));
  const message = sourceUnreadableMessage(
    input.round,
    input.source,
    cat.map((s) => s.bucket),
    err.detail,
  );
  const report = {
    round: input.round,
    ok: false,
    unreadable: names.slice(0, 1000),
    unreadableCount: names.length,
    unreadableReason: err.detail,
    watermarkKey: maxKey,
  };
  await saveReconciliation(ctx.pool, input.versionId, input.round, false, report);
  await ctx.events.record(ctx.pool, {
    catalog: input.catalog,
    versionId: input.versionId,
    kind: 'unreadable',
    message,
    details: { ...report, unreadable: names.slice(0, 100) },
  });
  throw new NotPublishableError(message);
}

/**
 * What the round reports without blocking the publish: DST-affected start times (a failure to count
 * them is reported as `{ error }`), unknown codes (named per field and code when the bucket pass
 * counted `unknownCodeJobs`), and repeated ids dropped.
 */
async function readWarnings(
  ctx: ActivityContext,
  input: ReconcileInput,
  source: JobSource,
  maxKey: string | null,
  unknownCodeJobs: number,
): Promise<ReconcileWarnings> {
  const [dst, unknownCodes, duplicateRecords] = await Promise.all([
    maxKey
      ? readSource(`source ${input.source}`, () => source.dstReport(maxKey)).catch((err: unknown) => {
          // A report only: it never blocks the publish, but says why it is missing.
          log.warn('could not count DST-affected start times', { source: input.source, error: (err as Error).message });
          return { error: (err as Error).message };
        })
      : Promise.resolve(null),
    // Only when the bucket pass counted jobs with an unknown code: a second scan names them.
    unknownCodeJobs
      ? withLongSession(ctx.pool, (c) => unknownCodeCounts(c, input.versionId, KNOWN_CODES))
      : Promise.resolve([]),
    duplicateRecordCount(ctx.pool, input.versionId),
  ]);
  return { dst, unknownCodes, duplicateRecords };
}
