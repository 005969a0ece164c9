/**
 * Publishing: the `active` pointer (one row per catalog: its published version), its flip, the
 * retirement of the version it replaces, retention, and the shrink guard's figures and comparison.
 */
import format from 'pg-format';
import type { PoolClient } from 'pg';
import type { Queryable } from '../db';
import { partitionName } from './partitions';

/**
 * The version `active` points at for `catalog`; with `forUpdate` the pointer row is locked in the
 * transaction of `db`.
 * @returns its id (decimal text), or null when the catalog was never published.
 */
export async function activeVersionId(
  db: Queryable,
  catalog: string,
  opts: { forUpdate?: boolean } = {},
): Promise<string | null> {
  const { rows } = await db.query<{ version_id: string }>(
    `SELECT version_id::text FROM active WHERE catalog_name = $1${opts.forUpdate ? ' FOR UPDATE' : ''}`,
    [catalog],
  );
  return rows[0]?.version_id ?? null;
}

/** The most recently published `retired` version of `catalog` (the one a publish replaced), or null. */
export async function latestRetiredVersionId(db: Queryable, catalog: string): Promise<string | null> {
  const prev = await db.query<{ version_id: string }>(
    `SELECT version_id::text FROM version WHERE catalog_name = $1 AND status = 'retired' ORDER BY published_at DESC NULLS LAST LIMIT 1`,
    [catalog],
  );
  return prev.rows[0]?.version_id ?? null;
}

/**
 * Flips the catalog's `active` pointer to `versionId` and marks the version `active` (published
 * and finished now). Caller holds the publish lock; readers see the flip when the transaction commits.
 */
export async function flipActive(c: PoolClient, catalog: string, versionId: string): Promise<void> {
  await c.query(
    `INSERT INTO active (catalog_name, version_id, published_at) VALUES ($1, $2, now())
             ON CONFLICT (catalog_name) DO UPDATE SET version_id = EXCLUDED.version_id, published_at = EXCLUDED.published_at`,
    [catalog, versionId],
  );
  await c.query(
    `UPDATE version SET status = 'active', published_at = now(), finished_at = now() WHERE version_id = $1`,
    [versionId],
  );
}

/** Marks a version `retired` (replaced by a publish or a rollback; its rows are kept). */
export async function retireVersion(c: Queryable, versionId: string): Promise<void> {
  await c.query(`UPDATE version SET status = 'retired' WHERE version_id = $1`, [versionId]);
}

/**
 * The `retired` versions of `catalog` beyond the `retention` most recently published ones (the
 * ones retirement drops), newest first.
 */
export async function retiredBeyondRetention(db: Queryable, catalog: string, retention: number): Promise<string[]> {
  const { rows } = await db.query<{ version_id: string }>(
    `SELECT version_id::text FROM version WHERE catalog_name = $1 AND status = 'retired'
           ORDER BY published_at DESC NULLS LAST, version_id DESC OFFSET $2`,
    [catalog, retention],
  );
  return rows.map((r) => r.version_id);
}

/** A bucket that lost jobs from the active version to the new one (counts as decimal text). */
export interface ShrunkBucket {
  /** `YYYY-MM-DD`. */
  bucket: string;
  before: string;
  after: string;
}

/** Jobs of one dated bucket of a version (count as decimal text). */
export interface BucketJobCount {
  /** `YYYY-MM-DD`. */
  bucket: string;
  jobs: string;
}

/**
 * The shrink guard's figures for one version: jobs per dated bucket, ordered by bucket. One scan of
 * the version's table: run it on a session without statement timeout, outside the publish transaction.
 */
export async function bucketJobCounts(db: Queryable, versionId: string): Promise<BucketJobCount[]> {
  const { rows } = await db.query<BucketJobCount>(
    format(
      `SELECT bucket::text, count(*)::text AS jobs FROM %I WHERE bucket IS NOT NULL GROUP BY bucket ORDER BY bucket`,
      partitionName(versionId),
    ),
  );
  return rows;
}

/**
 * The shrink guard: dated buckets of the previous version (`before`) that lost at least `minJobs`
 * jobs and more than `share` (0..1) of their jobs in the new one (`after`), by bucket. Buckets up to
 * and including the new version's oldest dated bucket are pruned history, not shrinkage (a
 * director's retention prunes by time, so its oldest day left is often pruned in part); a new
 * version without dated jobs prunes nothing (every old bucket is compared). Pure.
 */
export function shrunkBuckets(
  before: BucketJobCount[],
  after: BucketJobCount[],
  limits: { minJobs: number; share: number },
): ShrunkBucket[] {
  const now = new Map(after.map((b) => [b.bucket, BigInt(b.jobs)]));
  const oldest = oldestBucket(after);
  const shrunk: ShrunkBucket[] = [];
  for (const o of before) {
    if (oldest !== null && o.bucket <= oldest) continue;
    const n = BigInt(o.jobs);
    const left = now.get(o.bucket) ?? 0n;
    if (lostTooMany(n, left, limits)) shrunk.push({ bucket: o.bucket, before: o.jobs, after: left.toString() });
  }
  return shrunk.sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
}

/**
 * The shrink guard over the catalog as a whole: the dated jobs of the previous version (`before`) and
 * of the new one (`after`) on the previous version's days after the new one's oldest dated bucket
 * (every day when it has none: as {@link shrunkBuckets} prunes history), when
 * the new version lost at least `minJobs` and more than `share` of them; null otherwise. Jobs on days
 * the previous version did not have (new backups) do not make up for jobs lost. It finds a loss
 * spread over many small buckets that no single bucket shows, e.g. a listing with a few snapshots a
 * day that lists none, or one fewer a day. Decimal text. Pure.
 */
export function shrunkCatalog(
  before: BucketJobCount[],
  after: BucketJobCount[],
  limits: { minJobs: number; share: number },
): { before: string; after: string } | null {
  const oldest = oldestBucket(after);
  const days = new Set(before.filter((b) => oldest === null || b.bucket > oldest).map((b) => b.bucket));
  const total = (bs: BucketJobCount[]) => bs.filter((b) => days.has(b.bucket)).reduce((n, b) => n + BigInt(b.jobs), 0n);
  const [was, left] = [total(before), total(after)];
  return lostTooMany(was, left, limits) ? { before: was.toString(), after: left.toString() } : null;
}

/** The oldest dated bucket of a version's counts; null when it has none. */
function oldestBucket(counts: BucketJobCount[]): string | null {
  return counts.length ? counts.reduce((lo, b) => (b.bucket < lo ? b.bucket : lo), counts[0].bucket) : null;
}

/** Whether going from `was` to `left` jobs loses at least `minJobs` and more than `share` of them. */
function lostTooMany(was: bigint, left: bigint, limits: { minJobs: number; share: number }): boolean {
  const lost = was - left;
  return lost >= BigInt(limits.minJobs) && Number(lost) > limits.share * Number(was);
}
