/**
 * The tables a director catalog's reads need, and which of them a source database lacks: a source
 * pointed at the wrong database, or a catalog half restored, is refused by name before any read.
 */
import type { Queryable } from '../db';
import { SourceDataInvalidError } from '../errors';

/** The tables every job read joins (`job j` LEFT JOINed to client, pool, fileset). */
export const DIRECTOR_JOB_TABLES = ['job', 'client', 'pool', 'fileset'] as const;

/**
 * Of `tables` (unqualified names, resolved on the session's `search_path` as the reads resolve them),
 * those that do not exist, in the order given.
 * @throws the source's database errors.
 */
export async function missingTables(db: Queryable, tables: readonly string[]): Promise<string[]> {
  const { rows } = await db.query<{ t: string }>(
    `SELECT t FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) WHERE to_regclass(t) IS NULL ORDER BY i`,
    [tables],
  );
  return rows.map((r) => r.t);
}

/**
 * Checks that a source's database holds a director catalog's job tables ({@link DIRECTOR_JOB_TABLES})
 * before the plan reads them: a `databaseUrl` naming another database would otherwise fail on its
 * first read with a bare `relation "job" does not exist`.
 * @param source the source's name and `kind` its configured kind, for the message.
 * @throws SourceDataInvalidError (non-retryable) naming the tables missing; the database's errors.
 */
export async function checkDirectorTables(db: Queryable, source: string, kind: string): Promise<void> {
  const missing = await missingTables(db, DIRECTOR_JOB_TABLES);
  if (missing.length)
    throw new SourceDataInvalidError(
      `source ${source} (${kind}) has no ${missing.join(', ')} table in its database: its databaseUrl must name the director's catalog database (Bareos or Bacula on PostgreSQL)`,
    );
}
