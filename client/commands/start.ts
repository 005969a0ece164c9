/** `catalog-rebuild start`: starts a rebuild, or attaches to the running one of the catalog. */
import { startRebuild } from '../index';
import type { CommandContext } from './context';
import { ExitCode, withTemporal } from './context';
import { waitAndReport } from './outcome';

/** Options of `start` (parsed and range-checked by the CLI). */
export interface StartOptions {
  catalog: string;
  source: string;
  /** Jobs per page. */
  pageSize: number;
  /** Pages in flight. */
  concurrency: number;
  allowShrink: boolean;
  /** Retired versions kept with their rows after the publish. */
  retention: number;
  maxPagesPerRun?: number;
  /** Page heartbeat timeout (ms). */
  heartbeatTimeoutMs?: number;
  /** Wait for the rebuild to end. */
  wait: boolean;
}

/**
 * Starts the rebuild (or attaches to the running one) and prints its workflow id; with `wait`,
 * waits and prints the result.
 * @returns 0; with `wait`, 0 when published, 1 otherwise.
 * @throws ExitCode 1 when the running rebuild has different identifying flags (naming them), or
 *   when the rebuild failed (with `wait`).
 */
export async function startCommand(ctx: CommandContext, o: StartOptions): Promise<number> {
  return withTemporal(ctx, async (s) => {
    const r = await startRebuild(s.client, {
      catalog: o.catalog,
      source: o.source,
      pageSize: o.pageSize,
      concurrency: o.concurrency,
      allowShrink: o.allowShrink,
      retention: o.retention,
      maxPagesPerRun: o.maxPagesPerRun,
      heartbeatTimeoutMs: o.heartbeatTimeoutMs,
    });
    if (r.attached && r.conflicts.length) {
      throw new ExitCode(
        1,
        `a rebuild of ${o.catalog} is already running with different flags: ${r.conflicts.join('; ')}`,
      );
    }
    ctx.out(
      `${r.attached ? 'attached to running' : 'started'} rebuild ${r.handle.workflowId} (task queue ${s.taskQueue})`,
    );
    return o.wait ? waitAndReport(s, o.catalog, ctx.out) : 0;
  });
}
