/**
 * Messages, inputs and results of the catalog-rebuild workflows.
 * Imported by workflows, the client library, the CLI and tests; pure (no I/O).
 * 64-bit values travel as decimal strings.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';

/** Phases of a rebuild, in order (`failed` and `cancelled` end early). */
export type RebuildPhase =
  'planning' | 'copying' | 'reconciling' | 'repairing' | 'publishing' | 'done' | 'failed' | 'cancelled';

/** The watermark of a rebuild: highest job key and source time when the plan was made. */
export interface Watermark {
  /** Highest paging key (Bareos jobid) at plan, decimal text; null for an empty source. */
  jobKey: string | null;
  /** Source clock at plan (ISO 8601 UTC). */
  time: string;
}

/**
 * How a rebuild's pages are sized: `auto` from measured cost at plan time (no `--page-size`; rule
 * in `lib/page-sizing.ts`), `fixed` by `--page-size`.
 */
export type PageSizing = 'auto' | 'fixed';

/** Input of `RebuildCatalog`. Names a source; never carries credentials. */
export interface RebuildCatalogInput {
  /** Catalog name (letters, digits, `_ . -`). */
  catalog: string;
  /** Source name, defined in the worker's configuration file. */
  source: string;
  /** Jobs per page, 1..100,000 (`fixed`); absent: sized by the plan from measured cost (`auto`). */
  pageSize?: number;
  /** Pages in flight, 1..64; default 4. */
  concurrency?: number;
  /** Publish even when a bucket shrank beyond the guard. */
  allowShrink?: boolean;
  /**
   * Build the next version from the active one plus what changed in the source since it
   * (`start --refresh`); the plan runs a full rebuild instead when it cannot, and says why.
   */
  refresh?: boolean;
  /**
   * `start --verify full`: an independent check that re-reads every job (and file record) of the
   * source. With `refresh`, the refresh is planned as a full rebuild, whose reconciliation compares
   * both sides row by row per bucket; it catches what change detection cannot see.
   */
  verify?: 'full';
  /**
   * Rebuild each job's file records too (`start --files`); default false. Carried across
   * continue-as-new with the rest of the input; the plan records it in `version.files`.
   */
  files?: boolean;
  /** Heartbeat timeout of page activities (ms); default 15,000. */
  heartbeatTimeoutMs?: number;
  /** Pages a run may schedule before it continues as new; default 1,000. */
  maxPagesPerRun?: number;
  /** Retired versions kept with their rows after a publish; default 1. */
  retention?: number;
  /** Reconcile → repair rounds before the rebuild fails; default 2. */
  maxRepairRounds?: number;
  /** Pause between page starts (ms); default 0. */
  pauseBetweenPagesMs?: number;
  /** State carried across continue-as-new; absent on the first run. */
  carried?: CarriedState;
}

/** State a run hands to the next one at continue-as-new. */
export interface CarriedState {
  versionId: string;
  pagesTotal: number;
  sourceRows: string;
  watermark: Watermark;
  /** Rows per page the plan chose; 0 before the plan. */
  pageSize: number;
  /** How the plan sized its pages (before the plan: as requested). */
  pageSizing: PageSizing;
  /** Planned rows of the largest page (a page's start-to-close follows it); 0 before the plan. */
  maxPageRows: number;
  /** Pages 1..checkpoint are committed. */
  checkpoint: number;
  rowsUpserted: number;
  rejects: number;
  retries: number;
  paused: boolean;
  /** Workflow time (ISO 8601) of the last pause or resume; absent before the first. */
  pauseChangedAt?: string;
  /** A refresh: what its plan found. */
  refresh?: RefreshPlan;
  /** A refresh planned as a full rebuild: why. */
  fullRebuildBecause?: string;
  concurrency: number;
  pauseBetweenPagesMs: number;
  /** Recent page durations (ms), for sizing the page timeout. */
  pageDurationsMs: number[];
  /** Workflow time (ms since epoch) when the first run started. */
  startedAtMs: number;
  lastEvent: string;
  /** Runs before this one. */
  runs: number;
  /**
   * Pages whose activity an operator paused (`temporal activity pause`), as the activity reported it
   * (`pageActivityPaused`); no new page starts while one of them is in flight. Absent until a page
   * was paused; empty at continue-as-new, which waits for the window to drain.
   */
  operatorPausedPages?: number[];
}

