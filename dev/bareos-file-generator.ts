/**
 * File records for a generated Bareos director catalog (dev/bareos-generator.ts): the `File` /
 * `Path` table pair and the `Version` table of Bareos schema 2230, filled inside PostgreSQL with
 * one `INSERT … SELECT … generate_series` per table (no row travels through Node).
 *
 * Model:
 * - Which jobs have file records: backups and copies (type B, C) with `JobFiles > 0` whose files
 *   were not pruned (`PurgedFiles = 0`), as a director keeps them.
 * - How many: each job's generated `JobFiles` (capped at {@link NOMINAL_CAP}), scaled by one
 *   factor so that the total is exactly the requested count (cumulative rounding in job id
 *   order): fulls stay about a hundred times larger than incrementals. Every job's `JobFiles`
 *   is set to its scaled count, so a job with file records has `JobFiles` = its `File` rows; jobs
 *   whose files were pruned (PurgedFiles = 1), migrated jobs (M) and restores keep a scaled
 *   `JobFiles` without rows, as in a real catalog.
 * - Layout of one job: entries in groups of 20 per directory, 19 files then the directory's own
 *   entry (`Name` ''); a full walks the client's tree from its first directory (`/etc/`, or
 *   `C:/Windows/System32/drivers/etc/` on Windows clients), an incremental or differential a part
 *   of it shifted by its job id. `Path` rows are shared by all clients of one OS, as Bareos shares
 *   them; the same directory holds the same names in every job.
 * - Each entry: `FileIndex` its position from 1 (0 for about 1 in 64 entries of an incremental or
 *   differential: deleted since the previous backup), `DeltaSeq` 1..3 for about 1 in 1,000 of
 *   them, `LStat` of a plausible stat (see {@link lstatSql}; sizes log-uniform from 1 B to about
 *   100 MB, mtimes before the job's start), `Md5` a 22-character base-64 digest ('0' for
 *   directories and deleted entries).
 * Deterministic: the same catalog, seed and count give the same rows (PostgreSQL's
 * `hashint8extended`, no random()).
 */
import type { Client } from 'pg';
import format from 'pg-format';
import { baculaBase64 } from './lstat';

/** Per-job `JobFiles` above this count weigh as this count when the total is shared out. */
export const NOMINAL_CAP = 2_000_000;
/** Entries per directory: 19 files and the directory's own entry. */
export const GROUP = 20;
/** The Bareos schema version the generated tables follow. */
export const BAREOS_FILE_SCHEMA_VERSION = 2230;

/** What {@link generateBareosFiles} made. */
export interface GeneratedFiles {
  /** Rows in `File` (the requested count, or 0 when no job can have files). */
  files: number;
  /** Rows in `Path`. */
  paths: number;
  /** Jobs with at least one `File` row. */
  jobsWithFiles: number;
  /** Most `File` rows of one job. */
  largestJob: number;
}

/** Bacula's base 64 of a non-negative bigint SQL expression: the 9 bytes 0 ‖ int8 as standard base 64 (12 digits), leading zero digits dropped. */
export function b64Sql(expr: string): string {
  return `coalesce(nullif(ltrim(encode('\\x00'::bytea || int8send((${expr})::bigint), 'base64'), 'A'), ''), 'A')`;
}

const b = (n: number): string => `'${baculaBase64(n)}'`;
const MODE_DIR = 0o40755;
const MODE_FILE = 0o100644;
const MODE_EXEC = 0o100755;

/**
 * The LStat of one entry (fields as in dev/lstat.ts `encodeLStat`): st_dev 2049, st_ino, st_mode
 * (directory 040755, file 0100644, every tenth file 0100755), st_nlink (2 / 1), st_uid = st_gid,
 * st_rdev 0, st_size, st_blksize 4096, st_blocks (size + 511) / 512, st_atime = st_mtime = st_ctime,
 * LinkFI 0, st_flags 0, data stream (1 for files, 0 for directories). Column names of the inner
 * select of {@link generateBareosFiles}.
 */
export function lstatSql(): string {
  return `concat_ws(' ', ${b(2049)}, ${b64Sql('ino')},
    CASE WHEN dir THEN ${b(MODE_DIR)} WHEN r % 10 = 9 THEN ${b(MODE_EXEC)} ELSE ${b(MODE_FILE)} END,
    CASE WHEN dir THEN ${b(2)} ELSE ${b(1)} END, ${b64Sql('uid')}, ${b64Sql('uid')}, ${b(0)},
    ${b64Sql('size')}, ${b(4096)}, ${b64Sql('(size + 511) / 512')}, mt, mt, mt, ${b(0)}, ${b(0)},
    CASE WHEN dir THEN ${b(0)} ELSE ${b(1)} END)`;
}

