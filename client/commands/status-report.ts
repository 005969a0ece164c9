/**
 * `status` as formatters of a rebuild's facts (client/rebuild-facts.ts): a closed rebuild from
 * Temporal's result or failure and the catalog database (no query sent); a running one with its
 * build, the workers of that build that poll, the pause state (query, else memo), the page
 * activities an operator paused (`temporal activity pause`) and Temporal's workflow pause
 * (`temporal workflow pause`). Pure: no I/O, the clock passed in.
 */
import type { RebuildCatalogResult, RebuildProgress, ReconcileSummary } from '../index';
import type { RenumberedJobsReport } from '../../lib/catalog/event-reads';
import type { DatabaseStatus } from '../status';
import type { PinnedBuild, RebuildFacts } from '../rebuild-facts';
import { livePollersOf } from '../rebuild-facts';
import type { RebuildOutcome } from './outcome';
import { formatRebuildResult, formatReconciliation } from './outcome';
import { renumberedSentence } from '../../lib/catalog/event-reads';

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

/** The rebuild's own pending activities whose `paused` flag is set (`temporal activity pause`). */
export function pausedActivitiesOf(facts: RebuildFacts): OperatorPausedActivity[] {
  return facts.activities
    .filter((a) => a.paused && a.workflowId === facts.workflowId)
    .map((a) => ({
      activityId: a.activityId,
      activityType: a.activityType,
      pageNo: a.pageNo,
      identity: a.pausedBy?.identity ?? null,
      reason: a.pausedBy?.reason ?? null,
      since: a.pausedBy?.atMs == null ? null : new Date(a.pausedBy.atMs).toISOString(),
    }));
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

/** `rebuild W is paused by Temporal's workflow pause (…): … until: temporal workflow unpause --workflow-id W`. */
export function workflowPauseText(workflowId: string, p: WorkflowPause): string {
  return (
    `rebuild ${workflowId} is paused by Temporal's workflow pause (temporal workflow pause${p.identity ? ` by ${p.identity}` : ''}` +
    `${p.since ? ` since ${p.since}` : ''}${p.reason ? `: ${p.reason}` : ''}): no workflow task runs and it answers no query until: ` +
    `temporal workflow unpause --workflow-id ${workflowId}`
  );
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

/** Assembles the report of a closed rebuild from its facts and outcome. */
export function closedReport(
  facts: RebuildFacts,
  outcome: Pick<RebuildOutcome, 'result' | 'reason'>,
): ClosedRebuildReport {
  const catalog = facts.catalog;
  const run = facts.run!;
  const db = {
    status: facts.view?.status ?? null,
    renumbered: facts.view?.renumbered ?? null,
    error: facts.databaseError,
  };
  const r = outcome.result ?? null;
  const l = db.status?.latest ?? null;
  const status = run.status;
  const phase = r?.published ? 'done' : r?.cancelled || status === 'CANCELLED' ? 'cancelled' : 'failed';
  const renumbered = db.renumbered
    ? { ...db.renumbered, count: db.renumbered.jobs.length, sentence: renumberedSentence(db.renumbered) }
    : null;
  return {
    answeredBy: 'temporal',
    catalog,
    workflowId: facts.workflowId,
    runId: run.runId,
    workflowStatus: status,
    closeTime: run.closedAtMs ? new Date(run.closedAtMs).toISOString() : null,
    phase,
    published: !!r?.published,
    failure: r ? null : (outcome.reason ?? null),
    versionId: r?.versionId ?? l?.versionId ?? null,
    pagesTotal: r?.pagesTotal ?? l?.pagesTotal ?? null,
    pagesDone: l?.pagesCommitted ?? (r?.published ? r.pagesTotal : null),
    checkpoint: l?.checkpoint ?? (r?.published ? r.pagesTotal : null),
    // As pages done: the ledger's for an unpublished rebuild (a page may commit as a cancel arrives).
    rowsUpserted: r ? (r.published || !l || l.versionId !== r.versionId ? r.rowsUpserted : l.rows) : (l?.rows ?? null),
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
  // A rebuild of an earlier build cancelled by the `cancel` signal completed (Temporal's status)
  // after abandoning its version: say cancelled, as check --rebuild does. One of this build ends
  // CANCELLED, with its result in the memo.
  const ended =
    x.workflowStatus === 'COMPLETED' && x.result?.cancelled
      ? 'was cancelled (the cancel signal; Temporal status COMPLETED)'
      : x.workflowStatus.toLowerCase().replace('_', ' ');
  const lines = [`catalog ${x.catalog}: rebuild ${x.workflowId} ${ended}${x.closeTime ? ` at ${x.closeTime}` : ''}`];
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

/**
 * The outcome of a closed rebuild from its facts: the result lines (formatRebuildResult) of a
 * completed run (an unpublished one with the ledger's pages done), else the failure; exit code 0
 * when published or up to date, 1 otherwise.
 */
export function closedOutcomeOf(facts: RebuildFacts): Pick<RebuildOutcome, 'code' | 'lines' | 'reason' | 'result'> {
  const run = facts.run;
  const r = run?.result ?? null;
  if (r) {
    // Pages and rows done as the ledger counts them: a page that committed as a cancel arrived is
    // in the ledger but not in the cancelled workflow's own count.
    const ledger = facts.database;
    const shown =
      !r.published && ledger && ledger.versionId === r.versionId
        ? { ...r, pagesDone: ledger.pagesDone, rowsUpserted: ledger.rowsDone ?? r.rowsUpserted }
        : r;
    return { code: r.published || r.upToDate ? 0 : 1, lines: formatRebuildResult(shown), result: r };
  }
  const reason = run?.failure ?? 'no reason recorded';
  return { code: 1, lines: [`rebuild of ${facts.catalog} failed, not published: ${reason}`], reason };
}

/** A running rebuild as `status` shows it. */
export interface OpenState {
  /** The `progress` query's answer; null when no worker answered. */
  progress: RebuildProgress | null;
  /** Why the query did not answer ('' when it did or was not asked). */
  queryError: string;
  /** Temporal's workflow pause; null when not paused so. */
  workflowPause: WorkflowPause | null;
  /** Pages and activities an operator paused. */
  paused: { operatorPausedPages: number[]; pausedActivities: OperatorPausedActivity[] };
  /** Workers of the rebuild's build polling within the no-poller window; -1 when Temporal could not tell. */
  workers: number;
  /** The build the rebuild is pinned to; null before its first workflow task. */
  build: PinnedBuild | null;
}

/** The state of a running rebuild from its facts at `nowMs`, counting pollers within `windowSeconds`. */
export function openStateOf(facts: RebuildFacts, nowMs: number, windowSeconds: number): OpenState {
  const run = facts.run!;
  const progress = (facts.progress as RebuildProgress | null) ?? null;
  const activities = pausedActivitiesOf(facts);
  const fromQuery = progress?.operatorPausedPages ?? [];
  const pages = [...new Set([...fromQuery, ...activities.flatMap((a) => (a.pageNo === null ? [] : [a.pageNo]))])];
  pages.sort((a, b) => a - b);
  const p = run.workflowPause;
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    progress,
    queryError: facts.queryError && !facts.queryError.startsWith('not asked') ? facts.queryError : '',
    workflowPause:
      run.status === 'PAUSED'
        ? { identity: p?.identity || null, reason: p?.reason || null, since: iso(p?.pausedAtMs ?? null) }
        : null,
    paused: { operatorPausedPages: pages, pausedActivities: activities },
    workers: facts.pollers.error ? -1 : livePollersOf(facts, nowMs, windowSeconds).length,
    build: run.build ?? null,
  };
}

/** `build: <id> (pinned, deployment <name>; N workers of this build poll)`; none before the first workflow task. */
export function buildLines(st: OpenState): string[] {
  const b = st.build;
  if (!b) return [];
  const how = `${b.behavior.toLowerCase().replace('_', '-')}${b.override ? ' by a versioning override' : ''}, deployment ${b.deploymentName}`;
  const n = st.workers;
  const workers = n < 0 ? '' : `; ${n} worker${n === 1 ? '' : 's'} of this build poll${n === 1 ? 's' : ''}`;
  return [`build: ${b.buildId} (${how}${workers})`];
}

/**
 * The pause state when no worker answered, from the memo: `pause: paused by the pause signal since
 * T, as the rebuild last recorded it (memo)`. A signal sent while no worker runs is not in the memo
 * yet (nor anywhere in Temporal's description), so with a workflow task waiting and no worker of the
 * build polling, the line adds that a pause, resume or cancel sent since takes effect, and shows,
 * when a worker of that build runs the rebuild. Null without a memo or under Temporal's workflow pause.
 */
export function memoPauseLine(facts: RebuildFacts, st: OpenState): string | null {
  const m = facts.run?.memo;
  if (!m || st.workflowPause) return null;
  const since = m.pauseChangedAt ? ` since ${m.pauseChangedAt}` : '';
  const state = m.paused
    ? `paused by the pause signal${since}`
    : `not paused${m.pauseChangedAt ? ` (resumed${since})` : ''}`;
  const pending =
    facts.run?.workflowTaskPending && st.workers === 0
      ? `; a pause, resume or cancel sent since takes effect, and shows here, when a worker${st.build ? ` of build ${st.build.buildId}` : ''} runs the rebuild`
      : '';
  return `pause: ${state}, as the rebuild last recorded it (memo)${pending}`;
}

/**
 * The catalog database's view as text (what `status` prints when no worker answers or Temporal has
 * no workflow; `--json` prints the object): the version with its ledger figures, its latest
 * reconciliation, the active version and the last event.
 */
export function databaseLines(catalog: string, d: DatabaseStatus): string[] {
  const l = d.latest;
  const lines: string[] = [];
  if (l) {
    const last =
      l.secondsSinceProgress === null ? 'no page committed yet' : `last page ${l.secondsSinceProgress} s ago`;
    lines.push(
      `catalog database: version ${l.versionId} ${l.status}${l.failureReason ? ` (${l.failureReason})` : ''} · ` +
        `${l.pagesCommitted}/${l.pagesTotal} pages committed (checkpoint ${l.checkpoint}) · ${l.rows} rows · ` +
        `${l.rejects} rejects · ${l.retries} retries · ${last}`,
    );
    if (d.reconciliation) lines.push(`${formatReconciliation(d.reconciliation)} (round ${d.reconciliation.round})`);
  } else lines.push('catalog database: no version of this rebuild yet');
  lines.push(
    d.activeVersionId
      ? `active version: ${d.activeVersionId}`
      : `no active version: catalog ${catalog} was never published`,
  );
  const e = d.lastEvent;
  if (e) lines.push(`last event: ${e.length > LAST_EVENT_CHARS ? `${e.slice(0, LAST_EVENT_CHARS - 1)}…` : e}`);
  return lines;
}
