/** `catalog-rebuild migrate`: applies the catalog schema migrations. */
import { migrate } from '../../lib/db';
import type { CommandContext } from './context';
import { withCatalogPool } from './context';

/**
 * Applies the pending migrations and prints their numbers, or that the schema is current.
 * @returns 0.
 * @throws SchemaTooNewError when the database has a migration this release does not know.
 */
export async function migrateCommand(ctx: CommandContext): Promise<number> {
  return withCatalogPool(ctx, async (pool) => {
    const done = await migrate(pool);
    ctx.out(done.length ? `applied migrations ${done.join(', ')}` : 'catalog schema is current');
    return 0;
  });
}
