-- catalog-rebuild catalog schema, migration 16 (additive): each page's figures per dated bucket,
-- taken from the rows it wrote as they passed through the worker, inside its transaction.
--
-- A full rebuild's first reconciliation round reads the catalog side from these rows (a few per
-- page) instead of hashing the version's table: per bucket, the jobs written, the sum of their
-- row hashes (computed by the source at the page's read, `job.row_hash`), their bytes, their
-- first and last job key and the jobs with a type, level or status code the product does not
-- know. The source side of that round sums the same row hashes per bucket at the watermark; the
-- table is only counted per bucket (jobs, the plain sum of its stored row hashes, key span), so
-- rows lost, added or replaced outside a page transaction are found. A page written row by row
-- (the catalog refused a streamed value) stores none, and `page.bucket_figures` stays false: the
-- round then hashes the table as before, as does every round after a repair, every round of a
-- version with quarantined records and every rebuild started with `--verify full`.
CREATE TABLE IF NOT EXISTS page_bucket (
  version_id     bigint  NOT NULL,
  page_no        integer NOT NULL,
  bucket         date,
  jobs           bigint  NOT NULL,
  hash_sum       numeric NOT NULL,
  bytes          numeric NOT NULL,
  min_key        bigint  NOT NULL,
  max_key        bigint  NOT NULL,
  unknown_codes  bigint  NOT NULL,
  FOREIGN KEY (version_id, page_no) REFERENCES page (version_id, page_no) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS page_bucket_page_idx ON page_bucket (version_id, page_no);

ALTER TABLE page ADD COLUMN IF NOT EXISTS bucket_figures boolean NOT NULL DEFAULT false;

-- `start --verify full`: the version's reconciliation scans both sides.
ALTER TABLE version ADD COLUMN IF NOT EXISTS verify_full boolean NOT NULL DEFAULT false;
