/** `catalog-rebuild events`: prints a catalog's event log from the catalog database. */
import type { EventRow } from '../../lib/catalog/event-reads';
import { listEvents } from '../../lib/catalog/event-reads';
import type { CommandContext } from './context';
import { withCatalogPool } from './context';

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
 * Prints the newest `limit` events of the catalog, oldest first.
 * @returns 0.
 * @throws the configuration or database error.
 */
export async function eventsCommand(ctx: CommandContext, o: EventsOptions): Promise<number> {
  return withCatalogPool(ctx, async (pool) => {
    for (const r of await listEvents(pool, o.catalog, o.limit)) ctx.out(formatEvent(r, o.json));
    return 0;
  });
}
