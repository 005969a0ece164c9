/** `catalog-rebuild pause | resume | cancel`: signals to a catalog's rebuild. */
import { WorkflowNotFoundError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import { cancel, pause, rebuildHandle, resume } from '../index';
import { livePollersOf, readRebuildFacts } from '../rebuild-facts';
import type { RebuildFacts } from '../rebuild-facts';
import { liveWindowSeconds } from '../status';
import type { CommandContext } from './context';
import { ExitCode, withTemporal } from './context';

/** The signals the CLI sends, by command name. */
export type SignalName = 'pause' | 'resume' | 'cancel';

const SEND: Record<SignalName, (h: Parameters<typeof pause>[0]) => Promise<void>> = {
  pause,
  resume,
  cancel: (h) => cancel(h, 'cancelled from the CLI'),
};

/**
 * The line saying a signal waits for a worker: when the rebuild runs and no worker of the build it
 * is pinned to polled within the no-poller window (`windowSeconds`) at `nowMs`; null otherwise.
 * Temporal keeps the signal, but nothing shows it (memo, `status`) until a worker runs it. Pure.
 */
export function signalWaitsLine(
  signal: SignalName,
  f: RebuildFacts,
  nowMs: number,
  windowSeconds: number,
): string | null {
  const run = f.run;
  if (!run || (run.status !== 'RUNNING' && run.status !== 'PAUSED') || f.pollers.error) return null;
  if (livePollersOf(f, nowMs, windowSeconds).length > 0) return null;
  const build = run.build ? ` of build ${run.build.buildId}` : '';
  return `${signal} requested: no worker${build} polls task queue ${f.pollers.taskQueue}; it takes effect, and status shows it, when one runs the rebuild`;
}

/**
 * Runs `send` (a signal or an update to the catalog's rebuild `handle`); when Temporal answers that
 * the workflow does not exist or has closed, says which in an {@link ExitCode} 1:
 * `the rebuild of catalog C (catalog-rebuild/C) has ended (completed): pause not sent; …` or
 * `no rebuild of catalog C exists (workflow catalog-rebuild/C): pause not sent`.
 * @throws ExitCode 1 as above; other errors as they are.
 */
export async function toRunningRebuild<T>(
  handle: WorkflowHandle,
  catalog: string,
  what: string,
  send: () => Promise<T>,
): Promise<T> {
  try {
    return await send();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    const status = await handle.describe().then(
      (d) => d.status.name,
      () => null,
    );
    throw new ExitCode(
      1,
      status
        ? `the rebuild of catalog ${catalog} (${handle.workflowId}) has ended (${status.toLowerCase()}): ${what} not sent; catalog-rebuild status --catalog ${catalog} shows how`
        : `no rebuild of catalog ${catalog} exists (workflow ${handle.workflowId}): ${what} not sent`,
    );
  }
}

/**
 * Sends `signal` to the catalog's rebuild (the latest run) and prints the workflow id, then, when no
 * worker of the rebuild's build polls, that the signal takes effect once one runs.
 * `cancel` carries the reason "cancelled from the CLI".
 * @returns 0.
 * @throws ExitCode 1 when the workflow does not exist or has closed ({@link toRunningRebuild}).
 */
export async function signalCommand(ctx: CommandContext, signal: SignalName, o: { catalog: string }): Promise<number> {
  return withTemporal(ctx, async (s) => {
    const handle = rebuildHandle(s.client, o.catalog);
    await toRunningRebuild(handle, o.catalog, signal, () => SEND[signal](handle));
    ctx.out(`${signal} sent to ${handle.workflowId}`);
    const facts = await readRebuildFacts(s, null, o.catalog, {
      queryTimeoutMs: 0,
      noPollerSeconds: liveWindowSeconds(),
    });
    const waits = signalWaitsLine(signal, facts, Date.now(), liveWindowSeconds());
    if (waits) ctx.out(waits);
    return 0;
  });
}
