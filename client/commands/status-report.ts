/**
 * What `status` reports beyond the `progress` query: a closed rebuild from Temporal's result or
 * failure and the catalog database (no query sent), the page activities an operator paused
 * (`temporal activity pause`) and a rebuild paused by Temporal's workflow pause
 * (`temporal workflow pause`), both read from the workflow's description.
 */
import type { WorkflowExecutionDescription } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import type { RebuildCatalogResult, ReconcileSummary } from '../index';
import type { RebuildRunKey } from '../../lib/catalog/status';
import type { RenumberedJobsReport } from '../../lib/catalog/event-reads';
import { readRenumberedJobs } from '../../lib/catalog/event-reads';
import type { DatabaseStatus } from '../status';
import { catalogStatusFromDatabase } from '../status';
import type { CommandContext } from './context';
import { withCatalogPool } from './context';
import type { RebuildOutcome } from './outcome';
import { formatReconciliation, renumberedSentence } from './outcome';
import { pendingActivityPage } from '../pending-activity';

type DescribeResponse = temporal.api.workflowservice.v1.IDescribeWorkflowExecutionResponse;
type Timestamp = { seconds?: unknown; nanos?: number | null } | null | undefined;

/** A protobuf timestamp as ISO 8601 UTC; null when absent. */
function isoTime(ts: Timestamp): string | null {
  if (!ts || ts.seconds === null || ts.seconds === undefined) return null;
  return new Date(Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6)).toISOString();
}

/** A pending activity of the rebuild that an operator (or a pause rule) paused. */
export interface OperatorPausedActivity {
  activityId: string;
  /** Activity type, e.g. `copyPage`. */
  activityType: string;
  /** The page it copies: from the id `page-<n>`, else from its heartbeat details; null when unknown. */
  pageNo: number | null;
  /** Who paused it (e.g. `temporal-cli:ops@host`); null when not recorded. */
  identity: string | null;
  reason: string | null;
  /** When it was paused, ISO 8601 UTC; null when not recorded. */
  since: string | null;
}

/** The rebuild's pending activities whose `paused` flag is set (`temporal activity pause`), from `describe()`. */
export function operatorPausedActivities(raw: DescribeResponse): OperatorPausedActivity[] {
  return (raw.pendingActivities ?? [])
    .filter((a) => a.paused)
    .map((a) => {
      const by = a.pauseInfo?.manual ?? a.pauseInfo?.rule ?? null;
      return {
        activityId: a.activityId ?? '',
        activityType: a.activityType?.name ?? '',
        pageNo: pendingActivityPage(a),
        identity: by?.identity || null,
        reason: by?.reason || null,
        since: isoTime(a.pauseInfo?.pauseTime),
      };
    });
}

/**
 * The lines naming what an operator paused: one per page (`pages`: from the `progress` query's
 * `operatorPausedPages` and the paused activities), then paused activities of no known page.
 */
export function operatorPauseLines(
  workflowId: string,
  pages: number[],
  activities: OperatorPausedActivity[],
): string[] {
  const detail = (a: OperatorPausedActivity | undefined) =>
    `temporal activity pause${a?.identity ? ` by ${a.identity}` : ''}${a?.since ? ` since ${a.since}` : ''}${a?.reason ? `: ${a.reason}` : ''}`;
  const unpause = (a: OperatorPausedActivity | undefined) =>
    a ? `; resume it with: temporal activity unpause --workflow-id ${workflowId} --activity-id ${a.activityId}` : '';
  const lines = pages.map((n) => {
    const a = activities.find((x) => x.pageNo === n);
    return `page ${n} is paused by an operator (${detail(a)})${unpause(a)}`;
  });
  for (const a of activities.filter((x) => x.pageNo === null))
    lines.push(`activity ${a.activityType} ${a.activityId} is paused by an operator (${detail(a)})${unpause(a)}`);
  return lines;
}

