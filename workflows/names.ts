/**
 * Names shared by workflows, worker, client and tests: task queue default and workflow ids.
 * Pure: imported by workflow code.
 */

/** Default task queue (overridden by CATALOG_REBUILD_TASK_QUEUE). */
export const DEFAULT_TASK_QUEUE = 'catalog-rebuild';

/** Workflow id of a catalog's rebuild: `catalog-rebuild/<catalog>`. */
export function rebuildWorkflowId(catalog: string): string {
  return `catalog-rebuild/${catalog}`;
}

/** Child id of a bucket repair: `catalog-rebuild/<catalog>/bucket-<day>/r<round>` (`none` for jobs without a start time). */
export function repairWorkflowId(parentId: string, bucket: string | null, round: number): string {
  return `${parentId}/bucket-${bucket ?? 'none'}/r${round}`;
}

/** Child id of the publish step: `catalog-rebuild/<catalog>/publish`. */
export function publishWorkflowId(parentId: string): string {
  return `${parentId}/publish`;
}

/**
 * Workflow id of a dry run (`start --dry-run`): `catalog-rebuild/<catalog>/dry-run-<id>`, never the
 * rebuild's own id, so it neither starts nor attaches to the catalog's rebuild.
 */
export function dryRunWorkflowId(catalog: string, id: string): string {
  return `${rebuildWorkflowId(catalog)}/dry-run-${id}`;
}

/**
 * Id of a catalog's Temporal Schedule (`catalog-rebuild schedule`): `catalog-rebuild/<catalog>`, the
 * rebuild's own id (schedules and workflows have separate id spaces).
 */
export function scheduleId(catalog: string): string {
  return rebuildWorkflowId(catalog);
}

/**
 * Workflow id the schedule gives its `ScheduledRefresh` launcher: `catalog-rebuild/<catalog>/scheduled`;
 * Temporal appends the scheduled time to it (`…/scheduled-2026-12-03T02:00:00Z`). The launcher starts
 * or attaches to the rebuild under `catalog-rebuild/<catalog>`.
 */
export function scheduledRefreshWorkflowId(catalog: string): string {
  return `${rebuildWorkflowId(catalog)}/scheduled`;
}

/** The catalog of a schedule id `catalog-rebuild/<catalog>`; null for any other id. */
export function catalogOfScheduleId(id: string): string | null {
  const m = /^catalog-rebuild\/([^/]+)$/.exec(id);
  return m ? m[1] : null;
}

/** Catalog names: letters, digits, `_ . -`, at most 63 characters. */
export const CATALOG_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,63}$/;
