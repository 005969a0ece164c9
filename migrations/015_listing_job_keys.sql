-- catalog-rebuild catalog schema, migration 15 (additive): job keys of listing sources that stay
-- the same across listings.
--
-- A listing source (restic snapshots, borg archives) has no numeric job id: its paging key, the
-- catalog's `job_key`, was the record's position in the staged listing, so forgetting one old
-- snapshot renumbered every later one, and with them the file ids derived from the key
-- (`job key × 10^10 + position`). A key is now given once per source and listed id (the snapshot
-- or archive id), the first time a plan sees it, in listing order, above every key the source has:
-- the same snapshot keeps its key, and its files their ids, in every later version. A record
-- without an id, or quarantined (its id may repeat a good record's), is keyed by the listing's
-- sha256 and its position.
CREATE TABLE IF NOT EXISTS listing_job_key (
  source_name  text   NOT NULL,
  job_id       text   NOT NULL,
  job_key      bigint NOT NULL CHECK (job_key > 0),
  first_seen   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source_name, job_id),
  UNIQUE (source_name, job_key)
);
