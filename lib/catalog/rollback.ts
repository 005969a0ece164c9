/**
 * Rollback of a catalog to its previous version (design.md: version lifecycle; "Rollback takes the
 * publish lock"). Library code for `catalog-rebuild rollback --catalog NAME`.
 */
import type { Pool, PoolClient } from 'pg';
import format from 'pg-format';
import { withTransaction } from '../db';
import { CatalogRebuildError, FailureType } from '../errors';
import { appendEvent } from './events';
import { partitionName } from './partitions';
import { activeVersionId, retireVersion } from './publish';
import { lockCatalogForPublish } from './versions';

/**
 * Thrown when a catalog has nothing to roll back to: it has no active version, or no retired
 * version still holds its rows (retention dropped them). Code `NOTHING_TO_ROLL_BACK`.
 */
export class NothingToRollBackError extends CatalogRebuildError {
  constructor(message: string) {
    super(FailureType.NOTHING_TO_ROLL_BACK, message);
  }
}

/** What a rollback did. Version ids are decimal text. */
export interface RollbackResult {
  catalog: string;
  /** The version active now (re-activated). */
  versionId: string;
  /** The version that was active before; now `retired`, its rows kept. */
  replacedVersionId: string;
}

/**
 * Re-activates the most recently retired version of `catalog` that still has its rows, in ONE
 * transaction under the catalog's publish lock (the lock publish and plan take, so it never
 * interleaves with a publish): the `active` pointer flips to it (status `active`, `published_at`
 * now, so retention counts it as the newest), the version that was active becomes `retired`
 * (rows kept), and a `rolled_back` event is recorded. Readers of `active_jobs` see either the
 * old or the new version, never a mix (one pointer update, committed atomically).
 * "Most recently retired" is the highest `published_at` among `retired` versions whose partition
 * table still exists, is attached, and holds at least one row; a second rollback therefore
 * returns to the version just replaced.
 * Versions being dropped by retirement are marked `dropped` under the same lock before their
 * table is detached, so a rollback never picks one.
 * @param pool pool on the catalog database.
 * @param catalog catalog name.
 * @returns the re-activated and the replaced version.
 * @throws NothingToRollBackError (code NOTHING_TO_ROLL_BACK) when the catalog has no active
 *   version or no retired version with rows; nothing is changed then.
 */
export async function rollbackCatalog(pool: Pool, catalog: string): Promise<RollbackResult> {
  return withTransaction(pool, async (c) => {
    await lockCatalogForPublish(c, catalog);
    const current = await activeVersionId(c, catalog, { forUpdate: true });
    if (!current) throw new NothingToRollBackError(`catalog ${catalog} has no active version: nothing to roll back`);
    const target = await latestRetiredWithRows(c, catalog);
    if (!target) {
      throw new NothingToRollBackError(
        `catalog ${catalog} has no retired version that still holds its rows (active version ${current}; retention dropped the older ones): nothing to roll back to`,
      );
    }
    await c.query(`UPDATE active SET version_id = $2, published_at = now() WHERE catalog_name = $1`, [catalog, target]);
    await c.query(`UPDATE version SET status = 'active', published_at = now() WHERE version_id = $1`, [target]);
    await retireVersion(c, current);
    await appendEvent(c, {
      catalog,
      versionId: target,
      kind: 'rolled_back',
      message: `rolled back: version ${target} re-activated, version ${current} retired`,
      details: { versionId: target, replacedVersionId: current },
    });
    return { catalog, versionId: target, replacedVersionId: current };
  });
}

/**
 * The most recently published `retired` version of `catalog` whose table is attached (no detach
 * pending) and holds at least one row, locking the candidates' version rows; null when none.
 */
async function latestRetiredWithRows(c: PoolClient, catalog: string): Promise<string | null> {
  const candidates = await c.query<{ version_id: string }>(
    `SELECT v.version_id::text FROM version v
       WHERE v.catalog_name = $1 AND v.status = 'retired'
         AND EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class t ON t.oid = i.inhrelid
                     WHERE t.relname = 'job_v' || v.version_id::text AND i.inhparent = 'job'::regclass AND NOT i.inhdetachpending)
       ORDER BY v.published_at DESC NULLS LAST, v.version_id DESC
       FOR UPDATE OF v`,
    [catalog],
  );
  for (const cand of candidates.rows) {
    const has = await c.query<{ has: boolean }>(
      format('SELECT EXISTS (SELECT 1 FROM %I) AS has', partitionName(cand.version_id)),
    );
    if (has.rows[0].has) return cand.version_id;
  }
  return null;
}
