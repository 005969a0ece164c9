/**
 * The facts behind `catalog-rebuild check --catalog C --rebuild`, gathered within a few seconds
 * whether or not a worker runs:
 * - Temporal: `describe()` of the latest run of `catalog-rebuild/<catalog>` (status, the
 *   `RebuildPhase` search attribute, Temporal's workflow pause, pending activities, and those of its
 *   running children), the result or failure of a closed run, and the task queue's pollers
 *   (`describeTaskQueue`, workflow and activity tasks, newest `lastAccessTime`);
 * - the catalog database (`lib/catalog/rebuild-health.ts`): the version the rebuild planned, its
 *   ledger's progress, p99 page time and retries;
 * - the `progress` query (at most {@link PROGRESS_QUERY_TIMEOUT_MS}) for phase, pause and rate; when
 *   no worker answers, whether the rebuild is paused by the `pause` signal is read from the run's
 *   history (newest `pause` / `resume` signal, else the pause state carried into the run).
 * The verdict is {@link evaluateRebuildHealth}'s (client/rebuild-health.ts).
 */
import type { Client, WorkflowExecutionDescription } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import type { Pool } from 'pg';
import { countPageRetries, readLedgerProgress, readPageTimeP99, readRebuildVersion } from '../lib/catalog';
import type { CarriedState, RebuildCatalogResult, RebuildCatalogInput } from '../workflows/definitions';
import { pauseSignal, resumeSignal } from '../workflows/definitions';
import { rebuildWorkflowId } from '../workflows/names';
import { RebuildPhaseKey } from '../workflows/search-attributes';
import type { TemporalSession } from './index';
import { getProgress } from './index';
import type { DatabaseFact, PendingActivityFact, RebuildFacts, RunFact } from './rebuild-health';
import type { RebuildThresholds } from './rebuild-thresholds';
import { DEFAULT_REBUILD_THRESHOLDS } from './rebuild-thresholds';
import { pendingActivityPage } from './pending-activity';

/** How long the `progress` query may take before the check goes on without it (ms). */
export const PROGRESS_QUERY_TIMEOUT_MS = 2_000;
/** Window of the catalog database's rate: rows committed in the last minute / 60 (s). */
export const RATE_WINDOW_SECONDS = 60;
/** Recent committed pages whose times give the p99 page time. */
export const P99_PAGES = 200;
/** Running children of the rebuild whose pending activities are read, at most. */
const MAX_CHILDREN_DESCRIBED = 8;
/** History events read (newest first) looking for the latest `pause` / `resume` signal, at most. */
const MAX_HISTORY_EVENTS = 20_000;

type Timestamp = { seconds?: unknown; nanos?: number | null } | null | undefined;

/** Milliseconds of a protobuf Timestamp or Duration; null when absent. */
function ms(ts: Timestamp): number | null {
  if (!ts || ts.seconds == null) return null;
  return Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Gathers the facts about the latest rebuild of `catalog`. Never throws: what Temporal cannot
 * answer is `temporalError` (the check is UNKNOWN), what the catalog database cannot answer is
 * `databaseError`. `pool` is null when the catalog database is not configured (`poolError` says why).
 * The `progress` query (`queryTimeoutMs`, default {@link PROGRESS_QUERY_TIMEOUT_MS}) is skipped when
 * no worker polled the task queue within `noPollerSeconds` (default 75 s).
 */
export async function gatherRebuildFacts(
  session: TemporalSession,
  pool: Pool | null,
  catalog: string,
  opts: { poolError?: string | null; queryTimeoutMs?: number; noPollerSeconds?: number } = {},
): Promise<RebuildFacts> {
  const workflowId = rebuildWorkflowId(catalog);
  const liveWindowMs = (opts.noPollerSeconds ?? DEFAULT_REBUILD_THRESHOLDS.noPollerSeconds) * 1000;
  const facts: RebuildFacts = {
    catalog,
    workflowId,
    temporalError: null,
    run: null,
    progress: null,
    signalPaused: null,
    activities: [],
    pollers: { taskQueue: session.taskQueue, lastPollAtMs: null, error: null },
    database: null,
    databaseError: pool ? null : (opts.poolError ?? 'not configured'),
  };
  let desc: WorkflowExecutionDescription;
  try {
    desc = await describeLatest(session.client, workflowId);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) facts.temporalError = message(err);
    return facts;
  }
  const run = runFact(desc);
  facts.run = run;
  facts.pollers.taskQueue = desc.taskQueue;
  const running = run.status === 'RUNNING' || run.status === 'PAUSED';
  const firstRunId = desc.raw.workflowExecutionInfo?.firstRunId || desc.runId;
  const polled = newestPoll(session, desc.taskQueue).then(
    (at) => (facts.pollers.lastPollAtMs = at),
    (err) => {
      facts.pollers.error = message(err);
      return null;
    },
  );
  // Only a worker that polls can answer the query: without one, the history tells the pause state at once.
  const workerAlive = polled.then(
    (at) => facts.pollers.error !== null || (at !== null && Date.now() - at <= liveWindowMs),
  );
  await Promise.all([
    polled,
    pool
      ? databaseFact(pool, workflowId, firstRunId).then(
          (d) => (facts.database = d),
          (err) => (facts.databaseError = message(err)),
        )
      : null,
    closedOutcome(session.client, desc, run),
    running ? pendingActivities(session.client, desc).then((a) => (facts.activities = a)) : null,
    running
      ? workerAlive.then((alive) =>
          pauseState(session, desc, facts, alive ? (opts.queryTimeoutMs ?? PROGRESS_QUERY_TIMEOUT_MS) : 0),
        )
      : null,
  ]);
  return facts;
}

