/**
 * The source side of a reconciliation round over a Bareos/Bacula director catalog: per dated
 * bucket at or below the watermark, the jobs, their digest, bytes and job-id span.
 */
import { bareosFingerprintRow, bucketDigestSql, digestOfSumSql } from '../fingerprint';
import type { BucketDigestKind } from '../fingerprint';
import { BAREOS_FROM_JOB, bareosRowHash } from './bareos-columns';
import type { SourceTextMode } from './bareos-columns';

/**
 * SQL (`$1` the source's IANA zone, `$2` the watermark job id): one row per bucket (`bucket`,
 * `count`, `fingerprint`, `bytes`, `min_key`, `max_key`, all text), ordered by bucket, NULL first.
 * With `digest` `row` the bucket's digest is the sum of the row hashes a page's COPY stores
 * (`bareosRowHash`, every column after the joins): the figure the pages stored per bucket
 * (`page_bucket`) is compared with it; else the digest of the fingerprint inputs (id, status, end
 * time, files, bytes) hashed with `digest`, as the catalog's scan computes it.
 */
export function bareosBucketStatsQuery(mode: SourceTextMode, digest: BucketDigestKind): string {
  const fingerprint =
    digest === 'row'
      ? digestOfSumSql(`sum(${bareosRowHash(mode, '$1::text')})`)
      : bucketDigestSql(bareosFingerprintRow(mode), digest);
  return `SELECT j.starttime::date::text AS bucket, count(*)::text AS count, ${fingerprint} AS fingerprint,
                coalesce(sum(j.jobbytes), 0)::text AS bytes, min(j.jobid)::text AS min_key, max(j.jobid)::text AS max_key
         ${digest === 'row' ? BAREOS_FROM_JOB : 'FROM job j'} WHERE j.jobid <= $2::bigint
         GROUP BY 1 ORDER BY 1 NULLS FIRST`;
}
