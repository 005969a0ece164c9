-- catalog-rebuild catalog schema, migration 5 (additive): how a plan sized its pages.
--
-- A plan sizes its pages from measured cost unless `--page-size` fixed them: `version.page_sizing`
-- says which ('auto' or 'fixed'; NULL for versions planned by an earlier release, whose pages were
-- fixed), and `plan_page.planned_rows` holds the source rows the plan counted in each page (NULL for
-- pages planned by an earlier release), from which a page sizes its statement timeout. Both columns
-- are nullable without a default, so adding them rewrites no table.
ALTER TABLE version ADD COLUMN IF NOT EXISTS page_sizing text CHECK (page_sizing IN ('auto', 'fixed'));
ALTER TABLE plan_page ADD COLUMN IF NOT EXISTS planned_rows integer;