/** `describe()` of the latest run; a run that just continued as new is described again. */
async function describeLatest(client: Client, workflowId: string): Promise<WorkflowExecutionDescription> {
  let desc = await client.workflow.getHandle(workflowId).describe();
  for (let i = 0; i < 3 && desc.status.name === 'CONTINUED_AS_NEW'; i++)
    desc = await client.workflow.getHandle(workflowId).describe();
  return desc;
}

function runFact(desc: WorkflowExecutionDescription): RunFact {
  const phase = desc.typedSearchAttributes.get(RebuildPhaseKey);
  const pause = desc.raw.workflowExtendedInfo?.pauseInfo;
  return {
    runId: desc.runId,
    status: desc.status.name,
    startedAtMs: desc.startTime.getTime(),
    phase: phase ?? null,
    failure: null,
    result: null,
    workflowPause:
      desc.status.name === 'PAUSED' && pause
        ? { identity: pause.identity ?? '', reason: pause.reason ?? '', pausedAtMs: ms(pause.pausedTime) }
        : null,
  };
}

/** Fills `run.result` (completed) or `run.failure` (failed, terminated, timed out) from the run's outcome. */
async function closedOutcome(client: Client, desc: WorkflowExecutionDescription, run: RunFact): Promise<void> {
  if (!['COMPLETED', 'FAILED', 'TERMINATED', 'TIMED_OUT'].includes(run.status)) return;
  try {
    const r = (await client.workflow.getHandle(desc.workflowId, desc.runId).result()) as RebuildCatalogResult;
    run.result = {
      published: !!r.published,
      cancelled: !!r.cancelled,
      versionId: r.versionId,
      pagesTotal: r.pagesTotal,
      rowsUpserted: r.rowsUpserted,
      retries: r.retries,
    };
  } catch (err) {
    run.failure = deepestMessage(err);
  }
}

/** The message of the deepest cause of a failure chain (e.g. WorkflowFailedError → ActivityFailure → ApplicationFailure). */
export function deepestMessage(err: unknown): string {
  let e: unknown = err;
  let msg = message(err);
  for (let i = 0; i < 10 && e instanceof Error; i++) {
    if (e.message) msg = e.message;
    e = (e as { cause?: unknown }).cause;
  }
  return msg;
}

/** The newest poll (ms since epoch) of any worker on the task queue, workflow or activity tasks; null when none is listed. */
async function newestPoll(session: TemporalSession, taskQueue: string): Promise<number | null> {
  const kinds = [
    temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
  ];
  const answers = await Promise.all(
    kinds.map((taskQueueType) =>
      session.client.workflowService.describeTaskQueue({
        namespace: session.namespace,
        taskQueue: { name: taskQueue },
        taskQueueType,
      }),
    ),
  );
  let newest: number | null = null;
  for (const r of answers)
    for (const p of r.pollers ?? []) {
      const at = ms(p.lastAccessTime);
      if (at !== null && (newest === null || at > newest)) newest = at;
    }
  return newest;
}

/** The catalog database's facts about the version planned by this rebuild; null before the plan. */
async function databaseFact(pool: Pool, workflowId: string, firstRunId: string): Promise<DatabaseFact | null> {
  const v = await readRebuildVersion(pool, workflowId, firstRunId);
  if (!v) return null;
  const l = await readLedgerProgress(pool, v.versionId, RATE_WINDOW_SECONDS);
  const p99 = await readPageTimeP99(pool, v.versionId, P99_PAGES);
  const retries = await countPageRetries(pool, v.versionId);
  const now = Date.now();
  return {
    versionId: v.versionId,
    status: v.status,
    pagesTotal: v.pagesTotal,
    pagesDone: l.pagesCommitted,
    lastCommitAtMs: l.secondsSinceLastCommit === null ? null : now - l.secondsSinceLastCommit * 1000,
    createdAtMs: now - v.secondsSinceCreated * 1000,
    rowsPerSecond: Math.round(l.rowsInWindow / RATE_WINDOW_SECONDS),
    retries,
    p99PageMs: p99,
    failureReason: v.failureReason,
  };
}

