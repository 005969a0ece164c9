/**
 * The catalog database's data access, one operation per function, grouped by concern:
 * `versions` (version rows, the fence, the publish lock), `partitions` (a version's table),
 * `ledger` (plan pages, the page ledger, attempts), `job-rows` (page writes, checksums, repair
 * reads and deletes), `rejects`, `events` (the event log), `publish` (the active pointer,
 * retention, the shrink guard), `rollback`, `reconcile` (the catalog side of reconciliation), `repair`
 * (a bucket's repair by id span), `files` (a version's file records: table, page stage, page write,
 * indexes), `gone-jobs` (jobs gone from the source after the plan), `file-stats` (the catalog side of file reconciliation, the shrink guard's file counts), and the
 * client's reads: `status` (status fallback), `check` (the backup check), `event-reads` (the events listing), `file-reads` (`files` and `find`).
 * Identifiers are escaped with pg-format's %I; values are always parameters.
 */
export * from './check';
export * from './event-reads';
export * from './events';
export * from './file-reads';
export * from './file-stats';
export * from './files';
export * from './gone-jobs';
export * from './job-rows';
export * from './ledger';
export * from './partitions';
export * from './publish';
export * from './rebuild-health';
export * from './reconcile';
export * from './reject-reads';
export * from './repair';
export * from './refresh-plan';
export * from './rejects';
export * from './rollback';
export * from './segments';
export * from './version-ranges';
export * from './status';
export * from './versions';
export * from './worker-sources';
export * from './listing-files';
export * from './listing-keys';
export * from './listing-changes';
export * from './bucket-figures';
export * from './key-cells';
