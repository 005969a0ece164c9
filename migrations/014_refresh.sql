-- catalog-rebuild catalog schema, migration 14 (additive): versions that share unchanged rows.
--
-- A refresh (`start --refresh`) builds the next version from the active one plus what changed in
-- the source since it. It does not copy unchanged rows: a version is made of segments, the tables
-- `job_v<n>` / `file_v<n>` written by it and by the versions it was refreshed from
-- (`version.segment_ids`), and a row leaves the versions from `superseded_by` on (a refresh that
-- replaced or deleted it sets it, in its page transaction). A row of segment s is in version v when
-- s is one of v's `segment_ids` and `superseded_by` is NULL or greater than v. A full rebuild's
-- version is its own one segment, so its rows are read as before.
--
-- `row_hash` is the 64-bit hash, computed by the source at the page's read, of the row as the
-- product writes it (all its columns after the joins and the time conversion), plus the director's
-- own file facts (JobFiles, PurgedFiles): a refresh compares it with the source's hash of each job
-- written since the active version's plan. `version_range` keeps per key range of a version its
-- jobs (and, for a full rebuild's pages, the sum of their hashes), so a refresh finds the ranges
-- where jobs were deleted, and its reconciliation counts, without scanning the catalog.

ALTER TABLE version ADD COLUMN IF NOT EXISTS base_version_id bigint REFERENCES version (version_id);
ALTER TABLE version ADD COLUMN IF NOT EXISTS legacy_encoding text;
ALTER TABLE version ADD COLUMN IF NOT EXISTS row_mapping integer NOT NULL DEFAULT 0;
-- The source's transaction horizon when the version was planned (an xid8 as text: the oldest
-- transaction still running then): a director's rows written after it are the next refresh's candidates.
ALTER TABLE version ADD COLUMN IF NOT EXISTS source_horizon text;

-- The segments of each version (its own id first); empty once the version is dropped. An array, so
-- the reader views join the partitions through `= ANY (segment_ids)`, which PostgreSQL prunes when
-- the statement runs: other versions' tables (a rebuild's, loading without indexes) are not scanned.
ALTER TABLE version ADD COLUMN IF NOT EXISTS segment_ids bigint[];
UPDATE version SET segment_ids = CASE WHEN status = 'dropped' THEN '{}' ELSE ARRAY[version_id] END
WHERE segment_ids IS NULL;
CREATE INDEX IF NOT EXISTS version_segment_ids_idx ON version USING gin (segment_ids);

-- Every version is a segment of itself from its first moment, whoever inserts it.
CREATE OR REPLACE FUNCTION catalog_version_own_segment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.segment_ids IS NULL THEN
    NEW.segment_ids := ARRAY[NEW.version_id];
  END IF;
  RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS version_own_segment ON version;
CREATE TRIGGER version_own_segment BEFORE INSERT ON version FOR EACH ROW EXECUTE FUNCTION catalog_version_own_segment();

ALTER TABLE job ADD COLUMN IF NOT EXISTS row_hash bigint;
ALTER TABLE job ADD COLUMN IF NOT EXISTS superseded_by bigint;
ALTER TABLE file ADD COLUMN IF NOT EXISTS superseded_by bigint;
CREATE INDEX IF NOT EXISTS job_superseded_idx ON job (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX IF NOT EXISTS file_superseded_idx ON file (superseded_by) WHERE superseded_by IS NOT NULL;

-- Per key range of a version: its jobs and the sum modulo 2^64 of their row hashes.
CREATE TABLE IF NOT EXISTS version_range (
  version_id  bigint  NOT NULL REFERENCES version (version_id),
  range_no    integer NOT NULL,
  first_key   bigint  NOT NULL,
  last_key    bigint  NOT NULL,
  jobs        bigint  NOT NULL,
  digest      text    NOT NULL,
  PRIMARY KEY (version_id, range_no)
);

-- Jobs per dated bucket of a version, counted when it is sealed (a refresh's from its base's and its
-- changes): the shrink guard compares them without scanning either version.
CREATE TABLE IF NOT EXISTS version_bucket (
  version_id  bigint NOT NULL REFERENCES version (version_id),
  bucket      date   NOT NULL,
  jobs        bigint NOT NULL,
  PRIMARY KEY (version_id, bucket)
);

-- The jobs each page of a refresh copies, deletes or replaces (a refresh's pages are lists of keys).
CREATE TABLE IF NOT EXISTS plan_page_key (
  version_id  bigint  NOT NULL REFERENCES version (version_id),
  page_no     integer NOT NULL,
  job_key     bigint  NOT NULL,
  PRIMARY KEY (version_id, page_no, job_key)
);

CREATE OR REPLACE VIEW active_jobs AS
SELECT v.catalog_name,
       j.job_id, j.job, j.job_name, j.client, j.type, j.level, j.status,
       j.sched_time, j.start_time, j.end_time, j.files, j.bytes, j.pool, j.fileset,
       j.real_end_time, j.read_bytes, j.job_errors, j.prior_job_id, j.job_tdate,
       j.vol_session_id, j.vol_session_time, j.comment, j.bucket, v.version_id, j.extra
FROM active a
JOIN version v ON v.version_id = a.version_id
JOIN job j ON j.version_id = ANY (v.segment_ids) AND (j.superseded_by IS NULL OR j.superseded_by > a.version_id);
GRANT SELECT ON active_jobs TO catalog_reader;

CREATE OR REPLACE VIEW active_files AS
SELECT v.catalog_name,
       f.job_id, f.file_id, f.path, f.name, f.path_bytes, f.name_bytes, f.file_index, f.delta_seq,
       CASE WHEN f.file_index IS NULL THEN f.deleted ELSE f.file_index <= 0 END AS deleted,
       f.size, f.mode, f.uid, f.gid, f.mtime, f.md5, f.lstat, v.version_id
FROM active a
JOIN version v ON v.version_id = a.version_id
JOIN file f ON f.version_id = ANY (v.segment_ids) AND (f.superseded_by IS NULL OR f.superseded_by > a.version_id);
GRANT SELECT ON active_files TO catalog_reader;