const ETC_NAMES = [
  'hosts',
  'passwd',
  'group',
  'fstab',
  'hostname',
  'resolv.conf',
  'crontab',
  'sudoers',
  'shadow',
  'services',
  'protocols',
  'os-release',
  'timezone',
  'environment',
  'profile',
  'bash.bashrc',
  'issue',
  'motd',
  'nsswitch.conf',
];
const STEMS = ['report', 'data', 'index', 'config', 'notes 2024', 'photo', 'Übersicht', 'main', 'README', 'café-menu'];
const EXTS = ['.txt', '.pdf', '.conf', '.jpg', '.log', '.json', '.tar.gz', '.docx', '', '.sql'];
const LINUX_TOPS = ['home/alice', 'home/bob', 'etc/nginx', 'usr/share/doc', 'var/lib', 'srv/www', 'opt/app', 'root'];
const WINDOWS_TOPS = ['Users/alice', 'Users/Administrator', 'ProgramData', 'Program Files/App'];
const SUBS = ['projects', 'Documents', 'config', 'data', 'src', 'Photos 2024', 'backup', 'mail', 'cache', 'logs'];

/** A SQL text array literal (single quotes doubled). */
const arr = (xs: string[]): string => `ARRAY[${xs.map((x) => `'${x.replace(/'/g, "''")}'`).join(', ')}]::text[]`;

/** Creates `File`, `Path` and `Version` (2230) without indexes; drops earlier ones first. */
async function createTables(c: Client): Promise<void> {
  const schema = await currentSchema(c);
  await c.query(format('DROP TABLE IF EXISTS %I.file, %I.path, %I.version', schema, schema, schema));
  await c.query(`CREATE TABLE version (versionid integer NOT NULL)`);
  await c.query(`INSERT INTO version (versionid) VALUES (${BAREOS_FILE_SCHEMA_VERSION})`);
  await c.query(`CREATE TABLE path (pathid serial NOT NULL, path text NOT NULL)`);
  await c.query(
    `CREATE TABLE file (
       fileid bigserial NOT NULL, fileindex integer NOT NULL DEFAULT 0, jobid integer NOT NULL,
       pathid integer NOT NULL, deltaseq smallint NOT NULL DEFAULT 0, markid integer NOT NULL DEFAULT 0,
       fhinfo numeric(20) NOT NULL DEFAULT 0, fhnode numeric(20) NOT NULL DEFAULT 0,
       lstat text NOT NULL, md5 text NOT NULL, name text NOT NULL)`,
  );
}

/** Adds the keys and indexes of Bareos's DDL (after the load, which is faster) and sets the sequences. */
async function indexTables(c: Client): Promise<void> {
  await c.query(`ALTER TABLE path ADD PRIMARY KEY (pathid)`);
  await c.query(`CREATE UNIQUE INDEX path_name_idx ON path (path)`);
  await c.query(`ALTER TABLE file ADD PRIMARY KEY (fileid)`);
  await c.query(`CREATE INDEX file_jpfid_idx ON file (jobid, pathid, name)`);
  await c.query(`CREATE INDEX file_pjidpart_idx ON file (pathid, jobid) WHERE fileindex = 0 AND name = ''`);
  await c.query(`SELECT setval(pg_get_serial_sequence('file', 'fileid'), greatest((SELECT max(fileid) FROM file), 1))`);
  await c.query(`SELECT setval(pg_get_serial_sequence('path', 'pathid'), greatest((SELECT max(pathid) FROM path), 1))`);
}

/**
 * Plans every job (temp table `gen_file_job`): its scaled file count `n`, first FileId, path range
 * and the time span its mtimes fall in; sets every job's `JobFiles` to its scaled count.
 */
