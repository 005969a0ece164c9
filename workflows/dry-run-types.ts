/** Input and result of `DryRunCatalog` (`start --dry-run`); the client imports them through definitions.ts. */
import type { PlanRebuildInput } from './activity-types';
import type { Watermark } from './definitions';

/**
 * Input of `DryRunCatalog` (`start --dry-run`): the rebuild it plans, without making it: the plan's
 * input without the ids that key a stored plan.
 */
export type DryRunInput = Omit<PlanRebuildInput, 'workflowId' | 'firstRunId'>;

/**
 * What a rebuild would do now (`start --dry-run --json`; field names are an external interface):
 * `jobs.*` are exact counts; without a refresh `jobs.new` is every job.
 */
export interface DryRunResult {
  dryRun: true;
  catalog: string;
  source: string;
  /** A refresh, or a full rebuild (also when a refresh was asked for and cannot build on the active version). */
  refresh: boolean;
  /** A refresh asked for that would be a full rebuild: why. */
  fullRebuildBecause?: string;
  pages: number;
  /** Jobs the pages would read from the source. */
  rows: number;
  watermark: Watermark;
  jobs: { new: number; changed: number; gone: number };
  /** File records the pages would copy and those of the active version they would replace (with `--files`). */
  fileRecords: { copy: number; drop: number };
  /** Seconds the rebuild would take at the active version's copy rate (or 50,000 rows/s when none is known). */
  estimateSeconds: number;
  /**
   * A refresh: wall time (ms) of each step of its change detection: candidates and hashes, and at
   * the same time the source's cells streamed into the catalog (cells.source); then the comparison
   * of the cells (cells.compare) and of the differing cells' keys (keys).
   */
  detectionMs?: Record<string, number>;
  /** The active version now (null: none). */
  activeVersionId: string | null;
}
