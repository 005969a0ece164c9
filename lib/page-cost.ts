/**
 * What a page may cost: the `statement_timeout` of its statements, sized from its planned rows.
 */

/** Floor of a page statement's timeout (ms). */
export const PAGE_STATEMENT_TIMEOUT_FLOOR_MS = 30_000;

/**
 * Allowance per planned row (ms): about 100 × what a row costs this machine's PostgreSQL on the
 * streaming page path (about 10 µs per row on each side), so only a stuck statement meets it.
 */
export const PAGE_STATEMENT_MS_PER_ROW = 1;

/** Rows assumed for a page planned without a row count (a plan made before migration 005): the largest page. */
const UNKNOWN_PAGE_ROWS = 100_000;

/**
 * The `statement_timeout` (ms) of a page's source read and catalog transaction: 30,000 ms plus
 * 1 ms per planned row (130,000 ms for a page of 100,000 rows). A statement that meets it fails
 * the attempt (retried); a frozen worker's transaction is ended by the next attempt sooner
 * (activities/copy-page.ts, zombies).
 * @param plannedRows rows the plan counted in the page, null when unknown.
 */
export function pageStatementTimeoutMs(plannedRows: number | null): number {
  return PAGE_STATEMENT_TIMEOUT_FLOOR_MS + PAGE_STATEMENT_MS_PER_ROW * (plannedRows ?? UNKNOWN_PAGE_ROWS);
}
