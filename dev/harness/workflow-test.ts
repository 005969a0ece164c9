/**
 * In-process workflow tests: the real workflow bundle on a Worker inside the test process, over
 * mocked activities (`mock-activities.ts`), against a local Temporal test server. Helpers start a
 * rebuild, wait on its `progress` query and read its history (scheduled activities, signals,
 * children, continue-as-new) with payloads decoded.
 *
 * The workers are versioned as production workers are (a Worker Deployment of the test file, the
 * bundle's build id, made current before the first test), since the workflows declare themselves
 * pinned. The time-skipping test server knows no Worker Deployments, so the local dev server of the
 * project's Temporal CLI (`workflow-env.ts`) serves. The waits the workflow code makes on its own
 * are short (the page retry's first backoff is 1 s) and are waited out.
 */
import { randomBytes } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { WorkflowBundleOption } from '@temporalio/worker';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import type { Activities } from '../../activities';
import type { RebuildCatalogInput, RebuildProgress } from '../../workflows/definitions';
import { progressQuery } from '../../workflows/definitions';
import { rebuildWorkflowId } from '../../workflows/names';
import { RebuildPhaseKey } from '../../workflows/search-attributes';
import { loadWorkflowBundle } from '../../worker/bundle';
import type { WorkerBuild } from '../../worker/build-id';
import { bundleHash } from '../../worker/build-id';
import { adoptIfNoCurrentVersion } from '../../worker/deployment';
import { waitFor, withDeadline } from './wait';
import { localTestEnv } from './workflow-env';

/** A history event, as `fetchHistory` returns it. */
export type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** The test server and the workflow bundle of one test file. */
export interface InProcessEnv {
  env: TestWorkflowEnvironment;
  bundle: WorkflowBundleOption;
  /** The Worker Deployment Version of this file's workers. */
  build: WorkerBuild;
}

/**
 * Starts the local Temporal test server and loads the prebuilt workflow bundle (`npm run build`),
 * and quiets the SDK's logging to errors (activity and workflow failures the tests provoke are
 * expected). Call once per test file.
 */
export async function inProcessEnv(): Promise<InProcessEnv> {
  // The SDK core warns of activities that complete after their workflow closed: held mock
  // activities do when the worker shuts down. Errors only.
  Runtime.install({
    logger: new DefaultLogger('ERROR'),
    telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } },
  });
  const [env, code] = await Promise.all([localTestEnv(), loadWorkflowBundle()]);
  const build = { deploymentName: `catalog-rebuild-wf-${randomBytes(3).toString('hex')}`, buildId: bundleHash(code) };
  return { env, bundle: { code }, build };
}

/**
 * Runs `fn` while a Worker on a fresh task queue runs the workflow bundle with `activities`; the
 * worker shuts down when `fn` settles (held activities are then cancelled). Heartbeats reach the
 * server at most 200 ms apart, so a cancellation or an operator's pause reaches a held activity
 * within about that.
 * @param timeoutMs how long `fn` may take (default 30 s): a workflow that never ends (a result
 *   awaited forever) fails the test instead of hanging it.
 * @returns what `fn` returns; rejects with what `fn` or the worker throws, or on the deadline.
 */
export async function withWorker<T>(
  ctx: InProcessEnv,
  activities: Activities,
  fn: (taskQueue: string) => Promise<T>,
  timeoutMs = 30_000,
): Promise<T> {
  const taskQueue = `wf-${randomBytes(4).toString('hex')}`;
  const worker = await Worker.create({
    connection: ctx.env.nativeConnection,
    taskQueue,
    workflowBundle: ctx.bundle,
    workerDeploymentOptions: { useWorkerVersioning: true, version: ctx.build, defaultVersioningBehavior: 'PINNED' },
    activities,
    maxHeartbeatThrottleInterval: 200,
  });
  const run = async () => {
    const adopted = await adoptIfNoCurrentVersion(ctx.env.client, 'default', ctx.build, { identity: 'workflow-test' });
    if (adopted.kind !== 'adopted' && adopted.kind !== 'has-current')
      throw new Error(`the test deployment has no current version: ${JSON.stringify(adopted)}`);
    return fn(taskQueue);
  };
  return worker.runUntil(
    withDeadline(run(), timeoutMs, () => `the test did not end within ${timeoutMs} ms (task queue ${taskQueue})`),
  );
}

/** A unique catalog name with prefix `tag` (workflow ids must not collide between tests). */
export const uniqueCatalog = (tag: string): string => `${tag}-${randomBytes(3).toString('hex')}`;

/**
 * Starts `RebuildCatalog` with `input` on `taskQueue`, workflow id `catalog-rebuild/<catalog>`.
 * @returns the handle of the latest run (queries and signals follow continue-as-new) and the id.
 */
export async function startRebuild(
  ctx: InProcessEnv,
  taskQueue: string,
  input: RebuildCatalogInput,
): Promise<{ handle: WorkflowHandle; workflowId: string }> {
  const workflowId = rebuildWorkflowId(input.catalog);
  await ctx.env.client.workflow.start('RebuildCatalog', { taskQueue, workflowId, args: [input] });
  return { handle: ctx.env.client.workflow.getHandle(workflowId), workflowId };
}

