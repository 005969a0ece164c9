/**
 * Workflows of catalog-rebuild.
 * RebuildCatalog plans a version, copies fixed pages (each one PostgreSQL transaction, heartbeating),
 * seals and reconciles it per day bucket, repairs mismatched buckets with RepairBucket children,
 * and publishes it atomically with the PublishCatalog child.
 */
export { RebuildCatalog } from './rebuild-catalog';
export { RepairBucket } from './repair-bucket';
export { PublishCatalog } from './publish-catalog';
