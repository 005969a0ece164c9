/** `catalog-rebuild throttle`: changes pages in flight and the pause between pages of a running rebuild. */
import { rebuildHandle, setThrottle } from '../index';
import type { CommandContext } from './context';
import { ExitCode, withTemporal } from './context';
import { toRunningRebuild } from './signals';

/** Options of `throttle`; at least one setting is required. */
export interface ThrottleOptions {
  catalog: string;
  /** Pages in flight. */
  concurrency?: number;
  /** Pause between page starts (ms). */
  pauseMs?: number;
}

/**
 * Runs the `setThrottle` update and prints the settings in force.
 * @returns 0.
 * @throws ExitCode 2 when neither setting is given (before connecting); ExitCode 1 when the rebuild
 *   does not exist or has ended; the update's rejection when the workflow refuses the values.
 */
export async function throttleCommand(ctx: CommandContext, o: ThrottleOptions): Promise<number> {
  if (o.concurrency === undefined && o.pauseMs === undefined)
    throw new ExitCode(2, 'throttle needs --concurrency and/or --pause-ms');
  return withTemporal(ctx, async (s) => {
    const handle = rebuildHandle(s.client, o.catalog);
    const r = await toRunningRebuild(handle, o.catalog, 'throttle', () =>
      setThrottle(handle, { concurrency: o.concurrency, pauseBetweenPagesMs: o.pauseMs }),
    );
    ctx.out(`throttle: ${r.concurrency} pages in flight, ${r.pauseBetweenPagesMs} ms between pages`);
    return 0;
  });
}
