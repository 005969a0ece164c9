/**
 * The comparisons of reconciliation, pure: per-bucket statistics of the source against the
 * catalog's (counts, then fingerprints), and sampled catalog records against the source's field by
 * field. Buckets are named by date, `none` for jobs without a start time.
 */
import type { BucketStat, KeySpan, SourceRow } from '../lib/sources/types';
import { JOB_COLUMNS } from '../lib/sources/types';
import type { FileMismatch } from './reconcile-files';

/** A bucket that differs, with both sides' job counts and why. */
export interface MismatchedBucket {
  /** `YYYY-MM-DD`, or `none`. */
  bucket: string;
  /** Jobs of the bucket in the source (0 when the source has no such bucket). */
  source: number;
  /** Jobs plus quarantined records of the bucket in the catalog (0 when it has no such bucket). */
  catalog: number;
  /** `count` (counts differ or one side lacks the bucket), `fingerprint`, or `sample` (a sampled record differs). */
  reason: 'count' | 'fingerprint' | 'sample' | FileMismatch['reason'];
}

/** A bucket's name in reports: its date, or `none` for jobs without a start time. */
export function bucketName(bucket: string | null): string {
  return bucket ?? 'none';
}

/**
 * The one bucket comparison of jobs and of file records: per bucket (`none` for jobs without a
 * start time), both sides' figure (`count`: jobs, or file records; a side without the bucket has
 * 0), then, for equal non-zero figures, their digests. A differing figure is `reasons.count`, a
 * differing digest `reasons.fingerprint`.
 * @returns the differing buckets sorted by name, with both sides' figures.
 */
export function compareBucketFigures<T extends { bucket: string | null; fingerprint: string }, R extends string>(
  source: T[],
  catalog: T[],
  count: (t: T) => number,
  reasons: { count: R; fingerprint: R },
): { bucket: string; source: number; catalog: number; reason: R }[] {
  const srcMap = new Map(source.map((s) => [bucketName(s.bucket), s]));
  const catMap = new Map(catalog.map((s) => [bucketName(s.bucket), s]));
  const out: { bucket: string; source: number; catalog: number; reason: R }[] = [];
  for (const b of new Set([...srcMap.keys(), ...catMap.keys()])) {
    const s = srcMap.get(b);
    const c = catMap.get(b);
    const [sn, cn] = [s ? count(s) : 0, c ? count(c) : 0];
    if (sn !== cn) out.push({ bucket: b, source: sn, catalog: cn, reason: reasons.count });
    else if (sn && s!.fingerprint !== c!.fingerprint)
      out.push({ bucket: b, source: sn, catalog: cn, reason: reasons.fingerprint });
  }
  return out.sort((a, b) => a.bucket.localeCompare(b.bucket));
}

/**
 * Compares the source's bucket statistics with the catalog's (which include quarantined records)
 * with {@link compareBucketFigures}: different job counts (or a bucket on one side only) differ by
 * `count`, same count but another fingerprint by `fingerprint`. Buckets named in `sampleBuckets`
 * (where a sampled record differs) that match otherwise differ by `sample`, so a difference outside
 * the fingerprint still sends its bucket to repair.
 * @returns the differing buckets sorted by name.
 */
export function compareBuckets(
  source: BucketStat[],
  catalog: BucketStat[],
  sampleBuckets: Iterable<string> = [],
): MismatchedBucket[] {
  const mismatched: MismatchedBucket[] = compareBucketFigures(source, catalog, (s) => s.count, {
    count: 'count',
    fingerprint: 'fingerprint',
  });
  const srcMap = new Map(source.map((s) => [bucketName(s.bucket), s]));
  const catMap = new Map(catalog.map((s) => [bucketName(s.bucket), s]));
  for (const b of sampleBuckets) {
    if (!mismatched.some((m) => m.bucket === b)) {
      mismatched.push({
        bucket: b,
        source: srcMap.get(b)?.count ?? 0,
        catalog: catMap.get(b)?.count ?? 0,
        reason: 'sample',
      });
    }
  }
  return mismatched.sort((a, b) => a.bucket.localeCompare(b.bucket));
}

/** One sampled job whose fields differ between catalog and source. */
export interface SampleDiff {
  jobId: string | null;
  /** Columns that differ, in column order. */
  fields: string[];
}

/** The field-by-field comparison of a sample. */
export interface SampleComparison {
  /** Sampled jobs that differ in a field or are missing from the source. */
  mismatches: number;
  /** The first 20 jobs that differ in a field. */
  diffs: SampleDiff[];
  /** Buckets (both sides' for a differing job; the catalog's for a missing one) to repair. */
  buckets: Set<string>;
}

/**
 * Compares sampled catalog rows with the source's rows of the same keys, every column in text form
 * (NULL equals NULL). A source row whose job id is not in the sample is ignored; a sampled row
 * without a source row with its job id counts as a mismatch.
 */
export function compareSample(catalogRows: SourceRow[], sourceRows: SourceRow[]): SampleComparison {
  const byId = new Map(catalogRows.map((r) => [r.job_id, r]));
  const seen = new Set<string>();
  const result: SampleComparison = { mismatches: 0, diffs: [], buckets: new Set() };
  for (const s of sourceRows) {
    const c = byId.get(s.job_id);
    if (!c) continue;
    seen.add(s.job_id!);
    const fields = JOB_COLUMNS.filter((f) => (s[f] ?? null) !== (c[f] ?? null));
    if (fields.length) {
      result.mismatches++;
      if (result.diffs.length < 20) result.diffs.push({ jobId: s.job_id, fields });
      result.buckets.add(bucketName(c.bucket));
      result.buckets.add(bucketName(s.bucket));
    }
  }
  for (const c of catalogRows) if (!seen.has(c.job_id!)) result.buckets.add(bucketName(c.bucket));
  result.mismatches += catalogRows.length - seen.size;
  return result;
}

/** Total of the buckets' byte sums (decimal text in, decimal text out; exact). */
export function sumBytes(stats: BucketStat[]): string {
  return stats.reduce((n, s) => n + BigInt(s.bytes ?? '0'), 0n).toString();
}

/**
 * The id span of each named bucket (by name, `none` for no start time): the union of its source and
 * catalog spans (min of the mins, max of the maxes, compared as integers). A bucket on neither side is left out.
 */
export function bucketSpans(names: string[], source: BucketStat[], catalog: BucketStat[]): Record<string, KeySpan> {
  const spans: Record<string, KeySpan> = {};
  const wanted = new Set(names);
  for (const s of [...source, ...catalog]) {
    const b = bucketName(s.bucket);
    if (!wanted.has(b)) continue;
    const had = spans[b];
    spans[b] = had
      ? {
          min: BigInt(s.minKey) < BigInt(had.min) ? s.minKey : had.min,
          max: BigInt(s.maxKey) > BigInt(had.max) ? s.maxKey : had.max,
        }
      : { min: s.minKey, max: s.maxKey };
  }
  return spans;
}
