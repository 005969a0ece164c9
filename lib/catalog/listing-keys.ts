/**
 * Job keys of listing sources (`listing_job_key`, migration 015): one key per source and listed id
 * (snapshot or archive id), given the first time a plan sees the id, so the same snapshot keeps its
 * `job_key`, and its files their ids, in every version.
 */
import type { Pool } from 'pg';
import { withTransaction } from '../db';

/** Keys (decimal text) of `ids`, in the order given; null where the source has none yet. */
async function knownKeys(pool: Pool, source: string, ids: string[]): Promise<(string | null)[]> {
  const { rows } = await pool.query<{ job_id: string; job_key: string }>(
    `SELECT job_id, job_key::text AS job_key FROM listing_job_key WHERE source_name = $1 AND job_id = ANY ($2::text[])`,
    [source, ids],
  );
  const byId = new Map(rows.map((r) => [r.job_id, r.job_key]));
  return ids.map((id) => byId.get(id) ?? null);
}

/**
 * The job keys of a listing's records, in listing order: the key each id already has for `source`;
 * ids it has not seen get the next keys above the source's highest, in listing order. With
 * `reserve` the new keys are recorded (one transaction, serialised per source by an advisory lock:
 * two plans at once never give one key twice); without it (a dry run) they are only computed, and
 * nothing is written.
 * @param ids the listed ids, unique (a listing is de-duplicated by id before it is staged).
 * @returns keys (decimal text, ≥ 1) aligned with `ids`.
 * @throws the catalog database's errors.
 */
export async function listingJobKeys(pool: Pool, source: string, ids: string[], reserve: boolean): Promise<string[]> {
  if (!ids.length) return [];
  const known = await knownKeys(pool, source, ids);
  const fresh = ids.filter((_, i) => known[i] === null);
  if (!fresh.length) return known as string[];
  if (!reserve) {
    const { rows } = await pool.query<{ top: string }>(
      `SELECT coalesce(max(job_key), 0)::text AS top FROM listing_job_key WHERE source_name = $1`,
      [source],
    );
    let next = BigInt(rows[0].top);
    return known.map((k) => k ?? (++next).toString());
  }
  await withTransaction(pool, async (c) => {
    await c.query(`SELECT pg_advisory_xact_lock(hashtextextended('listing_job_key:' || $1, 0))`, [source]);
    await c.query(
      `INSERT INTO listing_job_key (source_name, job_id, job_key)
       SELECT $1, f.id, t.top + f.n
       FROM unnest($2::text[]) WITH ORDINALITY AS f(id, n),
            (SELECT coalesce(max(job_key), 0) AS top FROM listing_job_key WHERE source_name = $1) t
       ON CONFLICT (source_name, job_id) DO NOTHING`,
      [source, fresh],
    );
  });
  const keys = await knownKeys(pool, source, ids);
  const missing = ids.find((_, i) => keys[i] === null);
  if (missing !== undefined) throw new Error(`no job key was recorded for ${source}'s listed id ${missing}`);
  return keys as string[];
}
