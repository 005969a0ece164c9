/**
 * Each page's figures per dated bucket (`page_bucket`, migration 016), stored in its transaction
 * from the rows it wrote (lib/page/digest.ts), and what is read from them instead of scanning a
 * version's table: the catalog side of a full rebuild's first reconciliation round, and its jobs
 * per bucket for the shrink guard.
 */
import type { PoolClient } from 'pg';
import format from 'pg-format';
import type { Queryable } from '../db';
import { digestOfSumSql } from '../fingerprint';
import type { BucketStat, StatRow } from '../sources/types';
import { toBucketStat } from '../sources/types';
import { partitionName } from './partitions';
import type { CatalogStats } from './reconcile';

/** A page's rows of one dated bucket, as lib/page/digest.ts adds them up from its COPY stream. */
export interface StoredBucketFigures {
  /** `YYYY-MM-DD`, null for jobs without a start time. */
  bucket: string | null;
  /** Rows. */
  jobs: number;
  /** Sum of their row hashes (signed 64-bit each), decimal text, not reduced modulo 2^64. */
  hashSum: string;
  /** Sum of their `bytes` (NULL counted as 0; values that are not whole numbers left out), decimal text. */
  bytes: string;
  /** First and last job key, decimal text. */
  minKey: string;
  maxKey: string;
  /** Rows with a non-NULL type, level or status code not in KNOWN_CODES (lib/validate.ts). */
  unknownCodes: number;
}

/**
 * Stores a page's bucket figures and marks its ledger row as having them (`bucket_figures`), inside
 * the page transaction, after its ledger row was claimed.
 */
export async function storePageBuckets(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  buckets: StoredBucketFigures[],
): Promise<void> {
  await c.query(`DELETE FROM page_bucket WHERE version_id = $1 AND page_no = $2`, [versionId, pageNo]);
  if (buckets.length)
    await c.query(
      `INSERT INTO page_bucket (version_id, page_no, bucket, jobs, hash_sum, bytes, min_key, max_key, unknown_codes)
       SELECT $1, $2, b, j, h, y, lo, hi, u
       FROM unnest($3::date[], $4::bigint[], $5::numeric[], $6::numeric[], $7::bigint[], $8::bigint[], $9::bigint[])
            AS t(b, j, h, y, lo, hi, u)`,
      [
        versionId,
        pageNo,
        buckets.map((b) => b.bucket),
        buckets.map((b) => b.jobs),
        buckets.map((b) => b.hashSum),
        buckets.map((b) => b.bytes),
        buckets.map((b) => b.minKey),
        buckets.map((b) => b.maxKey),
        buckets.map((b) => b.unknownCodes),
      ],
    );
  await c.query(`UPDATE page SET bucket_figures = true WHERE version_id = $1 AND page_no = $2`, [versionId, pageNo]);
}

/** Whether every committed page of the version stored its bucket figures (none was written row by row). */
async function everyPageHasFigures(db: Queryable, versionId: string): Promise<boolean> {
  const missing = await db.query(
    `SELECT 1 FROM page WHERE version_id = $1 AND committed_at IS NOT NULL AND NOT bucket_figures LIMIT 1`,
    [versionId],
  );
  return !missing.rowCount;
}

/**
 * The catalog side of a reconciliation round from the pages' stored figures: per bucket, jobs,
 * the digest of their row hashes (lib/fingerprint.ts, `row`), bytes and key span, plus the jobs
 * with an unknown code. Reads a few rows per page, not the version's table.
 * @returns null when a committed page of the version stored no figures (it was written row by
 *   row): the round then scans the table.
 */
export async function storedBucketStats(db: Queryable, versionId: string): Promise<CatalogStats | null> {
  if (!(await everyPageHasFigures(db, versionId))) return null;
  const { rows } = await db.query<StatRow & { unknown: string }>(
    `SELECT b.bucket::text AS bucket, sum(b.jobs)::text AS count, ${digestOfSumSql('sum(b.hash_sum)')} AS fingerprint,
            sum(b.bytes)::text AS bytes, min(b.min_key)::text AS min_key, max(b.max_key)::text AS max_key,
            sum(b.unknown_codes)::text AS unknown
     FROM page_bucket b JOIN page p ON p.version_id = b.version_id AND p.page_no = b.page_no AND p.committed_at IS NOT NULL
     WHERE b.version_id = $1 GROUP BY 1 ORDER BY 1 NULLS FIRST`,
    [versionId],
  );
  const buckets: BucketStat[] = rows.map(toBucketStat);
  return { buckets, unknownCodeJobs: rows.reduce((n, r) => n + Number(r.unknown), 0) };
}

