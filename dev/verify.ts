/** Catalog = source check: the same text form of every job on both sides, compared by md5. */
import type { Pool } from 'pg';
import { withLongSession } from '../lib/db';
import { BAREOS_JOB_SELECT } from '../lib/sources/bareos-columns';
import { utcText } from '../lib/text-form';
import { JOB_COLUMNS } from '../lib/sources/types';

/** The fields compared, in order: every catalog column of a Bareos/Bacula job but the paging key and the extras. */
const FIELDS = JOB_COLUMNS.filter((c) => c !== 'job_key' && c !== 'extra');
const TIMESTAMPS = new Set<string>(['sched_time', 'start_time', 'end_time', 'real_end_time']);

/** One line per job: each field quoted (NULL as \N), so a value can neither vanish nor shift into its neighbour. */
const line = (cols: string[]): string =>
  `concat_ws('|', ${cols.map((c) => `coalesce(quote_literal(${c}), '\\N')`).join(', ')})`;

/** Keys per chunk: a chunk's text stays far below PostgreSQL's 1 GB limit of one value (10^7 jobs are 3 GB). */
const CHUNK_KEYS = 250_000;

/**
 * SQL: the md5 of the md5s of the lines `l` of `rows` (columns `k`, the key, and `l`) in chunks of
 * {@link CHUNK_KEYS} key values, in key order, and the row count. Equal lines in equal key order
 * give equal results on both sides.
 */
const chunkedMd5 = (rows: string): string =>
  `SELECT md5(string_agg(h, '' ORDER BY g)) AS md5, coalesce(sum(n), 0)::int AS n FROM (
     SELECT k / ${CHUNK_KEYS} AS g, md5(string_agg(l, E'\\n' ORDER BY k)) AS h, count(*) AS n FROM (${rows}) r GROUP BY 1
   ) c`;

/** Outcome of {@link compareCatalogToSource}: md5 of each side's text ('-' when empty) and row counts. */
export interface CatalogSourceComparison {
  equal: boolean;
  catalog: string;
  source: string;
  catalogRows: number;
  sourceRows: number;
}

/**
 * Every field of a catalog's published version (`active_jobs`) against a Bareos/Bacula source, as
 * text in key order, by md5s (of chunks of 250,000 key values, then of those) computed in SQL on both sides. The source side is the product's own
 * column mapping (`BAREOS_JOB_SELECT`); `timezone` is the source's zone for its naive timestamps.
 * Used by the demo and the tests.
 */
export async function compareCatalogToSource(
  catalogPool: Pool,
  sourcePool: Pool,
  catalog: string,
  timezone: string,
): Promise<CatalogSourceComparison> {
  const catalogCols = FIELDS.map((f) => (TIMESTAMPS.has(f) ? utcText(f) : `${f}::text`));
  // One pass over every row of each side: on sessions without statement timeout (10^7 rows take minutes).
  const cat = await withLongSession(catalogPool, (db) =>
    db.query<{ md5: string | null; n: number }>(
      chunkedMd5(`SELECT job_id::bigint AS k, ${line(catalogCols)} AS l FROM active_jobs WHERE catalog_name = $1`),
      [catalog],
    ),
  );
  const src = await withLongSession(sourcePool, (db) =>
    db.query<{ md5: string | null; n: number }>(
      chunkedMd5(
        `SELECT s.job_key::bigint AS k, ${line(FIELDS.map((f) => `s.${f}`))} AS l FROM (${BAREOS_JOB_SELECT}) s`,
      ),
      [timezone],
    ),
  );
  const c = cat.rows[0];
  const s = src.rows[0];
  return {
    equal: c.n === s.n && c.md5 === s.md5,
    catalog: c.md5 ?? '-',
    source: s.md5 ?? '-',
    catalogRows: c.n,
    sourceRows: s.n,
  };
}
