/** `catalog-rebuild wait`: waits for a catalog's rebuild to end. */
import type { CommandContext } from './context';
import { withTemporal } from './context';
import { waitAndReport } from './outcome';

/**
 * Waits for the rebuild of `catalog` to close and prints its result.
 * @returns 0 when published, 1 otherwise.
 * @throws ExitCode 1 when the rebuild failed or does not exist.
 */
export async function waitCommand(ctx: CommandContext, o: { catalog: string }): Promise<number> {
  return withTemporal(ctx, (s) => waitAndReport(s, o.catalog, ctx.out));
}