async function planJobs(c: Client, files: number): Promise<void> {
  await c.query(
    `CREATE TEMP TABLE gen_file_job ON COMMIT DROP AS
     WITH j AS (
       SELECT j.jobid, j.level, j.jobfiles, least(j.jobfiles, ${NOMINAL_CAP})::float8 AS w,
              (j.type IN ('B', 'C') AND j.jobfiles > 0 AND coalesce(j.purgedfiles, 0) = 0) AS has_rows,
              coalesce(cl.uname ILIKE '%windows%', false) AS win,
              extract(epoch FROM coalesce(j.starttime, j.schedtime))::bigint AS t
         FROM job j LEFT JOIN client cl ON cl.clientid = j.clientid
        WHERE j.jobfiles > 0),
     s AS (SELECT ${files}::float8 / nullif(sum(w) FILTER (WHERE has_rows), 0) AS k FROM j),
     c AS (
       SELECT j.*, coalesce(sum(w) FILTER (WHERE has_rows) OVER (ORDER BY jobid), 0) AS cum, s.k FROM j, s)
     SELECT jobid, level, win, t, has_rows,
            CASE WHEN k IS NULL THEN 0
                 WHEN has_rows THEN (round(cum * k) - round((cum - w) * k))::bigint
                 ELSE round(w * k)::bigint END AS n
       FROM c`,
  );
  await c.query(`UPDATE job SET jobfiles = g.n FROM gen_file_job g WHERE job.jobid = g.jobid`);
  await c.query(`DELETE FROM gen_file_job WHERE NOT has_rows OR n = 0`);
  await c.query(
    `ALTER TABLE gen_file_job ADD COLUMN first_fid bigint, ADD COLUMN groups bigint, ADD COLUMN path_base bigint,
       ADD COLUMN path_range bigint, ADD COLUMN path_shift bigint, ADD COLUMN age_span bigint`,
  );
  // FileIds follow job id order; path ranges: Linux paths 1..PL, Windows PL+1..PL+PW.
  await c.query(
    `WITH f AS (SELECT jobid, sum(n) OVER (ORDER BY jobid) - n + 1 AS first_fid FROM gen_file_job),
          r AS (SELECT coalesce(max((n + ${GROUP} - 1) / ${GROUP}) FILTER (WHERE NOT win), 0) AS pl,
                       coalesce(max((n + ${GROUP} - 1) / ${GROUP}) FILTER (WHERE win), 0) AS pw FROM gen_file_job)
     UPDATE gen_file_job g SET
       first_fid = f.first_fid,
       groups = (g.n + ${GROUP} - 1) / ${GROUP},
       path_base = CASE WHEN g.win THEN r.pl + 1 ELSE 1 END,
       path_range = CASE WHEN g.win THEN r.pw ELSE r.pl END,
       path_shift = CASE WHEN g.level = 'F' THEN 0 ELSE g.jobid * 7919 END,
       age_span = CASE g.level WHEN 'F' THEN 3 * 365 * 86400 WHEN 'D' THEN 7 * 86400 ELSE 86400 END
     FROM f, r WHERE f.jobid = g.jobid`,
  );
}

/** Fills `path`: Linux directories 1..PL, then Windows ones; index 0 of each is its `etc` directory. */
async function insertPaths(c: Client): Promise<void> {
  const dir = (tops: string, first: string, prefix: string) =>
    `CASE WHEN i = 0 THEN '${first}'
          ELSE '${prefix}' || (${tops})[1 + i % ${LINUX_TOPS.length}] || '/' || (${arr(SUBS)})[1 + (i / 8) % ${SUBS.length}] || '/d' || i || '/' END`;
  await c.query(
    `WITH r AS (SELECT coalesce(max(path_range) FILTER (WHERE NOT win), 0) AS pl,
                       coalesce(max(path_range) FILTER (WHERE win), 0) AS pw FROM gen_file_job)
     INSERT INTO path (pathid, path)
     SELECT 1 + i, ${dir(arr(LINUX_TOPS), '/etc/', '/')} FROM r, generate_series(0, r.pl - 1) AS i
     UNION ALL
     SELECT r.pl + 1 + i, ${dir(arr([...WINDOWS_TOPS, ...WINDOWS_TOPS]), 'C:/Windows/System32/drivers/etc/', 'C:/')}
       FROM r, generate_series(0, r.pw - 1) AS i`,
  );
}