/** The `progress` query's answer: one flat object (field names are an external interface). */
export interface RebuildProgress {
  phase: RebuildPhase;
  paused: boolean;
  /** Paused or cancelling, with pages still in flight. */
  draining: boolean;
  pagesTotal: number;
  pagesDone: number;
  /** How the pages are sized: `auto` (by the plan from measured cost) or `fixed` (`--page-size`). */
  pageSizing: PageSizing;
  /** Rows per page the plan chose; null before the plan. */
  pageSize: number | null;
  /** Highest n such that pages 1..n are committed. */
  checkpoint: number;
  rowsUpserted: number;
  rejects: number;
  /** Page attempts beyond the first (worker deaths, timeouts, transient errors). */
  retries: number;
  /** Rows committed per second over the last minute; 0 while paused with no page in flight. */
  rowsPerSecond: number;
  /** Seconds left for the copy phase at the current rate; null when unknown (or paused). */
  etaSeconds: number | null;
  /** Catalog version being built (decimal text); null before the plan. */
  versionId: string | null;
  watermark: Watermark | null;
  lastEvent: string;
  catalog: string;
  source: string;
  /** The rebuild includes file records (`start --files`). */
  files: boolean;
  concurrency: number;
  /** Pages in flight now. */
  inFlight: number;
  /** Runs of this rebuild so far (continue-as-new). */
  run: number;
  /** Last reconciliation summary, when reconciled. */
  reconciliation: ReconcileSummary | null;
  /**
   * Pages whose activity an operator paused with `temporal activity pause` (in page order); while
   * any is listed no new page starts. Empty when none is paused.
   */
  operatorPausedPages: number[];
}

/** Input of `copyPage`: ids only, never rows. */
export interface CopyPageInput {
  catalog: string;
  source: string;
  versionId: string;
  pageNo: number;
}

/** Result of `copyPage`: what the committed page holds (from the ledger when already committed). */
export interface CopyPageResult {
  pageNo: number;
  /** Rows in the page's key range in the catalog after the commit. */
  rows: number;
  /** Quarantined source records of the page. */
  rejects: number;
  /** Jobs of the page with a type, level or status code the product does not know (kept verbatim). */
  warnings?: number;
  /** Rows of the page dropped because a later row had the same job id (the last one read wins). */
  duplicates?: number;
  /** md5 of the page's catalog rows in key order. */
  /** File records written by the page (rebuilds with `--files`). */
  files?: number;
  /** File records quarantined by the page. */
  fileRejects?: number;
  /** Jobs of the page gone from the source after the plan, left out of the version (absent when none). */
  gone?: number;
  checksum: string;
  /** Temporal attempt number that committed the page (from the ledger). */
  attempt: number;
  /** Temporal attempt number of the activity that returned this result. */
  activityAttempt: number;
  /** True when this attempt found the page already committed and wrote nothing. */
  alreadyCommitted: boolean;
  /** Time the attempt took (ms). */
  durationMs: number;
  /** The previous attempt's failure, when attempt > 1. */
  previousFailure: string | null;
}

/** Result of `planRebuild`. */
export interface PlanResult {
  versionId: string;
  pagesTotal: number;
  /** Rows per page the plan chose. */
  pageSize: number;
  /** How it was chosen. */
  pageSizing: PageSizing;
  /** Source rows at or below the watermark (decimal text). */
  sourceRows: string;
  watermark: Watermark;
  /** IANA zone of the source's naive times. */
  timezone: string;
  /**
   * Planned rows of the largest page (with `--files`, a job weighs 1 + its JobFiles); absent when
   * the stored plan has no row counts.
   */
  maxPageRows?: number;
  /** A refresh: the version it builds on and the jobs it writes. */
  refresh?: RefreshPlan;
  /** A refresh asked for and planned as a full rebuild: why (one sentence). */
  fullRebuildBecause?: string;
  /** A refresh that found nothing changed: no version was made (`versionId` is empty). */
  upToDate?: boolean;
}

/** What a refresh's plan found (`start --refresh`). */
export interface RefreshPlan {
  /** The active version it builds on. */
  baseVersionId: string;
  /** Jobs new in the source (copied). */
  newJobs: number;
  /** Jobs whose row changed (replaced). */
  changedJobs: number;
  /** Jobs gone from the source (left out). */
  deletedJobs: number;
}

/** Reconciliation of one round, as reported to the workflow. */
export interface ReconcileSummary {
  round: number;
  ok: boolean;
  buckets: number;
  sourceRows: number;
  catalogRows: number;
  rejects: number;
  /** Buckets whose count or fingerprint differ (`none` = jobs without a start time). */
  mismatched: string[];
  /** Source jobs above the watermark: the follow-up delta. */
  delta: number;
  /**
   * Jobs at or below the watermark gone from the source after the plan (a snapshot forgotten before
   * its page listed it): left out of the version, part of the follow-up delta. Absent in a stored
   * report without the count.
   */
  gone?: number;
  /** Job names (`job`) that occur more than once. */
  duplicateJobNames: number;
  /** Sampled records that differ field by field. */
  sampleMismatches: number;
  sampled: number;
  /** Rebuilds with `--files`: file records in the source, written to the catalog, and quarantined. */
  files?: { source: number; catalog: number; rejects: number };
}

