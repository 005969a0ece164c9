/**
 * Waiting on events of a rebuild instead of waiting for time to pass: that a held page window
 * starts nothing, that Temporal timed out a dead worker's page attempts, that a worker saw the
 * Temporal server go away, that a version's page transactions ended, and that a namespace lists
 * the search attributes.
 */
import type { Connection, WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { Pool } from 'pg';
import { getProgress, setThrottle } from '../../client';
import { REQUIRED_SEARCH_ATTRIBUTES } from '../../workflows/search-attributes';
import type { WorkerProcess } from './harness';
import { waitFor } from './wait';

const { PendingActivityState } = temporal.api.enums.v1;

/** The rebuild's latest run (after continue-as-new or a reset), whatever run `handle` was made for. */
const latestRun = (handle: WorkflowHandle): WorkflowHandle => handle.client.getHandle(handle.workflowId);

/** Activity ids of the `copyPage` activities the latest run scheduled, in history order. */
export async function scheduledPageActivities(handle: WorkflowHandle): Promise<string[]> {
  const h = await latestRun(handle).fetchHistory();
  return (h.events ?? [])
    .map((e) => e.activityTaskScheduledEventAttributes)
    .filter((a) => a?.activityType?.name === 'copyPage')
    .map((a) => a!.activityId!);
}

/** The `copyPage` activities pending on the latest run (`describe`): id, state and attempt. */
export async function pendingPageActivities(
  handle: WorkflowHandle,
): Promise<{ activityId: string; state: number; attempt: number }[]> {
  const d = await latestRun(handle).describe();
  return (d.raw.pendingActivities ?? [])
    .filter((a) => a.activityType?.name === 'copyPage')
    .map((a) => ({ activityId: a.activityId ?? '', state: a.state ?? 0, attempt: a.attempt ?? 0 }));
}

/**
 * Sessions of the catalog database inside a page transaction of `versionId` (tagged
 * `…:page:<version>:<page>` for the transaction's length), a zombie attempt's included.
 */
export async function openPageSessions(catalogPool: Pool, versionId: string): Promise<number> {
  const { rows } = await catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = current_database() AND application_name LIKE '%:page:' || $1 || ':%'`,
    [versionId],
  );
  return rows[0].n;
}

/**
 * Waits for proof that the page window of a held rebuild (paused by the `pause` signal, or by an
 * operator pausing a page activity) starts nothing, instead of watching it for a while:
 * 1. no `copyPage` activity of the latest run is pending, but for operator-paused ones whose
 *    attempt ended (state PAUSED): no attempt runs on any worker;
 * 2. with `catalogPool`: no session of the version is inside a page transaction (a zombie
 *    attempt's would be);
 * 3. a `setThrottle` update that changes nothing (the concurrency in force) completed after (1)
 *    and (2): the run's window ran again and did what it would do (it is retried while a
 *    continue-as-new replaces the run).
 * A page committed after this needs an activity the history shows.
 * @returns the `copyPage` activity ids of the latest run's history after the update.
 * @throws Error (from `waitFor`) when a step does not happen within `timeoutMs` (default 60,000 ms).
 */
export async function heldWindow(
  handle: WorkflowHandle,
  o: { catalogPool?: Pool; timeoutMs?: number } = {},
): Promise<string[]> {
  const timeoutMs = o.timeoutMs ?? 60_000;
  await waitFor(
    'no page attempt running (only operator-paused pages pending)',
    async () =>
      (await pendingPageActivities(handle)).every(
        (a) => a.state === PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED,
      ),
    { timeoutMs, intervalMs: 50 },
  );
  const pool = o.catalogPool;
  if (pool) {
    const { versionId } = await getProgress(latestRun(handle), 10_000);
    if (versionId)
      await waitFor(
        'no page transaction of the version open',
        async () => (await openPageSessions(pool, versionId)) === 0,
        {
          timeoutMs,
          intervalMs: 50,
        },
      );
  }
  await waitFor(
    'a setThrottle update that changes nothing to complete',
    async () => {
      const run = latestRun(handle);
      const { concurrency } = await getProgress(run, 10_000);
      await setThrottle(run, { concurrency });
      return true;
    },
    { timeoutMs, intervalMs: 100 },
  );
  return scheduledPageActivities(handle);
}

/**
 * Waits until Temporal gave up every page attempt of a dead worker: no `copyPage` activity of the
 * latest run is running (state STARTED) any more, and at least one was retried (attempt 2 or
 * more): the heartbeat timeout of the attempts that were in flight passed.
 * @throws Error (from `waitFor`) after `timeoutMs` (default 60,000 ms).
 */
export async function deadAttemptsTimedOut(handle: WorkflowHandle, timeoutMs = 60_000): Promise<void> {
  await waitFor(
    "Temporal to time out the dead worker's page attempts",
    async () => {
      const pending = await pendingPageActivities(handle);
      return (
        pending.some((a) => a.attempt >= 2) &&
        pending.every((a) => a.state !== PendingActivityState.PENDING_ACTIVITY_STATE_STARTED)
      );
    },
    { timeoutMs, intervalMs: 50 },
  );
}

/** Times (ms since epoch) of the worker's log lines saying a call to the Temporal server failed as unavailable. */
function unavailableAt(output: string): number[] {
  // Core SDK lines: `<ISO time> WARN temporalio_client::retry: gRPC call … retried N times error=Status { code: Unavailable, …`
  // (with colour codes).
  const plain = output.replace(/\u001b\[[0-9;]*m/g, '');
  const times: number[] = [];
  for (const m of plain.matchAll(/^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+WARN\b.*code: Unavailable/gm))
    times.push(Date.parse(m[1].replace(/(\.\d{3})\d*Z$/, '$1Z')));
  return times;
}

/**
 * Waits until one of the workers logged, at or after `sinceMs` (ms since epoch), that a call to the
 * Temporal server failed as unavailable: the SDK logs it after a few retries of a call it must
 * make (a task's completion, a heartbeat), so a worker with work in flight saw the server gone.
 * @throws Error (from `waitFor`) after `timeoutMs` (default 30,000 ms).
 */
export async function serverDownSeen(
  workers: Pick<WorkerProcess, 'output'>[],
  sinceMs: number,
  timeoutMs = 30_000,
): Promise<void> {
  await waitFor(
    'a worker to log that the Temporal server is unavailable',
    () => workers.some((w) => unavailableAt(w.output()).some((t) => t >= sinceMs - 1)),
    { timeoutMs, intervalMs: 50 },
  );
}

/**
 * Waits until namespace `namespace` lists the search attributes the worker checks at start
 * (`CatalogName`, `RebuildPhase`), as its check reads them (`listSearchAttributes`).
 * @throws Error (from `waitFor`) after `timeoutMs` (default 30,000 ms).
 */
export async function searchAttributesListed(
  connection: Connection,
  namespace = 'default',
  timeoutMs = 30_000,
): Promise<void> {
  await waitFor(
    `the search attributes on namespace ${namespace}`,
    async () => {
      const r = await connection.operatorService.listSearchAttributes({ namespace });
      const have = new Set([...Object.keys(r.customAttributes ?? {}), ...Object.keys(r.systemAttributes ?? {})]);
      return REQUIRED_SEARCH_ATTRIBUTES.every((n) => have.has(n));
    },
    { timeoutMs, intervalMs: 100 },
  );
}

/**
 * What a rebuild that did not finish was doing, for a test's failure message: the latest run's
 * status, its pending activities (type, state, attempt, last failure), the progress query when a
 * worker answers, and the last `tailChars` characters of the workers' output.
 */
export async function stuckRebuildReport(
  handle: WorkflowHandle,
  workers: WorkerProcess[],
  tailChars = 4_000,
): Promise<string> {
  const lines: string[] = [];
  try {
    const d = await latestRun(handle).describe();
    lines.push(`run ${d.runId}: ${d.status.name}`);
    for (const a of d.raw.pendingActivities ?? []) {
      lines.push(
        `pending ${a.activityType?.name} ${a.activityId}: state ${a.state} attempt ${a.attempt}` +
          (a.lastFailure?.message ? `, last failure: ${a.lastFailure.message}` : '') +
          (a.lastWorkerIdentity ? ` (on ${a.lastWorkerIdentity})` : ''),
      );
    }
  } catch (err) {
    lines.push(`describe failed: ${(err as Error).message}`);
  }
  try {
    const p = await getProgress(handle);
    lines.push(`progress: ${JSON.stringify(p)}`);
  } catch (err) {
    lines.push(`progress query failed: ${(err as Error).message}`);
  }
  for (const w of workers) lines.push(`--- worker ${w.pid} output (tail) ---`, w.output().slice(-tailChars));
  return lines.join('\n');
}
