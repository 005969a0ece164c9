/**
 * Rollback of a catalog to its previous version; the implementation lives in
 * `lib/catalog/rollback.ts`. Kept so that existing imports of `lib/rollback` resolve.
 */
export { NothingToRollBackError, rollbackCatalog } from './catalog/rollback';
export type { RollbackResult } from './catalog/rollback';
