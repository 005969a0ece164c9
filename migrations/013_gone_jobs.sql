-- catalog-rebuild catalog schema, migration 13 (additive): jobs gone from the source after the plan.
--
-- A restic snapshot or borg archive that was in the staged listing at plan and is no longer in the
-- repository when its page lists its files (`forget --prune`, `borg prune` meanwhile) is left out of
-- the version: its page writes neither its job row nor its files, and records it here in the same
-- transaction. A replay of the page (the ledger says committed) and every reconciliation round read
-- the same rows: the staged listing without them is the source side, and their count is reported
-- with the delta (`N jobs gone from the source after the plan`). Deleted with the version's rows.
CREATE TABLE IF NOT EXISTS gone_job (
  version_id bigint      NOT NULL,
  job_key    bigint      NOT NULL,
  job_id     text        NOT NULL,
  bucket     date,
  page_no    integer     NOT NULL,
  reason     text        NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (version_id, job_key)
);
