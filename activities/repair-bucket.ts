/**
 * The `repairBucket` activity: one mismatched bucket re-read from the source at the watermark and
 * made equal in the catalog (design.md G6), in one transaction behind the version fence.
 */
import type { JobKeyPair } from '../lib/catalog';
import {
  ensurePagingKeyIndex,
  bucketCountWithRejects,
  bucketCountInSpan,
  bucketJobKeys,
  bucketJobKeysInSpan,
  deleteBucketRejectsExcept,
  deleteJobsById,
  deleteJobsByKey,
  loadVersion,
  lockVersion,
  recordedBucketSpan,
  upsertRows,
  writeRejects,
} from '../lib/catalog';
import { withLongSession, withTransaction } from '../lib/db';
import { NotPublishableError } from '../lib/errors';
import type { JobSource, KeySpan, SourceRow } from '../lib/sources/types';
import type { ValidatedRows } from '../lib/validate';
import { validateRows } from '../lib/validate';
import type { RepairBucketInput, RepairBucketResult } from '../workflows/definitions';
import type { ActivityContext } from './context';
import { guard, readSource, SourceUnreadable } from './failures';
import { withHeartbeat } from './heartbeat';
import { bucketUnreadableMessage, repairedMessage } from './messages';
import { rowHashKind } from './reconcile';
import { repairBucketFiles } from './repair-files';

/** What the source says about a bucket, read before the repair transaction. */
interface BucketReading {
  /** The bucket's records at or below the watermark, validated. */
  read: ValidatedRows;
  /** Records the catalog has in this bucket that now belong to another bucket, validated. */
  moved: ValidatedRows;
  /** Catalog rows of this bucket whose job is gone from the source. */
  gone: JobKeyPair[];
}

/**
 * Repairs one bucket: re-reads it from the source at the watermark (by job-id range over the
 * bucket's id span recorded by the latest reconciliation; the whole bucket when none is), upserts it, moves catalog
 * rows that now belong to another bucket, deletes rows whose job is gone from the source, and
 * verifies the bucket. Writes require the version to be building or verifying (the fence).
 * Quarantined records lose their catalog row; records of the bucket valid again leave `reject`.
 * @throws NOT_PUBLISHABLE when the bucket cannot be read (never repaired as if empty);
 *   VERSION_FENCED when the version is no longer building or verifying.
 */
export async function repairBucket(ctx: ActivityContext, input: RepairBucketInput): Promise<RepairBucketResult> {
  return withHeartbeat(
    () => ({ stage: 'repairing', bucket: input.bucket }),
    () => guard(() => repair(ctx, input)),
  );
}

async function repair(ctx: ActivityContext, input: RepairBucketInput): Promise<RepairBucketResult> {
  const v = await loadVersion(ctx.pool, input.versionId);
  if (!v.watermark_key) return { bucket: input.bucket, upserted: 0, deleted: 0, ok: true };
  const source = ctx.sources.get(input.source, input.versionId);
  await ensurePagingKeyIndex(ctx.pool, input.versionId);
  // The bucket's id span from the latest reconciliation: both sides are read by key range.
  const span = await recordedBucketSpan(ctx.pool, input.versionId, input.bucket);
  const { read, moved, gone } = await readBucket(ctx, input, source, v.watermark_key, span);
  const rejected = [...read.rejects, ...moved.rejects];
  const rejectedKeys = rejected.map((r) => r.jobKey);
  const { upserted, deleted } = await withTransaction(
    ctx.pool,
    async (c) => {
      await lockVersion(c, input.versionId, { mode: 'share', allowed: ['building', 'verifying'] });
      const n = await upsertRows(c, input.versionId, 0, dedupeByJobId([...read.valid, ...moved.valid]));
      const d = await deleteJobsById(
        c,
        input.versionId,
        gone.map((r) => r.job_id),
      );
      const q = await deleteJobsByKey(c, input.versionId, rejectedKeys);
      await deleteBucketRejectsExcept(c, input.versionId, input.bucket, rejectedKeys);
      await writeRejects(c, input.versionId, 0, rejected);
      return { upserted: n, deleted: d + q };
    },
    { long: true },
  );
  const files = await repairBucketFiles(ctx, input.source, input.versionId, source, await rowHashKind(ctx, source), {
    jobIds: [...read.valid.map((r) => r.job_id!), ...read.rejects.flatMap((r) => (r.jobId ? [r.jobId] : []))],
    movedIds: [...moved.valid.map((r) => r.job_id!)],
    goneIds: gone.map((r) => r.job_id),
  }).catch((err: unknown) => {
    throw err instanceof SourceUnreadable
      ? new NotPublishableError(`bucket ${input.bucket ?? 'none'}: ${err.message}`)
      : err;
  });
  const after = span
    ? await withLongSession(ctx.pool, (c) => bucketCountInSpan(c, input.versionId, input.bucket, span))
    : await bucketCountWithRejects(ctx.pool, input.versionId, input.bucket);
  const ok = after === read.valid.length + read.rejects.length;
  const facts = {
    bucket: input.bucket,
    upserted,
    deleted,
    moved: moved.valid.length + moved.rejects.length,
    rejects: rejected.length,
    ok,
  };
  await ctx.events.record(ctx.pool, {
    catalog: input.catalog,
    versionId: input.versionId,
    kind: 'repaired',
    message: repairedMessage(facts),
    details: {
      ...facts,
      ...(files
        ? {
            filesReplacedJobs: files.replacedJobs.slice(0, 100),
            filesReplacedJobCount: files.replacedJobs.length,
            files: files.files,
            fileRejects: files.rejects,
            filesDeletedJobs: files.deletedJobs,
          }
        : {}),
    },
  });
  return { bucket: input.bucket, upserted, deleted, ok };
}

