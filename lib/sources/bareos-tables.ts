/**
 * The tables a director catalog's reads need, and which of them a source database lacks or its
 * login cannot read: a source pointed at the wrong database, a catalog half restored, or a login
 * without SELECT is refused by name before any read.
 */
import type { Queryable } from '../db';
import { SourceDataInvalidError } from '../errors';

/** The tables every job read joins (`job j` LEFT JOINed to client, pool, fileset). */
export const DIRECTOR_JOB_TABLES = ['job', 'client', 'pool', 'fileset'] as const;

/** Of some tables: those that do not exist, and those that exist but the session may not SELECT from. */
export interface TableAccess {
  missing: string[];
  unreadable: string[];
}

/**
 * Which of `tables` (unqualified names, resolved on the session's `search_path` as the reads resolve
 * them) do not exist, and which the session's login may not read, each in the order given.
 * @throws the source's database errors.
 */
export async function tableAccess(db: Queryable, tables: readonly string[]): Promise<TableAccess> {
  const { rows } = await db.query<{ t: string; missing: boolean; denied: boolean }>(
    `SELECT t, to_regclass(t) IS NULL AS missing,
            coalesce(NOT has_table_privilege(to_regclass(t), 'SELECT'), false) AS denied
     FROM unnest($1::text[]) WITH ORDINALITY AS u(t, i) ORDER BY i`,
    [tables],
  );
  return {
    missing: rows.filter((r) => r.missing).map((r) => r.t),
    unreadable: rows.filter((r) => r.denied).map((r) => r.t),
  };
}

/** `a`, `a or b`, `a, b or c`. */
export function orList(names: readonly string[]): string {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`;
}

/**
 * Checks that a source's database holds a director catalog's job tables ({@link DIRECTOR_JOB_TABLES})
 * and that its login may read them, before the plan reads them: a `databaseUrl` naming another
 * database, or a login without SELECT, would otherwise fail on its first read with a bare
 * `relation "job" does not exist` or `permission denied for table job`.
 * @param database the source's database as errors name it (`source "<name>" database host:port/db
 *   (sources.<name>.databaseUrl)`, no credentials); `kind` its configured kind.
 * @throws SourceDataInvalidError (non-retryable) naming the tables; the database's errors.
 */
export async function checkDirectorTables(db: Queryable, database: string, kind: string): Promise<void> {
  const { missing, unreadable } = await tableAccess(db, DIRECTOR_JOB_TABLES);
  if (missing.length)
    throw new SourceDataInvalidError(
      `${database} has no ${orList(missing)} table: a ${kind} source's databaseUrl must name the director's catalog database (Bareos or Bacula on PostgreSQL)`,
    );
  if (unreadable.length)
    throw new SourceDataInvalidError(
      `${database}: its login may not read the ${orList(unreadable)} table (no SELECT privilege): grant it SELECT on the director's catalog tables`,
    );
}