/** Input of `RepairBucket`. */
export interface RepairBucketInput {
  catalog: string;
  source: string;
  versionId: string;
  /** `YYYY-MM-DD`, or null for jobs without a start time. */
  bucket: string | null;
  /** The rebuild's page heartbeat timeout (ms); the repair's heartbeat timeout is twice it (30 s when absent). */
  heartbeatTimeoutMs?: number;
}

/** Result of `RepairBucket`. */
export interface RepairBucketResult {
  bucket: string | null;
  upserted: number;
  deleted: number;
  ok: boolean;
}

/** Input of `PublishCatalog`. */
export interface PublishCatalogInput {
  catalog: string;
  versionId: string;
  allowShrink: boolean;
  retention: number;
  /** The rebuild's page heartbeat timeout (ms); publish and retirement heartbeat timeout is twice it (30 s when absent). */
  heartbeatTimeoutMs?: number;
}

/** Result of `PublishCatalog`. */
export interface PublishCatalogResult {
  versionId: string;
  previousVersionId: string | null;
  retired: string[];
  /**
   * Why retiring old versions failed after the flip (their retries exhausted), when it did: the
   * version is published all the same; the next publish retires what this one could not.
   */
  retireFailure?: string;
}

/** Result of `RebuildCatalog`. */
export interface RebuildCatalogResult {
  catalog: string;
  versionId: string;
  published: boolean;
  /** True when the rebuild was cancelled by the `cancel` signal (version abandoned). */
  cancelled: boolean;
  pagesTotal: number;
  /** Pages committed (all of them when published; fewer when cancelled). */
  pagesDone: number;
  rowsUpserted: number;
  rejects: number;
  retries: number;
  reconciliation: ReconcileSummary | null;
  previousVersionId: string | null;
  /** Workflow time from the first run's start to the end (ms). */
  durationMs: number;
  runs: number;
  /** A refresh that found nothing changed: no version was made, the active one stays (a success). */
  upToDate?: boolean;
  /** A refresh: the version it built on and the jobs it wrote. */
  refresh?: RefreshPlan;
  /** A refresh planned as a full rebuild: why. */
  fullRebuildBecause?: string;
}

/**
 * The rebuild's memo (Temporal's description shows it without asking a worker): the pause state,
 * updated by the `pause` and `resume` handlers and at the start of every run.
 */
export interface RebuildMemo {
  /** The `pause` signal holds the page window. */
  paused: boolean;
  /** Workflow time (ISO 8601) the pause state last changed; null when it never changed. */
  pauseChangedAt: string | null;
  /**
   * The result of a run that ended cancelled (Temporal status CANCELLED keeps no result): `cancelled`
   * true, pages done, rows, the abandoned version. Absent on every other run.
   */
  outcome?: RebuildCatalogResult;
}

/** Arguments of the `setThrottle` update. */
export interface ThrottleSettings {
  /** Pages in flight, 1..64. */
  concurrency?: number;
  /** Pause between page starts (ms), 0..3,600,000. */
  pauseBetweenPagesMs?: number;
}

/** What a page activity reports of itself with `pageActivityPaused` / `pageActivityResumed`. */
export interface PageActivityReport {
  /** Page number, from 1. */
  pageNo: number;
  /** Temporal attempt number of the reporting activity. */
  attempt: number;
  /** Identity (`<pid>@<host>`) of the worker that runs the attempt. */
  workerIdentity: string;
}

/** Stop scheduling pages; pages in flight finish. */
export const pauseSignal = defineSignal('pause');
/** Continue scheduling pages from the checkpoint. */
export const resumeSignal = defineSignal('resume');
/** End the rebuild: pages in flight finish or are cancelled, the version becomes `abandoned`. */
export const cancelSignal = defineSignal<[{ reason?: string }?]>('cancel');
/** Current progress (see RebuildProgress). */
export const progressQuery = defineQuery<RebuildProgress>('progress');
/** Change the page window and the pause between pages while running; returns the settings in force. */
export const setThrottleUpdate = defineUpdate<Required<ThrottleSettings>, [ThrottleSettings]>('setThrottle');

/**
 * Sent by a page activity when Temporal told it that an operator paused it (`temporal activity
 * pause`): the rebuild starts no new page until the page runs again. Not for operators.
 */
export const pageActivityPausedSignal = defineSignal<[PageActivityReport]>('pageActivityPaused');
/**
 * Sent by the first attempt of a page that starts after an operator paused it (`temporal activity
 * unpause` or `reset`): the rebuild starts pages again once no page is paused. Not for operators.
 */
export const pageActivityResumedSignal = defineSignal<[PageActivityReport]>('pageActivityResumed');

/** Limits shared by the CLI and the workflow's validators (defined in `policies.ts`). */
export { LIMITS } from './policies';

export type { DryRunInput, DryRunResult } from './dry-run-types';
