/**
 * The page walk's statement on a Bareos/Bacula director catalog: fixed pages of existing job ids,
 * found along the primary key.
 */

/** Pages one statement of the walk finds at most (about 0.1–0.3 s of per-page steps). */
export const WALK_PAGES_PER_STATEMENT = 10_000;

/**
 * SQL: up to `$4` consecutive pages of `$3` jobs each, starting at the first job id at or above `$1`,
 * none above `$2`. Columns: `first_key`, `last_key` (text) and `n` (int). Only the last page may
 * have fewer than `$3` jobs, and only when no job above it remains at or below `$2`.
 *
 * A recursive walk over the primary key. Each step finds its page's last job id with an `OFFSET
 * $3 - 1` from the page's first one, and the next page's first job id with one probe above it. So
 * the statement reads each key once, in an index-only scan, and numbers no rows. The last page's
 * count and last key come from at most `$3` keys. `OFFSET 0` keeps each first-key probe a
 * subquery of its own: inlined, PostgreSQL ran it three times per page (in the filter, the select
 * list and the `OFFSET` scan).
 *
 * At 10^6 jobs in pages of 59,000 the walk took 35–46 ms, and in pages of 1,000 it took 54 ms.
 * Numbering every key with `row_number()` and grouping the keys into pages took 191–215 ms
 * (docs/performance.md). Each page costs about 14 µs, so the walk is slower only for pages of
 * fewer than about 30 jobs: 4.7 s against 0.6 s for 333,334 pages of 3. A statement therefore
 * walks at most {@link WALK_PAGES_PER_STATEMENT} pages.
 */
export const PAGE_WALK_SQL = `WITH RECURSIVE w(p, first_key, full_last) AS (
    SELECT 1, f.k,
           (SELECT jobid FROM job WHERE jobid >= f.k AND jobid <= $2::bigint ORDER BY jobid OFFSET $3::int - 1 LIMIT 1)
    FROM (SELECT (SELECT jobid FROM job WHERE jobid >= $1::bigint AND jobid <= $2::bigint ORDER BY jobid LIMIT 1) AS k OFFSET 0) f
    WHERE f.k IS NOT NULL
  UNION ALL
    SELECT w.p + 1, nx.k,
           (SELECT jobid FROM job WHERE jobid >= nx.k AND jobid <= $2::bigint ORDER BY jobid OFFSET $3::int - 1 LIMIT 1)
    FROM w CROSS JOIN LATERAL
         (SELECT (SELECT jobid FROM job WHERE jobid > w.full_last AND jobid <= $2::bigint ORDER BY jobid LIMIT 1) AS k OFFSET 0) nx
    WHERE w.full_last IS NOT NULL AND nx.k IS NOT NULL AND w.p < $4::int
)
SELECT w.first_key::text AS first_key,
       coalesce(w.full_last, (SELECT max(jobid) FROM job WHERE jobid >= w.first_key AND jobid <= $2::bigint))::text AS last_key,
       CASE WHEN w.full_last IS NOT NULL THEN $3::int
            ELSE (SELECT count(*) FROM job WHERE jobid >= w.first_key AND jobid <= $2::bigint)::int END AS n
FROM w ORDER BY w.p`;