/** The rebuild's `progress` answer. */
export const progress = (handle: WorkflowHandle): Promise<RebuildProgress> => handle.query(progressQuery);

/**
 * Queries `progress` until `pred` holds.
 * @returns the answer that satisfied it.
 * @throws Error naming `what` and the last answer after 20 s.
 */
export async function waitForProgress(
  handle: WorkflowHandle,
  what: string,
  pred: (p: RebuildProgress) => boolean,
): Promise<RebuildProgress> {
  let last: RebuildProgress | undefined;
  try {
    return await waitFor(
      what,
      async () => {
        last = await progress(handle);
        return pred(last) && last;
      },
      { timeoutMs: 20_000, intervalMs: 20 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last progress: ${JSON.stringify(last)}`);
  }
}

/** The history of one run (`runId`) of `workflowId`, or of its latest run. */
export async function history(ctx: InProcessEnv, workflowId: string, runId?: string): Promise<HistoryEvent[]> {
  const h = await ctx.env.client.workflow.getHandle(workflowId, runId).fetchHistory();
  return h.events ?? [];
}

/** The first payload of `payloads` decoded (JSON), or undefined. */
export function decode<T = unknown>(payloads: { payloads?: Payload[] | null } | null | undefined): T | undefined {
  const p = payloads?.payloads?.[0];
  return p ? defaultPayloadConverter.fromPayload<T>(p) : undefined;
}

/** One activity the workflow scheduled, from its `ActivityTaskScheduled` event. */
export interface ScheduledActivity {
  /** Index of the event in the history. */
  index: number;
  type: string;
  activityId: string;
  input: Record<string, unknown> | undefined;
  /** Heartbeat timeout (s). */
  heartbeatTimeoutS: number;
}

/** Activities scheduled in `events` (of type `type` when given), in history order. */
export function scheduledActivities(events: HistoryEvent[], type?: string): ScheduledActivity[] {
  const out: ScheduledActivity[] = [];
  events.forEach((e, index) => {
    const a = e.activityTaskScheduledEventAttributes;
    if (!a || (type && a.activityType?.name !== type)) return;
    out.push({
      index,
      type: a.activityType?.name ?? '',
      activityId: a.activityId ?? '',
      input: decode(a.input),
      heartbeatTimeoutS: Number(a.heartbeatTimeout?.seconds ?? 0),
    });
  });
  return out;
}

/** Indexes in `events` of the signals named `name`, in order. */
export function signalIndexes(events: HistoryEvent[], name: string): number[] {
  const out: number[] = [];
  events.forEach((e, i) => {
    if (e.workflowExecutionSignaledEventAttributes?.signalName === name) out.push(i);
  });
  return out;
}

/** Activity ids whose cancellation the workflow requested in `events`. */
export function cancelRequestedActivities(events: HistoryEvent[]): string[] {
  const ids = new Map<string, string>();
  events.forEach((e) => {
    const a = e.activityTaskScheduledEventAttributes;
    if (a) ids.set(String(e.eventId), a.activityId ?? '');
  });
  return events
    .map((e) => e.activityTaskCancelRequestedEventAttributes)
    .filter((a) => !!a)
    .map((a) => ids.get(String(a!.scheduledEventId)) ?? '?');
}

/** A child workflow the workflow started, from its `StartChildWorkflowExecutionInitiated` event. */
export interface StartedChild {
  index: number;
  type: string;
  workflowId: string;
  input: Record<string, unknown> | undefined;
}

/** Child workflows started in `events`, in history order. */
export function startedChildren(events: HistoryEvent[]): StartedChild[] {
  const out: StartedChild[] = [];
  events.forEach((e, index) => {
    const a = e.startChildWorkflowExecutionInitiatedEventAttributes;
    if (a)
      out.push({ index, type: a.workflowType?.name ?? '', workflowId: a.workflowId ?? '', input: decode(a.input) });
  });
  return out;
}

/** The continue-as-new that ends a run's history: the next run's id and input; null when none. */
export function continuedAsNew(
  events: HistoryEvent[],
): { newRunId: string; input: RebuildCatalogInput | undefined } | null {
  const a = events[events.length - 1]?.workflowExecutionContinuedAsNewEventAttributes;
  return a ? { newRunId: a.newExecutionRunId ?? '', input: decode<RebuildCatalogInput>(a.input) } : null;
}

/** The failure a run's history ends with (`WorkflowExecutionFailed`), or null. */
export function workflowFailure(events: HistoryEvent[]): temporal.api.failure.v1.IFailure | null {
  return events[events.length - 1]?.workflowExecutionFailedEventAttributes?.failure ?? null;
}

/** The `RebuildPhase` search attribute of the workflow's latest run. */
export async function phaseAttribute(handle: WorkflowHandle): Promise<string | undefined> {
  return (await handle.describe()).typedSearchAttributes.get(RebuildPhaseKey);
}

/** The fields `keys` of `o`, for comparing part of a progress answer with `deepEqual`. */
export function pick<T extends object, K extends keyof T>(o: T, keys: readonly K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const k of keys) out[k] = o[k];
  return out;
}