/** Fills `file` from the plan in one statement. */
async function insertFiles(c: Client, seed: number): Promise<void> {
  const name = `CASE WHEN dir THEN ''
      WHEN pidx = 0 THEN (${arr(ETC_NAMES)})[1 + r]
      ELSE (${arr(STEMS)})[1 + (pathid + r) % ${STEMS.length}] || '_' || r || (${arr(EXTS)})[1 + (pathid * 3 + r) % ${EXTS.length}] END`;
  await c.query(
    `INSERT INTO file (fileid, fileindex, jobid, pathid, deltaseq, markid, fhinfo, fhnode, lstat, md5, name)
     SELECT fid, CASE WHEN del THEN 0 ELSE k + 1 END, jobid, pathid, dseq, 0, 0, 0, ${lstatSql()},
            CASE WHEN dir OR del THEN '0'
                 ELSE rtrim(encode(decode(md5(fid::text || ':' || ${seed}), 'hex'), 'base64'), '=') END,
            ${name}
       FROM (
         SELECT x.*, ${b64Sql('mtime')} AS mt,
                CASE WHEN dir THEN 4096 ELSE floor(exp(((h >> 12) % 1000000)::float8 / 1e6 * 18.4))::bigint END AS size,
                CASE WHEN win OR pathid % 3 = 0 THEN 0 ELSE 1000 + pathid % 2 END AS uid,
                hashint8extended(pathid * 32 + r, ${seed}) & 2147483647 AS ino,
                (NOT dir AND incr AND h % 64 = 0) AS del,
                CASE WHEN NOT dir AND incr AND (h >> 8) % 1009 = 0 THEN 1 + (h >> 20) % 3 ELSE 0 END AS dseq
           FROM (
             SELECT y.*, y.pathid - y.path_base AS pidx,
                    greatest(0, t - 60 - (h >> 24) % age_span) AS mtime
               FROM (
                 SELECT g.jobid, g.win, g.t, g.age_span, g.path_base, g.level <> 'F' AS incr, k,
                        g.first_fid + k AS fid, k % ${GROUP} AS r, k % ${GROUP} = ${GROUP - 1} AS dir,
                        g.path_base + ((k / ${GROUP} + g.path_shift) % g.path_range) AS pathid,
                        hashint8extended(g.first_fid + k, ${seed}) & 9223372036854775807 AS h
                   FROM gen_file_job g, generate_series(0::bigint, g.n - 1) AS k) y) x) z`,
  );
}

/**
 * Creates and fills `File`, `Path` and `Version` (2230) for the jobs already in `job` (see the
 * module comment), on `c` inside the caller's transaction, and sets `job.jobfiles` to the scaled
 * counts. Earlier `file`, `path` and `version` tables are dropped first.
 * @param files total `File` rows wanted (integer >= 0); exactly this many are made unless no job
 *   can have files (then none).
 * @param seed the generator's seed.
 * @throws the pg error.
 */
export async function generateBareosFiles(c: Client, files: number, seed: number): Promise<GeneratedFiles> {
  await createTables(c);
  await planJobs(c, files);
  await insertPaths(c);
  await insertFiles(c, seed);
  await indexTables(c);
  const { rows } = await c.query<{ files: string; paths: string; jobs: string; largest: string | null }>(
    `SELECT (SELECT count(*) FROM file)::text AS files, (SELECT count(*) FROM path)::text AS paths,
            (SELECT count(*) FROM gen_file_job)::text AS jobs, (SELECT max(n) FROM gen_file_job)::text AS largest`,
  );
  const r = rows[0];
  return {
    files: Number(r.files),
    paths: Number(r.paths),
    jobsWithFiles: Number(r.jobs),
    largestJob: Number(r.largest ?? 0),
  };
}

/** Empties `file` and `path` when they exist (a catalog regenerated without files keeps no stale records). */
export async function emptyBareosFiles(c: Client): Promise<void> {
  const schema = await currentSchema(c);
  for (const table of ['file', 'path']) {
    const name = format('%I.%I', schema, table);
    const { rows } = await c.query<{ t: string | null }>(`SELECT to_regclass($1)::text AS t`, [name]);
    if (rows[0].t) await c.query(`TRUNCATE ${name}`);
  }
}

/**
 * The schema the generator's tables live in (the first of the search path): drops and truncates
 * name it, so a `file` table of another schema on the path (a catalog database's) is never touched.
 */
async function currentSchema(c: Client): Promise<string> {
  const { rows } = await c.query<{ s: string | null }>(`SELECT current_schema() AS s`);
  if (!rows[0].s) throw new Error('generateBareosFiles: no schema on the search path');
  return rows[0].s;
}
