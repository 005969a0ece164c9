/**
 * Workflows of catalog-rebuild (the worker's workflow bundle: every export here is a workflow type).
 * DryRunCatalog (`catalog-rebuild/<catalog>/dry-run-<id>`, `start --dry-run`) plans without making.
 *
 * RebuildCatalog (workflow id `catalog-rebuild/<catalog>`):
 *   1. plan: `planRebuild` fixes the version, the watermark and the pages;
 *   2. copy window: up to N `copyPage` activities in flight, each page one PostgreSQL transaction,
 *      progress only from committed results; pause, resume, cancel and setThrottle act here, and the
 *      run continues as new after its share of pages;
 *   3. verify and repair: `sealVersion`, then `reconcile` per day bucket ⇄ one RepairBucket child per
 *      mismatched bucket, for a bounded number of rounds;
 *   4. publish: the PublishCatalog child applies the shrink guard, flips the active pointer in one
 *      transaction and retires old versions.
 *
 * ScheduledRefresh (`catalog-rebuild/<catalog>/scheduled-<time>`, the action of the catalog's Temporal
 * Schedule) starts or attaches to the catalog's refresh under `catalog-rebuild/<catalog>` and waits
 * for its outcome.
 */
export { RebuildCatalog } from './rebuild-catalog';
export { RepairBucket } from './repair-bucket';
export { PublishCatalog } from './publish-catalog';
export { DryRunCatalog } from './dry-run';
export { ScheduledRefresh } from './scheduled-refresh';
