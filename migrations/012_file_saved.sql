-- catalog-rebuild catalog schema, migration 12 (additive): a file record is saved when its
-- FileIndex is positive.
--
-- Bacula and Bareos write a record that the job did not save with FileIndex 0, and in Accurate mode
-- a file deleted since the previous job with a negative FileIndex (and an all-zero LStat); their own
-- queries ask `FileIndex > 0` for "saved". Versions written before this migration stored
-- `deleted = (file_index = 0)`, so the reader view computes `deleted` from `file_index` for every
-- version instead of trusting the stored column (no backfill of file tables that may hold 10^9
-- rows). A record without FileIndex keeps its stored `deleted`.
CREATE OR REPLACE VIEW active_files AS
SELECT v.catalog_name,
       f.job_id, f.file_id, f.path, f.name, f.path_bytes, f.name_bytes, f.file_index, f.delta_seq,
       CASE WHEN f.file_index IS NULL THEN f.deleted ELSE f.file_index <= 0 END AS deleted,
       f.size, f.mode, f.uid, f.gid, f.mtime, f.md5, f.lstat, v.version_id
FROM active a
JOIN version v ON v.version_id = a.version_id
JOIN file f ON f.version_id = a.version_id;
GRANT SELECT ON active_files TO catalog_reader;