/** A rebuild paused by Temporal's own workflow pause (`temporal workflow pause`). */
export interface WorkflowPause {
  identity: string | null;
  reason: string | null;
  /** ISO 8601 UTC; null when not recorded. */
  since: string | null;
}

/** The workflow pause from `describe()` (`workflowExtendedInfo.pauseInfo`; the status is `PAUSED`). */
export function workflowPauseOf(raw: DescribeResponse): WorkflowPause {
  const p = raw.workflowExtendedInfo?.pauseInfo;
  return { identity: p?.identity || null, reason: p?.reason || null, since: isoTime(p?.pausedTime) };
}

/** `rebuild W is paused by Temporal's workflow pause (…): … until: temporal workflow unpause --workflow-id W`. */
export function workflowPauseText(workflowId: string, p: WorkflowPause): string {
  return (
    `rebuild ${workflowId} is paused by Temporal's workflow pause (temporal workflow pause${p.identity ? ` by ${p.identity}` : ''}` +
    `${p.since ? ` since ${p.since}` : ''}${p.reason ? `: ${p.reason}` : ''}): no workflow task runs and it answers no query until: ` +
    `temporal workflow unpause --workflow-id ${workflowId}`
  );
}

/**
 * The key of the version a rebuild planned (its workflow id and first run id, as the plan records
 * them), from its description; undefined when the description has no first run id.
 */
export function runKeyOf(desc: WorkflowExecutionDescription): RebuildRunKey | undefined {
  const firstRunId = desc.raw.workflowExecutionInfo?.firstRunId;
  return firstRunId ? { workflowId: desc.workflowId, firstRunId } : undefined;
}

/** The catalog database's view of one rebuild, or why it could not be read. */
export interface DatabaseView {
  status: DatabaseStatus | null;
  /** Job ids renumbered when the rebuild's version was published. */
  renumbered: RenumberedJobsReport | null;
  /** Set when the catalog database could not be read (configuration, connection, query). */
  error: string | null;
}

/**
 * Reads the catalog database's view of a rebuild (`run`: its version; default the latest) with the
 * renumbered job ids of its publish; never throws (the error is returned).
 */
export async function databaseView(ctx: CommandContext, catalog: string, run?: RebuildRunKey): Promise<DatabaseView> {
  try {
    return await withCatalogPool(ctx, async (pool) => {
      const status = await catalogStatusFromDatabase(pool, catalog, run);
      const renumbered = status.latest ? await readRenumberedJobs(pool, catalog, status.latest.versionId) : null;
      return { status, renumbered, error: null };
    });
  } catch (err) {
    return { status: null, renumbered: null, error: (err as Error).message };
  }
}

/** `status --json` of a closed rebuild (`answeredBy: 'temporal'`); unknown numbers are null. */
export interface ClosedRebuildReport {
  answeredBy: 'temporal';
  catalog: string;
  workflowId: string;
  runId: string;
  /** Temporal's status of the run: COMPLETED, FAILED, CANCELLED, TERMINATED or TIMED_OUT. */
  workflowStatus: string;
  /** ISO 8601 UTC. */
  closeTime: string | null;
  /** `done` when published, `cancelled` when cancelled, `failed` otherwise. */
  phase: 'done' | 'failed' | 'cancelled';
  published: boolean;
  /** The failure (innermost cause) when the workflow did not complete. */
  failure: string | null;
  versionId: string | null;
  pagesTotal: number | null;
  /** Pages committed (the ledger). */
  pagesDone: number | null;
  checkpoint: number | null;
  rowsUpserted: number | null;
  rejects: number | null;
  retries: number | null;
  reconciliation: ReconcileSummary | null;
  lastEvent: string | null;
  renumbered: (RenumberedJobsReport & { count: number; sentence: string }) | null;
  /** The workflow's result when it completed. */
  result: RebuildCatalogResult | null;
  database: DatabaseStatus | null;
  databaseError: string | null;
}

