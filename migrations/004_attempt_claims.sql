-- catalog-rebuild catalog schema, migration 4 (additive): one claim row per attempt execution.
--
-- `temporal activity reset` restarts a page activity's attempt numbers at 1, so (version, page,
-- attempt, worker) no longer names one execution of a page: the same worker may run attempt 1 of a
-- page twice. Each claim now carries its own id (the attempt picks it; rows written by the previous
-- release get one from the default), and the old key, which made the second claim a silent no-op,
-- is relaxed to a plain index. The previous release's `INSERT … ON CONFLICT DO NOTHING` still
-- succeeds: it names no conflict target and its rows get a fresh claim id. The page ledger (`page`)
-- keeps one row per page. Existing rows keep a NULL claim id (no table rewrite).
ALTER TABLE page_attempt ADD COLUMN IF NOT EXISTS claim_id uuid;
ALTER TABLE page_attempt ALTER COLUMN claim_id SET DEFAULT gen_random_uuid();
CREATE UNIQUE INDEX IF NOT EXISTS page_attempt_claim_idx ON page_attempt (claim_id);
CREATE INDEX IF NOT EXISTS page_attempt_page_idx ON page_attempt (version_id, page_no, attempt);
ALTER TABLE page_attempt DROP CONSTRAINT IF EXISTS page_attempt_pkey;

-- An operator paused the attempt (`temporal activity pause`): set by the attempt when Temporal tells
-- it so; `resumed_at` by the next attempt of the page once it told the rebuild the page runs again.
ALTER TABLE page_attempt ADD COLUMN IF NOT EXISTS paused_at timestamptz;
ALTER TABLE page_attempt ADD COLUMN IF NOT EXISTS resumed_at timestamptz;
