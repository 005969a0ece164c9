/** `catalog-rebuild events`: prints a catalog's event log from the catalog database. */
import type { EventRow } from '../../lib/catalog/event-reads';
import { catalogHasVersion, listEvents, renumberedJobsOf, renumberedSentence } from '../../lib/catalog/event-reads';
import type { CommandContext } from './context';
import { ExitCode, withCatalogPool } from './context';

/** Options of `events`. */
export interface EventsOptions {
  catalog: string;
  /** Newest N events. */
  limit: number;
  /** One JSON object per line instead of text. */
  json: boolean;
}

/**
 * One event as `events` prints it: the row as JSON, or
 * `<ISO time>  v<version or ->  <kind padded to 12> <message>`.
 */
export function formatEvent(r: EventRow, json: boolean): string {
  return json
    ? JSON.stringify(r)
    : `${r.created_at.toISOString()}  v${r.version_id ?? '-'}  ${r.kind.padEnd(12)} ${r.message}`;
}

/**
 * The lines `events` prints for one event: {@link formatEvent}'s line; in text, a `published` event
 * whose details record renumbered job ids is followed by a second line with the same prefix and
 * `N jobs renumbered: …` ({@link renumberedSentence}). JSON lines print the row as is (its
 * `details.renumberedJobs` carry the same facts).
 */
export function eventLines(r: EventRow, json: boolean): string[] {
  const lines = [formatEvent(r, json)];
  const renumbered = !json && r.kind === 'published' ? renumberedJobsOf(r.details) : null;
  if (renumbered) lines.push(formatEvent({ ...r, message: renumberedSentence(renumbered) }, false));
  return lines;
}

/**
 * Prints the newest `limit` events of the catalog, oldest first.
 * @returns 0.
 * @throws ExitCode 1 when the catalog has neither an event nor a version in this catalog database
 *   (a misspelt name, another catalog database, a rebuild that failed before its plan); the
 *   configuration or database error as it is.
 */
export async function eventsCommand(ctx: CommandContext, o: EventsOptions): Promise<number> {
  return withCatalogPool(ctx, async (pool) => {
    const events = await listEvents(pool, o.catalog, o.limit);
    if (!events.length && !(await catalogHasVersion(pool, o.catalog)))
      throw new ExitCode(
        1,
        `catalog ${o.catalog} has no events and no version in this catalog database: it was never rebuilt here ` +
          `(a rebuild that fails before its plan records none; catalog-rebuild status --catalog ${o.catalog} asks Temporal)`,
      );
    for (const r of events) for (const l of eventLines(r, o.json)) ctx.out(l);
    return 0;
  });
}
