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
 * Thrown when a rollback cannot be done: the catalog has no active version, no retained version
 * older than the active one, or the version asked for is not retained (dropped, failed, unknown,
 * or already active). Code `NOTHING_TO_ROLL_BACK`.
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
 * Re-activates a retained version of `catalog`, in ONE transaction under the catalog's publish lock
 * (the lock publish and plan take, so it never interleaves with a publish): the `active` pointer
 * flips to it (status `active`, `published_at` now, so retention counts it as the newest), the
 * version that was active becomes `retired` (rows kept), and a `rolled_back` event is recorded.
 * Readers of `active_jobs` see either the old or the new version, never a mix.
 *
 * Without `toVersion` it goes ONE STEP BACK: to the newest retained version OLDER than the active
 * one (by version id, i.e. by when it was planned), so each rollback goes further back and never
 * toggles to the version it just replaced. With `toVersion` it re-activates exactly that retained
 * version, older or newer (the way back after a rollback).
 * A retained version is `retired` with its partition table attached (no detach pending) and holding
 * at least one row. Versions being dropped by retirement are marked `dropped` under the same lock
 * before their table is detached, so a rollback never picks one.
 * @param pool pool on the catalog database.
 * @param catalog catalog name.
 * @param opts.toVersion the version to re-activate (decimal text).
 * @returns the re-activated and the replaced version.
 * @throws NothingToRollBackError (code NOTHING_TO_ROLL_BACK), changing nothing, when the catalog
 *   has no active version, no retained version older than the active one (naming the retained
 *   newer ones and `--to-version`), or `toVersion` is not a retained version of the catalog
 *   (naming its status and the retained versions).
 */
export async function rollbackCatalog(
  pool: Pool,
  catalog: string,
  opts: { toVersion?: string } = {},
): Promise<RollbackResult> {
  return withTransaction(pool, async (c) => {
    await lockCatalogForPublish(c, catalog);
    const current = await activeVersionId(c, catalog, { forUpdate: true });
    if (!current) throw new NothingToRollBackError(`catalog ${catalog} has no active version: nothing to roll back`);
    const retained = await retainedVersions(c, catalog);
    const list = (ids: string[]) => (ids.length ? ids.join(', ') : 'none');
    let target: string | undefined;
    if (opts.toVersion !== undefined) {
      const want = opts.toVersion;
      if (want === current)
        throw new NothingToRollBackError(`version ${want} is already the active version of catalog ${catalog}`);
      if (!retained.includes(want)) {
        const status = await versionStatusOf(c, catalog, want);
        throw new NothingToRollBackError(
          `version ${want} of catalog ${catalog} ${status === null ? 'does not exist' : `is ${status}${status === 'dropped' ? ' (its rows are gone)' : ''}`}: ` +
            `only a retired version that still holds its rows can be re-activated; retained versions: ${list(retained)}`,
        );
      }
      target = want;
    } else {
      target = retained.find((v) => BigInt(v) < BigInt(current));
      if (!target) {
        const newer = retained.filter((v) => BigInt(v) > BigInt(current));
        throw new NothingToRollBackError(
          `catalog ${catalog} has no retained version older than its active version ${current} (retention dropped the older ones): nothing to roll back to` +
            (newer.length
              ? `; newer retained versions: ${list(newer)} (rollback --to-version N re-activates one)`
              : ''),
        );
      }
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

/** The status of version `versionId` of `catalog`; null when the catalog has no such version. */
async function versionStatusOf(c: PoolClient, catalog: string, versionId: string): Promise<string | null> {
  if (!/^\d{1,19}$/.test(versionId)) return null;
  const r = await c.query<{ status: string }>(
    `SELECT status FROM version WHERE catalog_name = $1 AND version_id = $2`,
    [catalog, versionId],
  );
  return r.rows[0]?.status ?? null;
}

/**
 * The retained versions of `catalog`, newest (highest version id) first: `retired`, table attached
 * (no detach pending) and holding at least one row; locks the candidates' version rows.
 */
async function retainedVersions(c: PoolClient, catalog: string): Promise<string[]> {
  const candidates = await c.query<{ version_id: string }>(
    `SELECT v.version_id::text FROM version v
       WHERE v.catalog_name = $1 AND v.status = 'retired'
         AND EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class t ON t.oid = i.inhrelid
                     WHERE t.relname = 'job_v' || v.version_id::text AND i.inhparent = 'job'::regclass AND NOT i.inhdetachpending)
       ORDER BY v.version_id DESC
       FOR UPDATE OF v`,
    [catalog],
  );
  const out: string[] = [];
  for (const cand of candidates.rows) {
    const has = await c.query<{ has: boolean }>(
      format('SELECT EXISTS (SELECT 1 FROM %I) AS has', partitionName(cand.version_id)),
    );
    if (has.rows[0].has) out.push(cand.version_id);
  }
  return out;
}
