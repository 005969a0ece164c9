/** `catalog-rebuild rollback`: one step back to the previous retained version, or to the version named. */
import { rollbackCatalog } from '../../lib/catalog/rollback';
import type { CommandContext } from './context';
import { withCatalogPool } from './context';

/**
 * Rolls the catalog back (one transaction under the publish lock): one step back, to the newest
 * retained version older than the active one, or with `toVersion` to that retained version; prints
 * both versions and how to return.
 * @returns 0.
 * @throws NothingToRollBackError (the CLI exits 1) when there is no such version; nothing changes.
 */
export async function rollbackCommand(
  ctx: CommandContext,
  o: { catalog: string; toVersion?: number },
): Promise<number> {
  return withCatalogPool(ctx, async (pool) => {
    const r = await rollbackCatalog(
      pool,
      o.catalog,
      o.toVersion === undefined ? {} : { toVersion: String(o.toVersion) },
    );
    ctx.out(`catalog ${r.catalog}: version ${r.versionId} is active again; version ${r.replacedVersionId} retired`);
    ctx.out(
      `  back to version ${r.replacedVersionId}: catalog-rebuild rollback --catalog ${r.catalog} --to-version ${r.replacedVersionId}`,
    );
    return 0;
  });
}
