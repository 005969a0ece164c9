-- catalog-rebuild catalog schema, migration 8 (additive): file records.
--
-- A rebuild with `--files` writes, with each job, all its file records (Bareos/Bacula `File` rows
-- with their `Path`) into a per-version table `file_v<id>` attached to `file`, like `job_v<id>` to
-- `job`. size, mode, uid, gid and mtime are decoded from LStat here, in the catalog database, by the
-- functions below; a record that cannot be written (a dangling PathId, an LStat that does not
-- decode, a NUL byte in a name) is quarantined alone in `reject` with its FileId as record key.

-- The rebuild includes file records (`start --files`); earlier versions have none.
ALTER TABLE version ADD COLUMN IF NOT EXISTS files boolean NOT NULL DEFAULT false;

-- File records, partitioned by version: one standalone table per version, attached when planned,
-- without index while pages load (indexes are built at seal).
CREATE TABLE IF NOT EXISTS file (
  version_id  bigint        NOT NULL,
  page_no     integer       NOT NULL,
  job_key     bigint        NOT NULL,
  job_id      text          NOT NULL,
  bucket      date,
  -- The source's FileId: a file record's identity.
  file_id     bigint        NOT NULL,
  -- The directory with its trailing '/', and the last component ('' for a directory's own entry):
  -- the source text when it is valid UTF-8, else decoded from the source's legacy encoding, with
  -- the exact bytes in path_bytes / name_bytes (NULL when the text is exact).
  path        text,
  name        text,
  path_bytes  bytea,
  name_bytes  bytea,
  file_index  integer,
  delta_seq   integer,
  -- FileIndex 0: deleted since the previous accurate backup.
  deleted     boolean,
  -- Decoded from lstat (st_size, st_mode, st_uid, st_gid, st_mtime).
  size        numeric(20,0),
  mode        integer,
  uid         bigint,
  gid         bigint,
  mtime       timestamptz,
  md5         text,
  lstat       text
) PARTITION BY LIST (version_id);

-- A quarantined file record carries its FileId as record key (NULL for a job record), its job's id
-- in job_id and NULL in job_key: the unique key of job records, reject_version_key (version_id,
-- job_key), stays as it is, because a worker of the previous release still writes job records with
-- ON CONFLICT (version_id, job_key) until it is drained. File records are unique per (version, FileId).
ALTER TABLE reject ADD COLUMN IF NOT EXISTS record_key bigint;
CREATE UNIQUE INDEX IF NOT EXISTS reject_version_record_key ON reject (version_id, record_key) WHERE record_key IS NOT NULL;

-- One integer in Bacula's base 64, unchecked: '-'? and 1 to 12 digits (an error or a wrong value
-- otherwise; use catalog_b64 unless the text is known to be valid, e.g. a field of an LStat whose
-- catalog_lstat_problem is NULL). Bacula's digits are the standard base64 alphabet, so the digits
-- left-padded with 'A' to 12 characters decode to the 9 big-endian bytes of the value; the last 8
-- are the bigint (the first is 0 when it fits int64).
CREATE OR REPLACE FUNCTION catalog_b64_unchecked(t text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (CASE WHEN left(t, 1) = '-' THEN -1 ELSE 1 END)
         * ('x' || encode(substr(decode(lpad(ltrim(t, '-'), 12, 'A'), 'base64'), 2), 'hex'))::bit(64)::bigint
$$;

-- One integer in Bacula's base 64 (digits A–Z a–z 0–9 + /, most significant first, no padding, a
-- leading '-' for negatives); NULL when it is not one: 1 to 11 digits fitting int64 (an 11-digit
-- value fits when its first digit is below 'I', i.e. its top 3 of 66 bits are 0).
CREATE OR REPLACE FUNCTION catalog_b64(t text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN t ~ '^-?[A-Za-z0-9+/]+$'
               AND (length(ltrim(t, '-')) < 11
                    OR (length(ltrim(t, '-')) = 11 AND strpos('ABCDEFGH', left(ltrim(t, '-'), 1)) > 0))
    THEN catalog_b64_unchecked(t)
  END
$$;

-- Field n (1-based) of an LStat, decoded; NULL when absent or not a base-64 integer.
CREATE OR REPLACE FUNCTION catalog_lstat_field(lstat text, n integer) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT catalog_b64(split_part(lstat, ' ', n))
$$;

-- The reason an LStat does not decode (see catalog_lstat_problem), field by field; NULL when it does.
CREATE OR REPLACE FUNCTION catalog_lstat_reason(lstat text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN lstat IS NULL THEN NULL
    WHEN cardinality(f) <> 16 THEN format('lstat: %s fields', cardinality(f))
    ELSE coalesce(
      (SELECT CASE WHEN x !~ '^-?[A-Za-z0-9+/]+$' THEN format('lstat: field %s is not base 64 (%s)', i, left(x, 24))
                   WHEN length(ltrim(x, '-')) > 11 THEN format('lstat: field %s has more than 11 digits (%s)', i, left(x, 24))
                   ELSE format('lstat: field %s overflows int64 (%s)', i, x) END
       FROM unnest(f) WITH ORDINALITY AS u(x, i)
       WHERE catalog_b64(x) IS NULL
       ORDER BY i LIMIT 1),
      CASE WHEN catalog_b64(f[3]) NOT BETWEEN -2147483648 AND 2147483647
           THEN format('lstat: st_mode %s does not fit an integer', catalog_b64(f[3]))
           WHEN catalog_b64(f[12]) NOT BETWEEN -210866803200 AND 9224318015999
           THEN format('lstat: st_mtime %s is out of range', catalog_b64(f[12])) END)
  END
  FROM (SELECT string_to_array(lstat, ' ') AS f) s
$$;

-- Why an LStat does not decode, as a short reason for the reject table (`lstat: 15 fields`,
-- `lstat: field 8 is not base 64 (x*)`); NULL when it decodes (or is NULL): 16 space-separated
-- fields, each '-'? and 1 to 11 base-64 digits fitting int64, st_mode (field 3) fitting an integer,
-- st_mtime (field 12) within to_timestamp's range. Inlined into the caller's query: the common LStat
-- (16 well-formed fields of at most 10 digits, a short st_mode and st_mtime) is accepted by one
-- regular expression and a few string functions (about 2 µs); any other goes field by field.
CREATE OR REPLACE FUNCTION catalog_lstat_problem(lstat text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN lstat ~ '^-?[A-Za-z0-9+/]+( -?[A-Za-z0-9+/]+)*$' AND lstat !~ '[A-Za-z0-9+/]{11}'
         AND length(lstat) - length(replace(lstat, ' ', '')) = 15
         AND length(split_part(lstat, ' ', 3)) < 6 AND length(split_part(lstat, ' ', 12)) < 7
    THEN NULL
    ELSE catalog_lstat_reason(lstat)
  END
$$;

-- The reader contract for file records: those of the published version of each catalog.
CREATE OR REPLACE VIEW active_files AS
SELECT v.catalog_name,
       f.job_id, f.file_id, f.path, f.name, f.path_bytes, f.name_bytes, f.file_index, f.delta_seq,
       f.deleted, f.size, f.mode, f.uid, f.gid, f.mtime, f.md5, f.lstat, v.version_id
FROM active a
JOIN version v ON v.version_id = a.version_id
JOIN file f ON f.version_id = a.version_id;
GRANT SELECT ON active_files TO catalog_reader;
