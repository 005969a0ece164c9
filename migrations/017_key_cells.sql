-- catalog-rebuild catalog schema, migration 17 (additive): a version's jobs per cell of 64 job keys
-- (the key divided by 64, truncated), stored when it is sealed, for the next refresh's change
-- detection.
--
-- A refresh finds deleted jobs by comparing, cell by cell, the source's jobs (one index-only pass
-- over its primary key) with the active version's; only the cells that differ have their keys
-- listed on both sides. The version's side is read here instead of from its table. Each page of a
-- full rebuild adds up its cells from the rows it writes, as they pass through the worker, inside
-- its transaction (`page_cell`, like `page_bucket`); the seal sums them into `version_cell`. A
-- refresh's cells are its base's, less the rows it superseded, plus its own rows. A version
-- repaired after its seal, a page written row by row (which stores none) and a version whose base
-- stored none have them counted on the table. `version.key_cells` marks a version whose cells are
-- stored; a refresh of a version without them counts its table's cells instead.
CREATE TABLE IF NOT EXISTS page_cell (
  version_id  bigint  NOT NULL,
  page_no     integer NOT NULL,
  cell        bigint  NOT NULL,
  jobs        bigint  NOT NULL,
  key_sum     numeric NOT NULL,
  FOREIGN KEY (version_id, page_no) REFERENCES page (version_id, page_no) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS page_cell_page_idx ON page_cell (version_id, page_no);

ALTER TABLE page ADD COLUMN IF NOT EXISTS cell_figures boolean NOT NULL DEFAULT false;

CREATE TABLE IF NOT EXISTS version_cell (
  version_id  bigint  NOT NULL REFERENCES version (version_id),
  cell        bigint  NOT NULL,
  jobs        bigint  NOT NULL,
  key_sum     numeric NOT NULL,
  PRIMARY KEY (version_id, cell)
);

ALTER TABLE version ADD COLUMN IF NOT EXISTS key_cells boolean NOT NULL DEFAULT false;
