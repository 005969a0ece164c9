-- catalog-rebuild catalog schema, version 1.
-- A catalog is rebuilt into a new version; readers see only the published (active) version.

CREATE TABLE IF NOT EXISTS version (
  version_id        bigserial PRIMARY KEY,
  catalog_name      text        NOT NULL,
  source_name       text        NOT NULL,
  status            text        NOT NULL DEFAULT 'building'
                    CHECK (status IN ('building', 'verifying', 'active', 'retired', 'dropped', 'abandoned', 'failed')),
  workflow_id       text        NOT NULL,
  first_run_id      text        NOT NULL,
  page_size         integer     NOT NULL CHECK (page_size BETWEEN 1 AND 100000),
  pages_total       integer     NOT NULL DEFAULT 0,
  source_rows       bigint      NOT NULL DEFAULT 0,
  watermark_key     bigint,
  watermark_time    timestamptz,
  source_timezone   text        NOT NULL DEFAULT 'UTC',
  partition_table   text        NOT NULL DEFAULT '',
  created_at        timestamptz NOT NULL DEFAULT now(),
  published_at      timestamptz,
  finished_at       timestamptz,
  failure_reason    text,
  UNIQUE (workflow_id, first_run_id)
);
CREATE INDEX IF NOT EXISTS version_catalog_idx ON version (catalog_name, status);

-- The published version of each catalog: the pointer that publish flips in one transaction.
CREATE TABLE IF NOT EXISTS active (
  catalog_name  text PRIMARY KEY,
  version_id    bigint NOT NULL REFERENCES version (version_id),
  published_at  timestamptz NOT NULL DEFAULT now()
);

-- Page plan: fixed key ranges, made once by planRebuild before any page runs.
CREATE TABLE IF NOT EXISTS plan_page (
  version_id  bigint  NOT NULL REFERENCES version (version_id),
  page_no     integer NOT NULL,
  first_key   bigint  NOT NULL,
  last_key    bigint  NOT NULL,
  PRIMARY KEY (version_id, page_no)
);

-- The ledger: one row per committed page, written in the page's own transaction.
CREATE TABLE IF NOT EXISTS page (
  version_id       bigint      NOT NULL REFERENCES version (version_id),
  page_no          integer     NOT NULL,
  first_key        bigint      NOT NULL,
  last_key         bigint      NOT NULL,
  rows             integer     NOT NULL DEFAULT 0,
  rejects          integer     NOT NULL DEFAULT 0,
  checksum         text        NOT NULL DEFAULT '',
  attempt          integer     NOT NULL,
  worker_identity  text        NOT NULL,
  started_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  committed_at     timestamptz,
  PRIMARY KEY (version_id, page_no)
);

-- Every attempt at a page registers here before it reads the source (outside the page transaction),
-- so a retry can name the worker that held the previous attempt.
CREATE TABLE IF NOT EXISTS page_attempt (
  version_id       bigint      NOT NULL,
  page_no          integer     NOT NULL,
  attempt          integer     NOT NULL,
  worker_identity  text        NOT NULL,
  started_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (version_id, page_no, attempt, worker_identity)
);

-- Catalog rows, partitioned by version: one standalone table per version, attached when planned.
CREATE TABLE IF NOT EXISTS job (
  version_id       bigint        NOT NULL,
  job_key          bigint        NOT NULL,
  job_id           text          NOT NULL,
  job              text,
  job_name         text,
  client           text,
  type             text,
  level            text,
  status           text,
  sched_time       timestamptz,
  start_time       timestamptz,
  end_time         timestamptz,
  real_end_time    timestamptz,
  files            bigint,
  bytes            numeric(20,0),
  read_bytes       numeric(20,0),
  job_errors       integer,
  pool             text,
  fileset          text,
  prior_job_id     text,
  job_tdate        bigint,
  vol_session_id   bigint,
  vol_session_time bigint,
  comment          text,
  bucket           date,
  page_no          integer       NOT NULL,
  PRIMARY KEY (version_id, job_id)
) PARTITION BY LIST (version_id);

-- Quarantined source records.
CREATE TABLE IF NOT EXISTS reject (
  version_id  bigint      NOT NULL,
  page_no     integer     NOT NULL,
  job_key     bigint,
  reason      text        NOT NULL,
  raw         text        NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS reject_version_idx ON reject (version_id, page_no);

-- The event log of each catalog: plan, page retries, reconciliation, repair, publish, abandon.
CREATE TABLE IF NOT EXISTS event (
  event_id      bigserial   PRIMARY KEY,
  catalog_name  text        NOT NULL,
  version_id    bigint,
  kind          text        NOT NULL,
  message       text        NOT NULL,
  details       jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS event_catalog_idx ON event (catalog_name, event_id);

-- Reconciliation reports, one per round.
CREATE TABLE IF NOT EXISTS reconciliation (
  version_id   bigint      NOT NULL REFERENCES version (version_id),
  round        integer     NOT NULL,
  ok           boolean     NOT NULL,
  report       jsonb       NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (version_id, round)
);

-- The reader contract: the published version of each catalog.
CREATE OR REPLACE VIEW active_jobs AS
SELECT v.catalog_name,
       j.job_id, j.job, j.job_name, j.client, j.type, j.level, j.status,
       j.sched_time, j.start_time, j.end_time, j.files, j.bytes, j.pool, j.fileset,
       j.real_end_time, j.read_bytes, j.job_errors, j.prior_job_id, j.job_tdate,
       j.vol_session_id, j.vol_session_time, j.comment, j.bucket, v.version_id
FROM active a
JOIN version v ON v.version_id = a.version_id
JOIN job j ON j.version_id = a.version_id;

-- Read-only role for readers and the backup check: active_jobs and nothing else.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'catalog_reader') THEN
    CREATE ROLE catalog_reader NOLOGIN;
  END IF;
END
$$;
GRANT SELECT ON active_jobs TO catalog_reader;