/**
 * Stores a full rebuild's jobs per dated bucket (`version_bucket`) from its pages' stored figures.
 * Idempotent.
 * @returns false (nothing stored) when a committed page stored no figures: count them on the table.
 */
export async function storeBucketCountsFromFigures(db: Queryable, versionId: string): Promise<boolean> {
  if (!(await everyPageHasFigures(db, versionId))) return false;
  await db.query(`DELETE FROM version_bucket WHERE version_id = $1`, [versionId]);
  await db.query(
    `INSERT INTO version_bucket (version_id, bucket, jobs)
     SELECT $1, b.bucket, sum(b.jobs) FROM page_bucket b
     JOIN page p ON p.version_id = b.version_id AND p.page_no = b.page_no AND p.committed_at IS NOT NULL
     WHERE b.version_id = $1 AND b.bucket IS NOT NULL GROUP BY b.bucket`,
    [versionId],
  );
  return true;
}

/** Jobs, row-hash digest and key span of one bucket of a version's table, as counted. */
export interface TableBucketCount {
  /** `YYYY-MM-DD`, null for jobs without a start time. */
  bucket: string | null;
  count: number;
  /** The digest of the row hashes the table stores (lib/fingerprint.ts, `row`), decimal text. */
  fingerprint: string;
  minKey: string;
  maxKey: string;
}

/**
 * Jobs, the digest of the stored row hashes (a plain sum: nothing is hashed) and key span per
 * bucket of a version's table, in one scan (run it on a session without statement timeout).
 */
export async function tableBucketCounts(db: Queryable, versionId: string): Promise<TableBucketCount[]> {
  const { rows } = await db.query<{
    bucket: string | null;
    count: string;
    fingerprint: string;
    min_key: string;
    max_key: string;
  }>(
    format(
      `SELECT bucket::text AS bucket, count(*)::text AS count, ${digestOfSumSql('sum(row_hash)')} AS fingerprint,
              min(job_key)::text AS min_key, max(job_key)::text AS max_key
       FROM %I GROUP BY 1 ORDER BY 1 NULLS FIRST`,
      partitionName(versionId),
    ),
  );
  return rows.map((r) => ({
    bucket: r.bucket,
    count: Number(r.count),
    fingerprint: r.fingerprint,
    minKey: r.min_key,
    maxKey: r.max_key,
  }));
}

/** The digest given to a bucket whose table holds another number of jobs than its pages wrote. */
export const TABLE_DIFFERS = 'the table differs from its pages';

/**
 * The pages' bucket figures checked against the table's counts: a bucket whose table holds another
 * number of jobs, another sum of stored row hashes or another key span than its pages wrote (rows
 * deleted, added or replaced outside a page transaction) takes the table's count, a digest that
 * matches no source ({@link TABLE_DIFFERS}) and the union of both key spans, so its
 * reconciliation names it and its repair reads its whole span. A row changed in place outside a
 * page, its stored row hash kept, is not seen here (the sample may see it; `--verify full` does).
 */
export function checkFiguresAgainstTable(stored: CatalogStats, table: TableBucketCount[]): CatalogStats {
  const key = (b: string | null) => b ?? '';
  const counted = new Map(table.map((t) => [key(t.bucket), t]));
  const out: BucketStat[] = [];
  const min = (a: string, b: string) => (BigInt(a) < BigInt(b) ? a : b);
  const max = (a: string, b: string) => (BigInt(a) > BigInt(b) ? a : b);
  for (const s of stored.buckets) {
    const t = counted.get(key(s.bucket));
    counted.delete(key(s.bucket));
    // A bucket the table no longer holds is absent, as a scan of the table finds it.
    if (!t) continue;
    if (t.count === s.count && t.fingerprint === s.fingerprint && t.minKey === s.minKey && t.maxKey === s.maxKey)
      out.push(s);
    else
      out.push({
        ...s,
        count: t.count,
        fingerprint: TABLE_DIFFERS,
        minKey: min(t.minKey, s.minKey),
        maxKey: max(t.maxKey, s.maxKey),
      });
  }
  for (const t of counted.values())
    out.push({
      bucket: t.bucket,
      count: t.count,
      fingerprint: TABLE_DIFFERS,
      bytes: '0',
      minKey: t.minKey,
      maxKey: t.maxKey,
    });
  out.sort((a, b) =>
    a.bucket === b.bucket ? 0 : a.bucket === null ? -1 : b.bucket === null ? 1 : a.bucket < b.bucket ? -1 : 1,
  );
  return { buckets: out, unknownCodeJobs: stored.unknownCodeJobs };
}
