-- catalog-rebuild catalog schema, migration 7 (additive): text decoded from a legacy encoding.
--
-- A director's SQL_ASCII catalog may hold text that is not UTF-8; a page decodes such values from
-- the source's legacyEncoding and counts them per catalog column in its ledger row, which the
-- reconciliation report sums. NULL for pages without decoded values and pages of earlier releases.
ALTER TABLE page ADD COLUMN IF NOT EXISTS decoded jsonb;
