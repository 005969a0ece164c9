/** `catalog-rebuild rollback`: re-activates the previous retained version of a catalog. */
import { rollbackCatalog } from '../../lib/catalog/rollback';
import type { CommandContext } from './context';
import { withCatalogPool } from './context';

/**
 * Rolls the catalog back (one transaction under the publish lock) and prints both versions.
 * @returns 0.
 * @throws NothingToRollBackError when there is no active or no retained version with rows.
 */
export async function rollbackCommand(ctx: CommandContext, o: { catalog: string }): Promise<number> {
  return withCatalogPool(ctx, async (pool) => {
    const r = await rollbackCatalog(pool, o.catalog);
    ctx.out(`catalog ${r.catalog}: version ${r.versionId} is active again; version ${r.replacedVersionId} retired`);
    return 0;
  });
}