/**
 * Reads the bucket from the source, and for the catalog's rows of the bucket the source no longer
 * has there, whether their job still exists (then it moved and is read by key) or is gone.
 * @throws NotPublishableError (after an `unreadable` event) when the source cannot be read.
 */
async function readBucket(
  ctx: ActivityContext,
  input: RepairBucketInput,
  source: JobSource,
  maxKey: string,
  span: KeySpan | null,
): Promise<BucketReading> {
  const what = `bucket ${input.bucket ?? 'none'} of source ${input.source}`;
  try {
    const read = validateRows(
      await readSource(what, () =>
        span ? source.readBucketInSpan(input.bucket, maxKey, span) : source.readBucket(input.bucket, maxKey),
      ),
    );
    const ids = new Set(read.valid.map((r) => r.job_id!));
    const rejectedHere = new Set(read.rejects.map((r) => r.jobKey));
    const inCatalog = await withLongSession(ctx.pool, (c) =>
      span
        ? bucketJobKeysInSpan(c, input.versionId, input.bucket, span)
        : bucketJobKeys(c, input.versionId, input.bucket),
    );
    // Catalog rows of this bucket that the source no longer has here: moved, gone, or (rows
    // of records read here that are now quarantined) to be dropped in the repair transaction.
    const strays = inCatalog.filter((r) => !ids.has(r.job_id) && !rejectedHere.has(r.job_key));
    const strayKeys = strays.map((r) => r.job_key);
    const stillThere = await readSource(what, () => source.existingJobIds(strayKeys, maxKey));
    const movedKeys = strays.filter((r) => stillThere.has(r.job_key)).map((r) => r.job_key);
    const moved = validateRows(movedKeys.length ? await readSource(what, () => source.readKeys(movedKeys)) : []);
    return { read, moved, gone: strays.filter((r) => !stillThere.has(r.job_key)) };
  } catch (err) {
    if (!(err instanceof SourceUnreadable)) throw err;
    // An unreadable bucket is never repaired as if empty: the rebuild fails naming it.
    const message = bucketUnreadableMessage(err.message, input.versionId);
    await ctx.events.record(ctx.pool, {
      catalog: input.catalog,
      versionId: input.versionId,
      kind: 'unreadable',
      message,
      details: { bucket: input.bucket, reason: err.detail },
    });
    throw new NotPublishableError(message);
  }
}

/**
 * De-duplicates rows by job id, keeping the LAST row read for an id (the source orders by key,
 * so the winner is deterministic); `ON CONFLICT` cannot affect a row twice in one command.
 */
export function dedupeByJobId(rows: SourceRow[]): SourceRow[] {
  const byId = new Map<string, SourceRow>();
  for (const r of rows) byId.set(r.job_id!, r);
  return byId.size === rows.length ? rows : [...byId.values()];
}
