/**
 * Figures of a version's file records outside the page path: quarantined file records (the
 * reconciliation's threshold) and the shrink guard's per-bucket file counts.
 */
import type { Queryable } from '../db';

/** File records of the version quarantined in `reject` (those with a record key). */
export async function countFileRejects(db: Queryable, versionId: string): Promise<number> {
  const r = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM reject WHERE version_id = $1 AND record_key IS NOT NULL`,
    [versionId],
  );
  return Number(r.rows[0].n);
}
