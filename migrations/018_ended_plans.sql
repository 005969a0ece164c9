-- catalog-rebuild catalog schema, migration 18 (additive): rebuilds that ended (cancelled or
-- failed) before their plan committed a version.
--
-- A cancel during the plan waits for the plan's attempt in flight, but an attempt whose worker was
-- frozen or cut off from Temporal is given up by its heartbeat timeout and may still commit
-- later. The rebuild's end takes the catalog's publish lock, finds no version of its
-- (workflow id, first run id) and records them here; a plan transaction takes the same lock and
-- refuses to store a version for ids recorded here. So no version is left `building` under a
-- rebuild that has ended.
CREATE TABLE IF NOT EXISTS ended_plan (
  workflow_id   text        NOT NULL,
  first_run_id  text        NOT NULL,
  catalog_name  text        NOT NULL,
  ended_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workflow_id, first_run_id)
);
