/**
 * Rollback of a catalog to its previous version (design.md: version lifecycle; "Rollback takes the
 * publish lock"). Library code for `catalog-rebuild rollback --catalog NAME`.
 */
import { Pool } from 'pg';
import format from 'pg-format';
import { partitionName, PUBLISH_LOCK_SQL, recordEvent } from './catalog';
import { withTransaction } from './db';
import { CatalogRebuildError, FailureType } from './errors';

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
    await c.query(PUBLISH_LOCK_SQL, [catalog]);
    const cur = await c.query<{ version_id: string }>(`SELECT version_id::text FROM active WHERE catalog_name = $1 FOR UPDATE`, [catalog]);
    if (!cur.rowCount) throw new NothingToRollBackError(`catalog ${catalog} has no active version: nothing to roll back`);
    const current = cur.rows[0].version_id;
    const candidates = await c.query<{ version_id: string }>(
      `SELECT v.version_id::text FROM version v
       WHERE v.catalog_name = $1 AND v.status = 'retired'
         AND EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class t ON t.oid = i.inhrelid
                     WHERE t.relname = 'job_v' || v.version_id::text AND i.inhparent = 'job'::regclass AND NOT i.inhdetachpending)
       ORDER BY v.published_at DESC NULLS LAST, v.version_id DESC
       FOR UPDATE OF v`,
      [catalog],
    );
    let target: string | null = null;
    for (const cand of candidates.rows) {
      const has = await c.query<{ has: boolean }>(format('SELECT EXISTS (SELECT 1 FROM %I) AS has', partitionName(cand.version_id)));
      if (has.rows[0].has) {
        target = cand.version_id;
        break;
      }
    }
    if (!target) {
      throw new NothingToRollBackError(
        `catalog ${catalog} has no retired version that still holds its rows (active version ${current}; retention dropped the older ones): nothing to roll back to`,
      );
    }
    await c.query(`UPDATE active SET version_id = $2, published_at = now() WHERE catalog_name = $1`, [catalog, target]);
    await c.query(`UPDATE version SET status = 'active', published_at = now() WHERE version_id = $1`, [target]);
    await c.query(`UPDATE version SET status = 'retired' WHERE version_id = $1`, [current]);
    await recordEvent(c, {
      catalog,
      versionId: target,
      kind: 'rolled_back',
      message: `rolled back: version ${target} re-activated, version ${current} retired`,
      details: { versionId: target, replacedVersionId: current },
    });
    return { catalog, versionId: target, replacedVersionId: current };
  });
}
