/**
 * Inputs and results of the activities that `definitions.ts` does not already define (there:
 * CopyPageInput/Result, PlanResult, ReconcileSummary, RepairBucketInput/Result,
 * PublishCatalogResult). Pure types: ids, keys and counts only, never rows or credentials.
 */
import type { PublishCatalogResult } from './definitions';

/** Input of `planRebuild`. The plan is keyed by (workflowId, firstRunId): a retry returns the same version. */
export interface PlanRebuildInput {
  /** Catalog name. */
  catalog: string;
  /** Source name, defined in the worker's configuration file. */
  source: string;
  /** Jobs per page, 1..100,000 (`fixed`); absent: the plan sizes pages from measured cost (`auto`). */
  pageSize?: number;
  /** Pages in flight the rebuild starts with (fills the cores when sizing `auto`); default 4. */
  concurrency?: number;
  /**
   * Include each job's file records (`start --files`); default false. The plan stores it in
   * `version.files`, where the page, reconcile and repair activities read it; with it, pages are
   * sized from `Job.JobFiles`.
   */
  files?: boolean;
  /**
   * Build the next version from the active one plus what changed in the source since it
   * (`start --refresh`); when it cannot, the plan is a full rebuild's and says why.
   */
  refresh?: boolean;
  /** `start --verify full`: a refresh is planned as a full rebuild (it re-reads everything). */
  verify?: 'full';
  /** Workflow id of the rebuild (`catalog-rebuild/<catalog>`). */
  workflowId: string;
  /** Run id of the rebuild's first run (the same across continue-as-new). */
  firstRunId: string;
}

/** Input of `sealVersion`: the version whose copy phase ended. */
export interface SealVersionInput {
  /** Version id, decimal text. */
  versionId: string;
}

/** Input of `indexVersion`: the sealed version whose reader index and statistics are built. */
export interface IndexVersionInput {
  /** Version id, decimal text. */
  versionId: string;
}

/** Result of `sealVersion`. */
export interface SealVersionResult {
  /**
   * Planned pages without a committed ledger row (at most 1,000, ascending): the version was not
   * sealed; re-run them and seal again. Empty when the version is sealed (`verifying`).
   */
  missingPages: number[];
}

/** Input of `reconcile`: one round of comparing a version with its source at the watermark. */
export interface ReconcileInput {
  catalog: string;
  source: string;
  /** Version id, decimal text. */
  versionId: string;
  /** Round number, from 1 (the report of each round is kept). */
  round: number;
  /** Records compared field by field; default 1,000. Set by tests only; workflows leave it out. */
  sampleSize?: number;
}

/** Input of `publishVersion`: the fenced flip of the catalog's active pointer. */
export interface PublishVersionInput {
  catalog: string;
  /** Version id, decimal text. */
  versionId: string;
  /** Publish even when buckets shrank beyond the guard (`start --allow-shrink`). */
  allowShrink: boolean;
  /** Share (0..1) of a bucket's jobs it may lose before the shrink guard refuses; default 0.1. Not set by workflows. */
  shrinkShare?: number;
  /** Jobs a bucket must lose at least before the shrink guard refuses; default 5. Not set by workflows. */
  shrinkMinJobs?: number;
}

/** Result of `publishVersion`. */
export interface PublishVersionResult {
  /** The version that was active before (now `retired`), decimal text; null for a first publish. */
  previousVersionId: string | null;
}

/** Input of `retireVersions`: retention after a publish. */
export interface RetireVersionsInput {
  catalog: string;
  /** Retired versions kept with their rows (the most recently published ones). */
  retention: number;
}

/** Result of `retireVersions`: ids of the versions whose rows were dropped now. */
export type RetireVersionsResult = PublishCatalogResult['retired'];

/** Input of `endVersion`: an unpublished version ends as `abandoned` (cancelled) or `failed`. */
export interface EndVersionInput {
  catalog: string;
  /** Version id, decimal text. */
  versionId?: string;
  /**
   * Without `versionId`: the version planned by this rebuild (workflow id, first run id), if its
   * plan committed one (a plan cancelled or failed in flight); none, nothing is changed.
   */
  plannedBy?: { workflowId: string; firstRunId: string };
  status: 'abandoned' | 'failed';
  /** Why, for the version row and the event. */
  reason: string;
}

/** Input of `cancelRun`: the workflow run to cancel through Temporal. */
export interface CancelRunInput {
  workflowId: string;
  runId: string;
}

/** Input of `recordEvent`: one entry of the catalog's event log (the worker adds its build id). */
export interface RecordEventInput {
  catalog: string;
  /** Version id, decimal text; null for catalog-wide events. */
  versionId: string | null;
  /** Stable kind (e.g. `copied`, the end of the copy phase). */
  kind: string;
  /** One line for humans. */
  message: string;
  /** Machine-readable details (stored as jsonb). */
  details?: Record<string, unknown>;
}
