-- catalog-rebuild catalog schema, version 2 (additive).
-- File and command sources (restic, borg listings) are staged here by planRebuild so every worker
-- pages the same snapshot; quarantined records carry what reconciliation needs; jobs carry the
-- source's extra fields.

-- Source extras (restic: short id, tree, parent, original, uid, …; borg: archive, barchive, …).
ALTER TABLE job ADD COLUMN IF NOT EXISTS extra jsonb;

-- sha256 of the staged listing (file or command output): a file source's watermark.
ALTER TABLE version ADD COLUMN IF NOT EXISTS source_snapshot text;
-- Records of a staged listing that repeated an earlier record's id (the last one was kept).
ALTER TABLE version ADD COLUMN IF NOT EXISTS source_duplicates integer NOT NULL DEFAULT 0;

-- Per page: jobs with a type, level or status code the product does not know (kept verbatim), and
-- rows dropped as in-page duplicates of a job id (the last one read was kept).
ALTER TABLE page ADD COLUMN IF NOT EXISTS warnings integer NOT NULL DEFAULT 0;
ALTER TABLE page ADD COLUMN IF NOT EXISTS duplicates integer NOT NULL DEFAULT 0;

-- A quarantined record keeps its id, bucket and fingerprint input, so reconciliation can check
-- source = catalog + rejects per bucket; at most one reject per (version, paging key).
ALTER TABLE reject ADD COLUMN IF NOT EXISTS job_id text;
ALTER TABLE reject ADD COLUMN IF NOT EXISTS bucket date;
ALTER TABLE reject ADD COLUMN IF NOT EXISTS fingerprint_row text;
CREATE UNIQUE INDEX IF NOT EXISTS reject_version_key ON reject (version_id, job_key);

-- One staged listing per version: records in listing order (seq = paging key, from 1), mapped to
-- catalog fields as text; times as the source wrote them (converted in SQL when read).
CREATE TABLE IF NOT EXISTS staged_record (
  -- The plan transaction names its version with SET LOCAL catalog_rebuild.staging_version, so the
  -- listing's COPY text (made off the main thread before the version exists) carries no version id.
  version_id     bigint NOT NULL DEFAULT (current_setting('catalog_rebuild.staging_version'))::bigint,
  seq            bigint NOT NULL,
  job_id         text,
  job            text,
  job_name       text,
  client         text,
  type           text,
  level          text,
  status         text,
  -- 'offset': RFC 3339 with an offset (restic); 'naive': local wall-clock time (borg 1.x).
  time_kind      text   NOT NULL CHECK (time_kind IN ('offset', 'naive')),
  start_text     text,
  end_text       text,
  files          text,
  bytes          text,
  comment        text,
  extra          jsonb,
  -- Set when the record failed validation: it is quarantined by its page, never written as a job;
  -- raw is then the record as listed (numbers exact).
  reject_reason  text,
  raw            text,
  PRIMARY KEY (version_id, seq)
);

CREATE OR REPLACE VIEW active_jobs AS
SELECT v.catalog_name,
       j.job_id, j.job, j.job_name, j.client, j.type, j.level, j.status,
       j.sched_time, j.start_time, j.end_time, j.files, j.bytes, j.pool, j.fileset,
       j.real_end_time, j.read_bytes, j.job_errors, j.prior_job_id, j.job_tdate,
       j.vol_session_id, j.vol_session_time, j.comment, j.bucket, v.version_id, j.extra
FROM active a
JOIN version v ON v.version_id = a.version_id
JOIN job j ON j.version_id = a.version_id;
GRANT SELECT ON active_jobs TO catalog_reader;
