/** Fixed names and settings of `npm run demo`. */
export const DEMO = {
  grpcPort: 7233,
  uiPort: 8233,
  catalog: 'demo',
  source: 'director',
  sourceDatabase: 'catalog_rebuild_demo_source',
  catalogDatabase: 'catalog_rebuild_demo',
  /** A queue of its own, so only the demo's workers run the demo's rebuild. */
  taskQueue: 'catalog-rebuild-demo',
  /** Zone of the generated director's wall clock, written into the demo's configuration as the source's `timezone`. */
  timezone: 'UTC',
  seed: 1,
  /** Share of the pages after which the first worker is killed. */
  killAt: 0.3,
  pollMs: 500,
} as const;
