-- catalog-rebuild catalog schema, migration 11 (additive): file records of restic and borg listings.
--
-- A listing source's file records are read by the page itself (its filesCommand, once per snapshot
-- or archive). What each job's listing held when its page read it, counted and digested from the
-- page stage in the page transaction, is the source side of that version's file reconciliation
-- (a snapshot's file list never changes; there is no source database to count again).
-- `hash_sum` is the sum of the records' hashtextextended row hashes (lib/fingerprint.ts), exact.
CREATE TABLE IF NOT EXISTS listing_file_stat (
  version_id bigint NOT NULL,
  job_key    bigint NOT NULL,
  job_id     text NOT NULL,
  bucket     date,
  files      bigint NOT NULL,
  hash_sum   numeric NOT NULL,
  PRIMARY KEY (version_id, job_key)
);
