-- catalog-rebuild catalog schema, migration 9 (additive): file records per page.
--
-- A page of a rebuild with file records (`--files`, version.files) writes its jobs' files in its
-- own transaction and counts them in its ledger row: files written and file records quarantined.
-- NULL for pages without files and pages of earlier releases.
ALTER TABLE page ADD COLUMN IF NOT EXISTS files bigint;
ALTER TABLE page ADD COLUMN IF NOT EXISTS file_rejects integer;
