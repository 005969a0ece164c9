/**
 * Comparisons of the reader views of two catalogs in one catalog database, for tests that check a
 * refresh against a full rebuild of the same source.
 */
import type { Pool } from 'pg';
import format from 'pg-format';

/** `active_jobs` columns compared (every column but the catalog and version). */
export const VIEW_JOB_COLUMNS = `job_id, job, job_name, client, type, level, status, sched_time, start_time, end_time, files, bytes,
  pool, fileset, real_end_time, read_bytes, job_errors, prior_job_id, job_tdate, vol_session_id, vol_session_time,
  comment, bucket, extra`;
/** `active_files` columns compared (every column but the catalog and version). */
export const VIEW_FILE_COLUMNS = `job_id, file_id, path, name, path_bytes, name_bytes, file_index, delta_seq, deleted, size, mode,
  uid, gid, mtime, md5, lstat`;

/**
 * Rows of one reader view for catalog `a` that catalog `b`'s view does not have (`onlyA`), the other
 * way (`onlyB`), both as multisets (EXCEPT ALL), and `a`'s rows.
 */
export async function viewDifference(
  pool: Pool,
  view: 'active_jobs' | 'active_files',
  a: string,
  b: string,
): Promise<{ onlyA: number; onlyB: number; rows: number }> {
  const cols = view === 'active_jobs' ? VIEW_JOB_COLUMNS : VIEW_FILE_COLUMNS;
  const q = (x: string, y: string) =>
    format(
      `SELECT count(*)::int AS n FROM (SELECT ${cols} FROM %I WHERE catalog_name = %L EXCEPT ALL SELECT ${cols} FROM %I WHERE catalog_name = %L) d`,
      view,
      x,
      view,
      y,
    );
  const [onlyA, onlyB, count] = await Promise.all([
    pool.query<{ n: number }>(q(a, b)),
    pool.query<{ n: number }>(q(b, a)),
    pool.query<{ n: number }>(format('SELECT count(*)::int AS n FROM %I WHERE catalog_name = %L', view, a)),
  ]);
  return { onlyA: onlyA.rows[0].n, onlyB: onlyB.rows[0].n, rows: count.rows[0].n };
}