/** Pending activities of the run and of (at most {@link MAX_CHILDREN_DESCRIBED}) running children. */
async function pendingActivities(client: Client, desc: WorkflowExecutionDescription): Promise<PendingActivityFact[]> {
  const out = (desc.raw.pendingActivities ?? []).map((a) => activityFact(desc.workflowId, a));
  const children = (desc.raw.pendingChildren ?? []).slice(0, MAX_CHILDREN_DESCRIBED);
  const described = await Promise.all(
    children.map((ch) =>
      client.workflow
        .getHandle(ch.workflowId ?? '', ch.runId ?? undefined)
        .describe()
        .catch(() => null),
    ),
  );
  for (const d of described)
    if (d) out.push(...(d.raw.pendingActivities ?? []).map((a) => activityFact(d.workflowId, a)));
  return out;
}

const STATE_PREFIX = 'PENDING_ACTIVITY_STATE_';

function activityFact(workflowId: string, a: temporal.api.workflow.v1.IPendingActivityInfo): PendingActivityFact {
  const failure = a.lastFailure;
  const stateName = temporal.api.enums.v1.PendingActivityState[a.state ?? 0] ?? 'UNSPECIFIED';
  return {
    workflowId,
    activityId: a.activityId ?? '',
    activityType: a.activityType?.name ?? '',
    pageNo: pendingActivityPage(a),
    attempt: a.attempt ?? 1,
    state: stateName.startsWith(STATE_PREFIX) ? stateName.slice(STATE_PREFIX.length) : stateName,
    paused: !!a.paused,
    heartbeatTimeoutMs: ms(a.activityOptions?.heartbeatTimeout) || null,
    lastHeartbeatAtMs: ms(a.lastHeartbeatTime),
    lastStartedAtMs: ms(a.lastStartedTime),
    nextAttemptAtMs: ms(a.nextAttemptScheduleTime),
    lastFailure: failure
      ? {
          message: failure.message ?? '',
          type: failure.applicationFailureInfo?.type || failure.cause?.applicationFailureInfo?.type || null,
          timeout: !!failure.timeoutFailureInfo || !!failure.cause?.timeoutFailureInfo,
        }
      : null,
  };
}

/**
 * Fills `progress` from the `progress` query (when a worker answers within `timeoutMs`; 0: do not
 * ask), else `signalPaused` from the run's history.
 */
async function pauseState(
  session: TemporalSession,
  desc: WorkflowExecutionDescription,
  facts: RebuildFacts,
  timeoutMs: number,
): Promise<void> {
  try {
    if (timeoutMs <= 0) throw new Error('no worker polls: not queried');
    const p = await getProgress(session.client.workflow.getHandle(desc.workflowId, desc.runId), timeoutMs);
    facts.progress = {
      phase: p.phase,
      paused: p.paused,
      pagesDone: p.pagesDone,
      pagesTotal: p.pagesTotal,
      rowsPerSecond: p.rowsPerSecond,
      retries: p.retries,
    };
    return;
  } catch {
    /* no worker answered: read the history */
  }
  facts.signalPaused = await pausedFromHistory(session, desc).catch(() => null);
}

/**
 * Whether the run is paused by the `pause` signal, from its history read newest first: the latest
 * `pause` or `resume` signal decides; without one, the pause state carried into the run
 * (continue-as-new input). Null when undecided within {@link MAX_HISTORY_EVENTS} events.
 */
async function pausedFromHistory(
  session: TemporalSession,
  desc: WorkflowExecutionDescription,
): Promise<boolean | null> {
  let nextPageToken: Uint8Array | undefined;
  let read = 0;
  do {
    const r = await session.client.workflowService.getWorkflowExecutionHistoryReverse({
      namespace: session.namespace,
      execution: { workflowId: desc.workflowId, runId: desc.runId },
      maximumPageSize: 1000,
      nextPageToken,
    });
    for (const e of r.history?.events ?? []) {
      const signal = e.workflowExecutionSignaledEventAttributes?.signalName;
      if (signal === pauseSignal.name) return true;
      if (signal === resumeSignal.name) return false;
      const started = e.workflowExecutionStartedEventAttributes;
      if (started) {
        const payload = started.input?.payloads?.[0];
        const input = payload ? defaultPayloadConverter.fromPayload<RebuildCatalogInput>(payload) : null;
        return !!(input?.carried as CarriedState | undefined)?.paused;
      }
    }
    read += r.history?.events?.length ?? 0;
    nextPageToken = r.nextPageToken?.length ? r.nextPageToken : undefined;
  } while (nextPageToken && read < MAX_HISTORY_EVENTS);
  return null;
}
