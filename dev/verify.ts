/** Catalog = source check: the same text form of every job on both sides, compared by md5. */
import { Pool } from 'pg';

/**
 * Every field of a catalog's published version (`active_jobs`) against a Bareos/Bacula source, as
 * text in key order, by md5 computed in SQL on both sides. `timezone` is the source's zone for its
 * naive timestamps. Used by the demo and the tests.
 */
export async function compareCatalogToSource(catalogPool: Pool, sourcePool: Pool, catalog: string, timezone: string): Promise<{ equal: boolean; catalog: string; source: string; catalogRows: number; sourceRows: number }> {
  const fmt = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;
  // Each field quoted (NULL as \N): a value can neither vanish nor shift into its neighbour.
  const row = (cols: string[]) => `concat_ws('|', ${cols.map((c) => `coalesce(quote_literal(${c}), '\\N')`).join(', ')})`;
  const utc = (col: string) => `to_char(${col} AT TIME ZONE 'UTC', ${fmt})`;
  const local = (col: string) => `to_char((${col} AT TIME ZONE $1) AT TIME ZONE 'UTC', ${fmt})`;
  const cat = await catalogPool.query<{ md5: string | null; n: number }>(
    `SELECT md5(string_agg(${row([
              'job_id', 'job', 'job_name', 'client', 'type', 'level', 'status',
              utc('sched_time'), utc('start_time'), utc('end_time'), utc('real_end_time'),
              'files::text', 'bytes::text', 'read_bytes::text', 'job_errors::text', 'pool', 'fileset', 'prior_job_id',
              'job_tdate::text', 'vol_session_id::text', 'vol_session_time::text', 'comment', 'bucket::text',
            ])}, E'\\n' ORDER BY job_id::bigint)) AS md5,
            count(*)::int AS n
     FROM active_jobs WHERE catalog_name = $1`,
    [catalog],
  );
  const src = await sourcePool.query<{ md5: string | null; n: number }>(
    `SELECT md5(string_agg(${row([
              'j.jobid::text', 'j.job', 'j.name', 'c.name', "NULLIF(j.type::text, '')", "NULLIF(j.level::text, '')", "NULLIF(j.jobstatus::text, '')",
              local('j.schedtime'), local('j.starttime'), local('j.endtime'), local('j.realendtime'),
              'j.jobfiles::text', 'j.jobbytes::text', 'j.readbytes::text', 'j.joberrors::text', 'p.name', 'f.fileset', 'NULLIF(j.priorjobid, 0)::text',
              'j.jobtdate::text', 'j.volsessionid::text', 'j.volsessiontime::text', 'j.comment', 'j.starttime::date::text',
            ])}, E'\\n' ORDER BY j.jobid)) AS md5,
            count(*)::int AS n
     FROM job j LEFT JOIN client c ON c.clientid = j.clientid LEFT JOIN pool p ON p.poolid = j.poolid
     LEFT JOIN fileset f ON f.filesetid = j.filesetid`,
    [timezone],
  );
  const c = cat.rows[0];
  const s = src.rows[0];
  return { equal: c.n === s.n && c.md5 === s.md5, catalog: c.md5 ?? '-', source: s.md5 ?? '-', catalogRows: c.n, sourceRows: s.n };
}
