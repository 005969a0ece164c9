/**
 * The demo's identity: every name the demo uses on shared servers (databases, catalog, task queue,
 * Worker Deployment) carries a short hash of the checkout's absolute path, so two clones on one
 * PostgreSQL server and one Temporal dev server never see or touch each other's data, workers or
 * rebuilds, while a second demo in the same clone finds (and replaces) its own catalog.
 */
import { createHash } from 'node:crypto';
import * as path from 'node:path';

/** Names of one checkout's demo. */
export interface DemoIdentity {
  /** 8 hex digits of the sha256 of the checkout's absolute path. */
  id: string;
  /** Absolute path of the checkout (the folder holding package.json). */
  projectRoot: string;
  /** Catalog name, `demo-<id>`: workflow ids (`catalog-rebuild/demo-<id>`) are per namespace. */
  catalog: string;
  /** Source name in the demo's configuration (the same in every checkout: it is local to the configuration). */
  source: string;
  /** The generated director database, `catalog_rebuild_demo_<id>_source` (regenerated every run). */
  sourceDatabase: string;
  /** The catalog database, `catalog_rebuild_demo_<id>` (kept across runs). */
  catalogDatabase: string;
  /** Task queue of the demo's workers, `catalog-rebuild-demo-<id>`. */
  taskQueue: string;
  /** Worker Deployment of the demo's workers (`CATALOG_REBUILD_DEPLOYMENT`), `catalog-rebuild-demo-<id>`. */
  deploymentName: string;
}

/** The demo identity of the checkout at `projectRoot` (pure; the same path gives the same names). */
export function demoIdentity(projectRoot: string): DemoIdentity {
  const root = path.resolve(projectRoot);
  const id = createHash('sha256').update(root).digest('hex').slice(0, 8);
  return {
    id,
    projectRoot: root,
    catalog: `demo-${id}`,
    source: 'director',
    sourceDatabase: `catalog_rebuild_demo_${id}_source`,
    catalogDatabase: `catalog_rebuild_demo_${id}`,
    taskQueue: `catalog-rebuild-demo-${id}`,
    deploymentName: `catalog-rebuild-demo-${id}`,
  };
}
