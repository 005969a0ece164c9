/**
 * `start --dry-run`: what a rebuild (or with `--refresh`, a refresh) of the catalog would do now,
 * planned on a worker by the `DryRunCatalog` workflow (workflow id
 * `catalog-rebuild/<catalog>/dry-run-<id>`: it never starts or attaches to the catalog's rebuild, and
 * it runs while one does). Nothing changes: no version, no staged listing, no event. Exit 0.
 */
import { randomUUID } from 'node:crypto';
import type { DryRunInput, DryRunResult } from '../../workflows/definitions';
import { dryRunWorkflowId } from '../../workflows/names';
import type { TemporalSession } from '../index';

/** How long the dry run may take before the CLI gives up waiting (ms); the workflow ends by itself. */
export const DRY_RUN_TIMEOUT_MS = 15 * 60_000;

/** Runs `DryRunCatalog` on the task queue of `s` and returns its plan. */
export async function runDryRun(s: TemporalSession, input: DryRunInput): Promise<DryRunResult> {
  return (await s.client.workflow.execute('DryRunCatalog', {
    taskQueue: s.taskQueue,
    workflowId: dryRunWorkflowId(input.catalog, randomUUID().slice(0, 8)),
    args: [input],
    workflowExecutionTimeout: DRY_RUN_TIMEOUT_MS,
  })) as DryRunResult;
}

/** `1,234` */
const n = (x: number) => x.toLocaleString('en-US');

/** The dry run's plan as lines for people. */
export function formatDryRun(r: DryRunResult): string[] {
  const c = r.jobs;
  const what = r.refresh
    ? `a refresh of version ${r.activeVersionId}: ${n(c.new)} new, ${n(c.changed)} changed, ${n(c.gone)} gone jobs; ${n(r.rows)} jobs read from the source in ${n(r.pages)} pages`
    : `a full rebuild${r.fullRebuildBecause ? ` (a refresh would be one: ${r.fullRebuildBecause})` : ''}: ${n(r.rows)} jobs in ${n(r.pages)} pages`;
  const lines = [`dry run of catalog ${r.catalog} from source ${r.source}, nothing changed:`, `  ${what}`];
  if (r.fileRecords.copy || r.fileRecords.drop)
    lines.push(
      `  file records: ${n(r.fileRecords.copy)} to copy, ${n(r.fileRecords.drop)} of the active version replaced`,
    );
  lines.push(
    `  watermark job ${r.watermark.jobKey ?? 'none'} at ${r.watermark.time}; about ${n(r.estimateSeconds)} s to copy; active version ${r.activeVersionId ?? 'none'}`,
  );
  return lines;
}
