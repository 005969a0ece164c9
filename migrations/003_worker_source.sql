-- catalog-rebuild catalog schema, version 3 (additive).
-- Workers record the NAMES of the sources their configuration defines (never their settings), per
-- task queue, at start and every 30 s while they run, so `catalog-rebuild start` can refuse a source
-- no live worker of the task queue serves. Workers of earlier releases never touch this table.
CREATE TABLE IF NOT EXISTS worker_source (
  task_queue       text        NOT NULL,
  -- The worker's Temporal identity (`<pid>@<host>`).
  worker_identity  text        NOT NULL,
  source_name      text        NOT NULL,
  -- When that worker last recorded the name (the catalog database's clock).
  recorded_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_queue, worker_identity, source_name)
);
CREATE INDEX IF NOT EXISTS worker_source_recent_idx ON worker_source (task_queue, recorded_at);