/** Assembles the report of a closed rebuild from its description, outcome and the database view. */
export function closedReport(
  catalog: string,
  desc: WorkflowExecutionDescription,
  outcome: Pick<RebuildOutcome, 'result' | 'reason'>,
  db: DatabaseView,
): ClosedRebuildReport {
  const r = outcome.result ?? null;
  const l = db.status?.latest ?? null;
  const status = desc.status.name;
  const phase = r?.published ? 'done' : r?.cancelled || status === 'CANCELLED' ? 'cancelled' : 'failed';
  const renumbered = db.renumbered
    ? { ...db.renumbered, count: db.renumbered.jobs.length, sentence: renumberedSentence(db.renumbered) }
    : null;
  return {
    answeredBy: 'temporal',
    catalog,
    workflowId: desc.workflowId,
    runId: desc.runId,
    workflowStatus: status,
    closeTime: desc.closeTime ? desc.closeTime.toISOString() : null,
    phase,
    published: !!r?.published,
    failure: r ? null : (outcome.reason ?? null),
    versionId: r?.versionId ?? l?.versionId ?? null,
    pagesTotal: r?.pagesTotal ?? l?.pagesTotal ?? null,
    pagesDone: l?.pagesCommitted ?? (r?.published ? r.pagesTotal : null),
    checkpoint: l?.checkpoint ?? (r?.published ? r.pagesTotal : null),
    rowsUpserted: r?.rowsUpserted ?? l?.rows ?? null,
    rejects: r?.rejects ?? l?.rejects ?? null,
    retries: r?.retries ?? l?.retries ?? null,
    reconciliation: r?.reconciliation ?? db.status?.reconciliation ?? null,
    lastEvent: db.status?.lastEvent ?? null,
    renumbered,
    result: r,
    database: db.status,
    databaseError: db.error,
  };
}

const ENDED: Record<string, string> = {
  FAILED: 'failed',
  TERMINATED: 'was terminated',
  TIMED_OUT: 'timed out',
  CANCELLED: 'was cancelled',
};

/** Characters of the last event's message shown in text (JSON has all of it). */
const LAST_EVENT_CHARS = 160;

/** The text of `status` for a closed rebuild (the last event's message cut at 160 characters). */
export function closedReportLines(x: ClosedRebuildReport, outcome: Pick<RebuildOutcome, 'lines'>): string[] {
  const lines = [
    `catalog ${x.catalog}: rebuild ${x.workflowId} ${x.workflowStatus.toLowerCase().replace('_', ' ')}${x.closeTime ? ` at ${x.closeTime}` : ''}`,
  ];
  if (x.result) lines.push(...outcome.lines.filter((l) => !/ jobs? renumbered: /.test(l)));
  else lines.push(`rebuild of ${x.catalog} ${ENDED[x.workflowStatus] ?? 'failed'}, not published: ${x.failure}`);
  if (x.renumbered) lines.push(x.renumbered.sentence);
  const l = x.database?.latest;
  if (l) {
    lines.push(
      `catalog database: version ${l.versionId} ${l.status}${l.failureReason && l.failureReason !== x.failure ? ` (${l.failureReason})` : ''} · ` +
        `${l.pagesCommitted}/${l.pagesTotal} pages committed (checkpoint ${l.checkpoint}) · ${l.rows} rows · ` +
        `${l.rejects} rejects · ${l.retries} retries`,
    );
    if (!x.result?.reconciliation && x.reconciliation)
      lines.push(`${formatReconciliation(x.reconciliation)} (round ${x.reconciliation.round})`);
  } else if (x.database) lines.push('catalog database: this rebuild planned no version');
  else lines.push(`catalog database: not readable (${x.databaseError})`);
  if (x.database) {
    lines.push(
      x.database.activeVersionId
        ? `active version: ${x.database.activeVersionId}`
        : `no active version: catalog ${x.catalog} was never published`,
    );
    const e = x.database.lastEvent;
    if (e) lines.push(`last event: ${e.length > LAST_EVENT_CHARS ? `${e.slice(0, LAST_EVENT_CHARS - 1)}…` : e}`);
  }
  return lines;
}
