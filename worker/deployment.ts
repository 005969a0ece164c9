/**
 * Worker Deployment housekeeping of a starting worker: when its deployment has no current version
 * yet (first install, a fresh dev server, a test), the worker makes its own build current, so new
 * rebuilds run on it. When a current version exists it is never changed here: rolling a new build
 * out is the operator's step (`temporal worker deployment set-current-version`, docs/operations.md).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { WorkerBuild } from './build-id';

/** What {@link adoptIfNoCurrentVersion} did. */
export type Adoption =
  | { kind: 'adopted' }
  | { kind: 'has-current'; buildId: string }
  | { kind: 'gave-up'; reason: string }
  | { kind: 'stopped' };

/** gRPC status codes the adoption waits out: the deployment or version is not registered yet. */
const NOT_YET = new Set([5 /* NOT_FOUND */, 9 /* FAILED_PRECONDITION */, 14 /* UNAVAILABLE */]);

/**
 * Waits until the server knows `build` (its first poll registers it), then makes it the current
 * version of its deployment if the deployment has none (with `opts.force`: whatever the current one
 * is, an explicit rollout). A concurrent worker doing the same is resolved by the deployment's
 * conflict token: one of them wins, the other then sees a current version.
 * @param opts.timeoutMs how long to keep trying (default 60,000 ms); `signal` stops it early and
 *   cancels its call in flight, so that once it settled no call (nor a retry the client's gRPC
 *   interceptor scheduled) uses the connection: the caller may close it then.
 * @returns what happened; never throws (errors end in `gave-up` with the reason).
 */
export async function adoptIfNoCurrentVersion(
  client: Client,
  namespace: string,
  build: WorkerBuild,
  opts: { identity: string; timeoutMs?: number; signal?: AbortSignal; force?: boolean },
): Promise<Adoption> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  let last = 'the deployment is not registered yet';
  const signal = opts.signal;
  const call = <T>(fn: () => Promise<T>): Promise<T> => (signal ? client.connection.withAbortSignal(signal, fn) : fn());
  while (Date.now() < deadline) {
    if (signal?.aborted) return { kind: 'stopped' };
    try {
      const d = await call(() =>
        client.workflowService.describeWorkerDeployment({ namespace, deploymentName: build.deploymentName }),
      );
      const current = d.workerDeploymentInfo?.routingConfig?.currentDeploymentVersion?.buildId;
      if (current && (current === build.buildId || !opts.force)) return { kind: 'has-current', buildId: current };
      const registered = (d.workerDeploymentInfo?.versionSummaries ?? []).some(
        (v) => v.deploymentVersion?.buildId === build.buildId,
      );
      if (registered) {
        await call(() =>
          client.workflowService.setWorkerDeploymentCurrentVersion({
            namespace,
            deploymentName: build.deploymentName,
            buildId: build.buildId,
            conflictToken: d.conflictToken,
            identity: opts.identity,
          }),
        );
        return { kind: 'adopted' };
      }
      last = `build ${build.buildId} is not registered in deployment ${build.deploymentName} yet`;
    } catch (err) {
      if (signal?.aborted) return { kind: 'stopped' };
      const code = (err as { code?: number }).code;
      last = err instanceof Error ? err.message : String(err);
      if (code === undefined || !NOT_YET.has(code)) return { kind: 'gave-up', reason: last };
    }
    await sleep(500, undefined, { signal }).catch(() => undefined);
  }
  return { kind: 'gave-up', reason: last };
}

/** The line a worker logs for an {@link Adoption} of `build`; null when there is nothing to say. */
export function adoptionLine(a: Adoption, build: WorkerBuild): string | null {
  const who = `deployment ${build.deploymentName}, build ${build.buildId}`;
  switch (a.kind) {
    case 'adopted':
      return `${who}: the deployment had no current version; this build is current now`;
    case 'has-current':
      return a.buildId === build.buildId
        ? `${who}: this build is the current version`
        : `${who}: the current version is build ${a.buildId}; new rebuilds run there until an operator makes this build current (temporal worker deployment set-current-version)`;
    case 'gave-up':
      return `${who}: could not check the deployment's current version: ${a.reason}`;
    case 'stopped':
      return null;
  }
}
