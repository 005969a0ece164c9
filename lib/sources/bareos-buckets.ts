/**
 * The source side of a reconciliation round over a Bareos/Bacula director catalog: per dated
 * bucket at or below the watermark, the jobs, their digest, bytes and job-id span.
 */
import { bareosFingerprintRow, digestOfSumSql, rowHashSql } from '../fingerprint';
import type { BucketDigestKind } from '../fingerprint';
import { BAREOS_FROM_JOB, bareosRowHash, jobIdLiteral } from './bareos-columns';
import { zoneOperand } from './zone-operand';
import type { SourceTextMode } from './bareos-columns';

/**
 * SQL (no parameters): one row per bucket of the jobs at or below `maxKey` (`bucket`, `count`,
 * `fingerprint`, `bytes`, `min_key`, `max_key`, all text), ordered by bucket, NULL first; naive
 * times read in `zone` (the source's IANA zone, converted as {@link zoneOperand} says).
 * With `digest` `row` the bucket's digest is the sum of the row hashes a page's COPY stores
 * (`bareosRowHash`, every column after the joins): the figure the pages stored per bucket
 * (`page_bucket`) is compared with it; else the digest of the fingerprint inputs (id, status, end
 * time, files, bytes) hashed with `digest`, as the catalog's scan computes it.
 * @throws Error when `maxKey` is not a job id.
 */
export function bareosBucketStatsQuery(
  mode: SourceTextMode,
  digest: BucketDigestKind,
  zone: string,
  maxKey: string,
): string {
  const z = zoneOperand(zone);
  const hash = digest === 'row' ? bareosRowHash(mode, z) : rowHashSql(bareosFingerprintRow(mode, z), digest);
  // Each row's hash is computed before the grouping (OFFSET 0 keeps the subquery apart), so the
  // rows grouped carry four narrow columns, and the groups (one per day) fit a hash aggregate: with
  // the hash inside the aggregate, PostgreSQL sorted every row with all its columns, on disk
  // (2.3–2.7 against 4.7 s for 10^6 jobs with the row hash, docs/performance.md).
  return `SELECT s.bucket::text AS bucket, count(*)::text AS count, ${digestOfSumSql('sum(s.h)')} AS fingerprint,
                coalesce(sum(s.bytes), 0)::text AS bytes, min(s.k)::text AS min_key, max(s.k)::text AS max_key
         FROM (SELECT j.starttime::date AS bucket, ${hash} AS h, j.jobbytes AS bytes, j.jobid AS k
               ${digest === 'row' ? BAREOS_FROM_JOB : 'FROM job j'} WHERE j.jobid <= ${jobIdLiteral(maxKey)} OFFSET 0) s
         GROUP BY s.bucket ORDER BY s.bucket NULLS FIRST`;
}
