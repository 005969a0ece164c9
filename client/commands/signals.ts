/** `catalog-rebuild pause | resume | cancel`: signals to a catalog's rebuild. */
import { cancel, pause, rebuildHandle, resume } from '../index';
import type { CommandContext } from './context';
import { withTemporal } from './context';

/** The signals the CLI sends, by command name. */
export type SignalName = 'pause' | 'resume' | 'cancel';

const SEND: Record<SignalName, (h: Parameters<typeof pause>[0]) => Promise<void>> = {
  pause,
  resume,
  cancel: (h) => cancel(h, 'cancelled from the CLI'),
};

/**
 * Sends `signal` to the catalog's rebuild (the latest run) and prints the workflow id.
 * `cancel` carries the reason "cancelled from the CLI".
 * @returns 0.
 * @throws the Temporal error when the workflow does not exist or is closed.
 */
export async function signalCommand(ctx: CommandContext, signal: SignalName, o: { catalog: string }): Promise<number> {
  return withTemporal(ctx, async (s) => {
    const handle = rebuildHandle(s.client, o.catalog);
    await SEND[signal](handle);
    ctx.out(`${signal} sent to ${handle.workflowId}`);
    return 0;
  });
}
