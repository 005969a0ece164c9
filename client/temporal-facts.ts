/**
 * The Temporal half of a rebuild's facts (client/rebuild-facts.ts): one `describe()` of the latest
 * run (status, memo, search attributes, versioning info, Temporal's workflow pause, pending
 * activities and those of running children), the outcome of a closed run, and the pollers of its
 * task queue with the build each polls as (`describeTaskQueue`, workflow and activity tasks).
 */
import type { Client, WorkflowExecutionDescription, WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { RebuildCatalogResult, RebuildMemo } from '../workflows/definitions';
import { RebuildPhaseKey } from '../workflows/search-attributes';
import type { TemporalSession } from './index';
import { pendingActivityPage } from './pending-activity';
import type { PendingActivityFact, PinnedBuild, PollerSeen, RunFact } from './rebuild-facts';
import { retriedStepText } from './rebuild-warnings';

/** Running children of the rebuild whose pending activities are read, at most. */
const MAX_CHILDREN_DESCRIBED = 8;

type Timestamp = { seconds?: unknown; nanos?: number | null } | null | undefined;

/** Milliseconds of a protobuf Timestamp or Duration; null when absent. */
export function ms(ts: Timestamp): number | null {
  if (!ts || ts.seconds == null) return null;
  return Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
}

/** The message of an error (its text when it is no Error). */
export function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
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

/** `describe()` of the latest run; a run that just continued as new is described again. */
export async function describeLatest(client: Client, workflowId: string): Promise<WorkflowExecutionDescription> {
  let desc = await client.workflow.getHandle(workflowId).describe();
  for (let i = 0; i < 3 && desc.status.name === 'CONTINUED_AS_NEW'; i++)
    desc = await client.workflow.getHandle(workflowId).describe();
  return desc;
}

const BEHAVIOR_PREFIX = 'VERSIONING_BEHAVIOR_';

/**
 * The build a run runs on, from its versioning info: a pinned versioning override (`temporal
 * workflow update-options`) first, else the version its last workflow task completed on with the
 * run's behavior. Null while no workflow task has completed on a versioned worker.
 */
export function pinnedBuildOf(desc: WorkflowExecutionDescription): PinnedBuild | null {
  const v = desc.raw.workflowExecutionInfo?.versioningInfo;
  if (!v) return null;
  const override = v.versioningOverride?.pinned?.version;
  if (override?.buildId) {
    return {
      deploymentName: override.deploymentName ?? '',
      buildId: override.buildId,
      behavior: 'PINNED',
      override: true,
    };
  }
  const version = v.deploymentVersion;
  if (!version?.buildId) return null;
  const name = temporal.api.enums.v1.VersioningBehavior[v.behavior ?? 0] ?? 'UNSPECIFIED';
  return {
    deploymentName: version.deploymentName ?? '',
    buildId: version.buildId,
    behavior: name.startsWith(BEHAVIOR_PREFIX) ? name.slice(BEHAVIOR_PREFIX.length) : name,
    override: false,
  };
}

/**
 * The result a cancelled run left in its memo (`outcome`: Temporal keeps no result for a run that
 * ended CANCELLED); null when the memo has none (a run of an earlier build, or not cancelled).
 */
export function cancelledOutcomeOf(memo: Record<string, unknown> | undefined): RebuildCatalogResult | null {
  const o = memo?.outcome as Partial<RebuildCatalogResult> | undefined;
  return o && typeof o === 'object' && o.cancelled === true && typeof o.versionId === 'string'
    ? (o as RebuildCatalogResult)
    : null;
}

/** The rebuild's memo (`{ paused, pauseChangedAt, outcome? }`); null when the run has none yet. */
function memoOf(desc: WorkflowExecutionDescription): RebuildMemo | null {
  const m = desc.memo as Partial<RebuildMemo> | undefined;
  if (!m || typeof m.paused !== 'boolean') return null;
  const outcome = cancelledOutcomeOf(desc.memo);
  return {
    paused: m.paused,
    pauseChangedAt: typeof m.pauseChangedAt === 'string' ? m.pauseChangedAt : null,
    ...(outcome ? { outcome } : {}),
  };
}

/** The run as its description tells it (no result yet: see {@link closedOutcome}). */
export function runFact(desc: WorkflowExecutionDescription): RunFact {
  const phase = desc.typedSearchAttributes.get(RebuildPhaseKey);
  const pause = desc.raw.workflowExtendedInfo?.pauseInfo;
  return {
    runId: desc.runId,
    firstRunId: desc.raw.workflowExecutionInfo?.firstRunId || desc.runId,
    status: desc.status.name,
    startedAtMs: desc.startTime.getTime(),
    closedAtMs: desc.closeTime ? desc.closeTime.getTime() : null,
    taskQueue: desc.taskQueue,
    phase: phase ?? null,
    memo: memoOf(desc),
    build: pinnedBuildOf(desc),
    workflowTaskPending: !!desc.raw.pendingWorkflowTask,
    failure: null,
    result: null,
    workflowPause:
      desc.status.name === 'PAUSED' && pause
        ? { identity: pause.identity ?? '', reason: pause.reason ?? '', pausedAtMs: ms(pause.pausedTime) }
        : null,
  };
}

/** Temporal statuses of a closed run whose outcome (result or failure) can be read. */
const WITH_OUTCOME = new Set(['COMPLETED', 'FAILED', 'TERMINATED', 'TIMED_OUT', 'CANCELLED']);

/**
 * Fills `run.result` (completed, or cancelled with the result in its memo) or `run.failure` (failed,
 * cancelled, terminated, timed out) from the run's outcome.
 */
export async function closedOutcome(client: Client, desc: WorkflowExecutionDescription, run: RunFact): Promise<void> {
  if (!WITH_OUTCOME.has(run.status)) return;
  const cancelled = run.status === 'CANCELLED' ? run.memo?.outcome : undefined;
  if (cancelled) {
    run.result = cancelled;
    return;
  }
  try {
    run.result = (await client.workflow.getHandle(desc.workflowId, desc.runId).result()) as RebuildCatalogResult;
  } catch (err) {
    run.failure = deepestMessage(err);
  }
}

/**
 * Every poller the server lists on the task queue (workflow and activity tasks; one entry per
 * identity and build, its newest poll), with the Worker Deployment build it polls as. The server
 * lists a dead worker's pollers for minutes: their `lastPollAtMs` tells.
 */
export async function listPollers(session: TemporalSession, taskQueue: string): Promise<PollerSeen[]> {
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
  const seen = new Map<string, PollerSeen>();
  for (const r of answers)
    for (const p of r.pollers ?? []) {
      if (!p.identity) continue;
      const buildId = p.deploymentOptions?.buildId || null;
      const key = `${p.identity}\u0000${buildId ?? ''}`;
      const at = ms(p.lastAccessTime);
      const prev = seen.get(key);
      if (!prev || (at !== null && (prev.lastPollAtMs === null || at > prev.lastPollAtMs)))
        seen.set(key, { identity: p.identity, buildId, lastPollAtMs: at });
    }
  return [...seen.values()];
}

/** Pending activities of the run and of (at most {@link MAX_CHILDREN_DESCRIBED}) running children. */
export async function pendingActivities(
  client: Client,
  desc: WorkflowExecutionDescription,
): Promise<PendingActivityFact[]> {
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

/** A pending activity as the facts keep it. */
function activityFact(workflowId: string, a: temporal.api.workflow.v1.IPendingActivityInfo): PendingActivityFact {
  const failure = a.lastFailure;
  const stateName = temporal.api.enums.v1.PendingActivityState[a.state ?? 0] ?? 'UNSPECIFIED';
  const by = a.pauseInfo?.manual ?? a.pauseInfo?.rule ?? null;
  return {
    workflowId,
    activityId: a.activityId ?? '',
    activityType: a.activityType?.name ?? '',
    pageNo: pendingActivityPage(a),
    attempt: a.attempt ?? 1,
    state: stateName.startsWith(STATE_PREFIX) ? stateName.slice(STATE_PREFIX.length) : stateName,
    paused: !!a.paused,
    pausedBy: a.paused
      ? { identity: by?.identity || null, reason: by?.reason || null, atMs: ms(a.pauseInfo?.pauseTime) }
      : null,
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
 * While a rebuild's plan activity is retried after a failure (an unreachable source, say): `its
 * plan is retried (attempt 4): <the last failure's message>`; null when it has not failed.
 * @throws the Temporal error of `describe()`.
 */
export async function planRetryLine(handle: WorkflowHandle): Promise<string | null> {
  const d = await handle.describe();
  const plan = (d.raw.pendingActivities ?? [])
    .map((a) => activityFact(d.workflowId, a))
    .find((a) => a.activityType === 'planRebuild' && a.lastFailure);
  return plan ? retriedStepText(plan) : null;
}
