/**
 * File records of a Bareos/Bacula director catalog (`File` with `Path`, and `Filename` in older
 * Bacula): the schema chosen by the catalog's `Version` table, the COPY text a page or a repair
 * streams into the catalog's page stage (lib/catalog/files.ts FILE_STAGE_COLUMNS), the plan's walk
 * weighted by `Job.JobFiles`, and the reconciliation's figures in one pass over `File`. Pure SQL
 * text and the statements that run it; values that cannot be parameters (COPY) are validated
 * literals.
 */
import type { Readable } from 'node:stream';
import type { Pool } from 'pg';
import format from 'pg-format';
import { ReadSession } from './read-session';
import { withLongSession } from '../db';
import type { Queryable } from '../db';
import { SourceDataInvalidError } from '../errors';
import { digestOfSumSql, fileFingerprintRow, rowHashSql } from '../fingerprint';
import type { RowHashKind } from '../fingerprint';
import type { SourceTextMode } from './bareos-columns';
import { orList, tableAccess } from './bareos-tables';
import { jobIdArrayLiteral, jobIdLiteral, UTF8_TEXT } from './bareos-columns';
import type { FileJobStat, FileRead, FileSchema, PageRange, PageWalkProgress, SourceFileReconciliation } from './types';

/** Schema versions whose file records this release reads, by where the name is. */
export const FILE_SCHEMA_VERSIONS = {
  /** Bareos 17.2 to 24 (2171–2250): `File.Name`. */
  bareos: { min: 2171, max: 2250 },
  /** Bacula 11.0 and later (1021–1026): `File.Filename`. */
  bacula: { min: 1021, max: 1026 },
  /** Bacula 5.0 to 9.6 (12–16): `Filename(FilenameId, Name)`. */
  baculaFilenameTable: { min: 12, max: 16 },
} as const;

/**
 * The file-record schema of catalog schema version `version`.
 * @throws SourceDataInvalidError naming the version when this release does not know it.
 */
export function fileSchemaFor(version: number): FileSchema {
  const within = (r: { min: number; max: number }) => version >= r.min && version <= r.max;
  if (within(FILE_SCHEMA_VERSIONS.bareos)) return { version, name: 'file.name' };
  if (within(FILE_SCHEMA_VERSIONS.bacula)) return { version, name: 'file.filename' };
  if (within(FILE_SCHEMA_VERSIONS.baculaFilenameTable)) return { version, name: 'filename table' };
  throw new SourceDataInvalidError(
    `the source catalog has schema version ${version}, whose file records this release cannot read: ` +
      'it reads Bareos 2171–2250, Bacula 1021–1026 (File.Filename) and Bacula 12–16 (Filename table)',
  );
}

/**
 * Reads `Version.VersionId` and chooses the file-record schema.
 * @throws SourceDataInvalidError when the catalog has no `Version` row, an unknown version, or lacks
 *   a table of its file records (`File`, `Path`, older Bacula's `Filename`).
 */
export async function readFileSchema(db: Queryable): Promise<FileSchema> {
  let version: number | null;
  try {
    const { rows } = await db.query<{ v: number | null }>(`SELECT max(versionid)::int AS v FROM version`);
    version = rows[0].v;
  } catch (err) {
    if ((err as { code?: string }).code !== '42P01') throw err;
    version = null;
  }
  if (version === null)
    throw new SourceDataInvalidError(
      'the source catalog has no Version row: --files needs a Bareos or Bacula catalog with its File, Path and Version tables',
    );
  const schema = fileSchemaFor(version);
  const tables = ['file', 'path', ...(schema.name === 'filename table' ? ['filename'] : [])];
  const { missing } = await tableAccess(db, tables);
  if (missing.length)
    throw new SourceDataInvalidError(
      `the source catalog (Version ${version}) has no ${orList(missing)} table: --files needs a Bareos or Bacula catalog with its File, Path and Version tables`,
    );
  return schema;
}

/** SQL: the name column of a file record (alias `f`, older Bacula's `Filename` as `fn`). */
function nameColumn(schema: FileSchema): string {
  return schema.name === 'file.name' ? 'f.name' : schema.name === 'file.filename' ? 'f.filename' : 'fn.name';
}

/** SQL: the joins a file record (alias `f`) needs for its path (`p`) and, in older Bacula, its name (`fn`). */
function textJoins(schema: FileSchema): string {
  const filename = schema.name === 'filename table' ? ' LEFT JOIN filename fn ON fn.filenameid = f.filenameid' : '';
  return `LEFT JOIN path p ON p.pathid = f.pathid${filename}`;
}

/** SQL: true when the text `col` is valid UTF-8 (a cheap ASCII test first); always true in `utf8` mode. */
function validUtf8(col: string, mode: SourceTextMode): string {
  return mode.kind === 'legacy' ? `(${col} !~ '[\\x80-\\xff]' OR ${col} ~ ${UTF8_TEXT})` : 'true';
}

/**
 * A path or name as the stage takes it: `text`, the source text when it is valid UTF-8 (NULL
 * otherwise: the catalog decodes `bytes` from the legacy encoding), and `bytes`, the exact source
 * bytes when they are not valid UTF-8 (NULL otherwise).
 */
function textAndBytes(col: string, mode: SourceTextMode): { text: string; bytes: string } {
  if (mode.kind !== 'legacy') return { text: col, bytes: 'NULL::bytea' };
  const ok = validUtf8(col, mode);
  return {
    text: `CASE WHEN ${ok} THEN ${col} END`,
    bytes: `CASE WHEN NOT ${ok} THEN convert_to(${col}, 'SQL_ASCII') END`,
  };
}

/** The columns of a file record (alias `f`) that the stage and the fingerprint are made of. */
function fileColumns(schema: FileSchema, mode: SourceTextMode) {
  const path = textAndBytes('p.path', mode);
  const name = textAndBytes(nameColumn(schema), mode);
  const missingName =
    schema.name === 'filename table'
      ? `WHEN fn.filenameid IS NULL THEN format('name: FilenameId %s has no Filename row', f.filenameid)`
      : '';
  return {
    path,
    name,
    problem: `CASE WHEN p.pathid IS NULL THEN format('path: PathId %s has no Path row', f.pathid) ${missingName} END`,
    fingerprint: fileFingerprintRow({
      fileId: 'f.fileid',
      jobId: 'f.jobid',
      path: path.text,
      pathBytes: path.bytes,
      name: name.text,
      nameBytes: name.bytes,
      fileIndex: 'f.fileindex',
      deltaSeq: 'f.deltaseq',
      lstat: 'f.lstat',
      md5: 'f.md5',
    }),
  };
}

/** Which jobs' files a COPY reads: a job-id range (a page) or a list (a repair). */
export type FileJobs = { firstKey: string; lastKey: string } | { jobIds: string[] };

/**
 * `COPY (SELECT …) TO STDOUT` of the file records of `jobs` whose job exists (a `File` row without
 * `Job` row is an orphan, never copied), in FILE_STAGE_COLUMNS order: `job_key, job_id, bucket`
 * (the job's start date as written, as its job row's bucket), `file_id, path_id, path, name,
 * path_bytes, name_bytes, file_index, delta_seq, lstat, md5, problem` (a dangling PathId or
 * FilenameId). The session must run with `DateStyle` ISO.
 */
export function bareosFilesCopyQuery(schema: FileSchema, mode: SourceTextMode, jobs: FileJobs): string {
  const c = fileColumns(schema, mode);
  const where =
    'jobIds' in jobs
      ? `f.jobid = ANY (${jobIdArrayLiteral(jobs.jobIds)})`
      : `f.jobid BETWEEN ${jobIdLiteral(jobs.firstKey)} AND ${jobIdLiteral(jobs.lastKey)}`;
  return `COPY (SELECT f.jobid, f.jobid::text, j.starttime::date, f.fileid, f.pathid, ${c.path.text}, ${c.name.text},
                 ${c.path.bytes}, ${c.name.bytes}, f.fileindex, f.deltaseq, f.lstat, f.md5, ${c.problem}
          FROM file f JOIN job j ON j.jobid = f.jobid ${textJoins(schema)}
          WHERE ${where}) TO STDOUT`;
}

/**
 * SQL: the file records a job (alias `j`) is expected to have, for the plan: its `JobFiles` when
 * it is a backup, copy or archive job (types B, C, A) whose files were not pruned (`PurgedFiles`
 * 0), else 0 (a restore, verify or migrated job counts files it keeps no `File` rows for, and a
 * pruned job lost them; its `JobFiles` stays).
 */
export const FILE_WEIGHT = `CASE WHEN j.type IN ('B', 'C', 'A') AND coalesce(j.purgedfiles, 0) = 0
  THEN greatest(coalesce(j.jobfiles, 0), 0) ELSE 0 END`;

/** Jobs one statement of {@link planFilePages} reads at most. */
export const FILE_WALK_ROWS_PER_STATEMENT = 200_000;

/** The lowest bigint (decimal text): where a walk starts. */
const MIN_BIGINT = '-9223372036854775808';

/**
 * Pages of jobs at or below `maxKey` of about `targetRows` rows, a job weighing 1 + its expected
 * file records ({@link FILE_WEIGHT}: its `JobFiles`, negative or NULL as 0, unless it keeps none): jobs are added to a page while its weight stays within the target; a job
 * of the target's weight or more is a page of its own. Walks `job` by primary key in statements of
 * at most {@link FILE_WALK_ROWS_PER_STATEMENT} jobs (rows as arrays: bounded memory).
 */
export async function planFilePages(
  pool: Pool,
  maxKey: string,
  targetRows: number,
  onProgress?: (p: PageWalkProgress) => void,
  jobsPerStatement = FILE_WALK_ROWS_PER_STATEMENT,
): Promise<PageRange[]> {
  const pages: PageRange[] = [];
  let open: Required<PageRange> | null = null;
  const close = () => {
    if (open) pages.push(open);
    open = null;
  };
  let from = MIN_BIGINT;
  let jobs = 0;
  for (;;) {
    const { rows } = await pool.query<[string, string]>({
      text: `SELECT j.jobid::text AS id, (1 + ${FILE_WEIGHT})::text AS w FROM job j
             WHERE j.jobid >= $1::bigint AND j.jobid <= $2::bigint ORDER BY j.jobid LIMIT $3`,
      values: [from, maxKey, jobsPerStatement],
      rowMode: 'array',
    });
    for (const [id, w] of rows) {
      const weight = Number(w);
      if (weight >= targetRows) {
        close();
        pages.push({ firstKey: id, lastKey: id, rows: 1, weight });
        continue;
      }
      const current: Required<PageRange> | null = open;
      if (current && current.weight + weight > targetRows) close();
      open ??= { firstKey: id, lastKey: id, rows: 0, weight: 0 };
      open.lastKey = id;
      open.rows += 1;
      open.weight += weight;
    }
    jobs += rows.length;
    if (!rows.length) break;
    const last = rows[rows.length - 1][0];
    onProgress?.({ pages: pages.length + (open ? 1 : 0), rows: jobs, lastKey: last });
    if (rows.length < jobsPerStatement || last === maxKey) break;
    from = (BigInt(last) + 1n).toString();
  }
  close();
  return pages;
}

/**
 * The file records' figures at the watermark, in one statement (one pass over `File`, grouped per
 * job, then per bucket) on a session without statement timeout: per bucket of the jobs at or below
 * `maxKey`, the count and digest of their file records (the digest definition of
 * lib/fingerprint.ts, summed per job, then per bucket); the `File` rows whose job does not exist;
 * and the jobs whose `File` rows differ in number from `JobFiles`. `JobFiles` counts every record
 * of the job, saved or not (a Bacula 9.6 Accurate Incremental: JobFiles 136, 9 saved, 127 deleted),
 * so the comparison is over all records; the examples count the saved (FileIndex > 0) and deleted apart.
 */
export async function fileReconciliation(
  pool: Pool,
  schema: FileSchema,
  mode: SourceTextMode,
  maxKey: string,
  hash: RowHashKind,
): Promise<SourceFileReconciliation> {
  const c = fileColumns(schema, mode);
  const { rows } = await withLongSession(pool, (s) =>
    s.query<{ buckets: string; orphans: string; mismatched: number; examples: string }>(
      `WITH per_job AS MATERIALIZED (
         SELECT f.jobid, count(*) AS n, count(*) FILTER (WHERE f.fileindex > 0) AS saved,
                sum(${rowHashSql(c.fingerprint, hash)}) AS h
         FROM file f ${textJoins(schema)} WHERE f.jobid <= $1::bigint GROUP BY f.jobid),
       jobs AS MATERIALIZED (
         SELECT j.jobid, j.jobfiles, j.starttime::date AS bucket, pj.n, pj.saved, pj.h
         FROM job j LEFT JOIN per_job pj ON pj.jobid = j.jobid WHERE j.jobid <= $1::bigint)
       SELECT (SELECT coalesce(json_agg(json_build_object('bucket', b.bucket, 'files', b.files, 'fingerprint', b.fp)
                                        ORDER BY b.bucket NULLS FIRST), '[]')::text
               FROM (SELECT bucket::text AS bucket, sum(n)::bigint AS files, ${digestOfSumSql('sum(h)')} AS fp
                     FROM jobs WHERE n IS NOT NULL GROUP BY bucket) b) AS buckets,
              (SELECT coalesce(sum(pj.n), 0)::text FROM per_job pj
               WHERE NOT EXISTS (SELECT 1 FROM job j WHERE j.jobid = pj.jobid)) AS orphans,
              (SELECT count(*)::int FROM jobs WHERE coalesce(n, 0) <> coalesce(jobfiles, 0)) AS mismatched,
              (SELECT coalesce(json_agg(json_build_object('jobId', e.jobid::text, 'jobFiles', e.jobfiles::text,
                                                          'files', coalesce(e.n, 0), 'saved', coalesce(e.saved, 0),
                                                          'deleted', coalesce(e.n - e.saved, 0)) ORDER BY e.jobid), '[]')::text
               FROM (SELECT * FROM jobs WHERE coalesce(n, 0) <> coalesce(jobfiles, 0) ORDER BY jobid LIMIT 5) e) AS examples`,
      [maxKey],
    ),
  );
  const r = rows[0];
  return {
    buckets: JSON.parse(r.buckets) as SourceFileReconciliation['buckets'],
    orphanFiles: Number(r.orphans),
    jobFilesMismatch: {
      jobs: r.mismatched,
      examples: JSON.parse(r.examples) as SourceFileReconciliation['jobFilesMismatch']['examples'],
    },
  };
}

/**
 * Per job of `jobIds` (distinct, ascending), the count and digest of its file records, 0 and `0`
 * for a job without any; served by Bareos' `(JobId, PathId, Name)` index, on a session without
 * statement timeout.
 */
export async function fileJobStats(
  pool: Pool,
  schema: FileSchema,
  mode: SourceTextMode,
  jobIds: string[],
  hash: RowHashKind,
): Promise<FileJobStat[]> {
  if (!jobIds.length) return [];
  const c = fileColumns(schema, mode);
  const { rows } = await withLongSession(pool, (s) =>
    s.query<{ job_id: string; files: string; fingerprint: string }>(
      `SELECT j.id::text AS job_id, coalesce(x.n, 0)::text AS files, coalesce(x.fp, '0') AS fingerprint
       FROM (SELECT DISTINCT unnest($1::bigint[]) AS id) j
       LEFT JOIN (SELECT f.jobid, count(*) AS n, ${digestOfSumSql(`sum(${rowHashSql(c.fingerprint, hash)})`)} AS fp
                  FROM file f ${textJoins(schema)} WHERE f.jobid = ANY ($1::bigint[]) GROUP BY f.jobid) x
         ON x.jobid = j.id
       ORDER BY j.id`,
      [jobIds],
    ),
  );
  return rows.map((r) => ({ jobId: r.job_id, files: Number(r.files), fingerprint: r.fingerprint }));
}

/** What a file read needs to know of its source. */
export interface FileReadSettings {
  schema: FileSchema;
  mode: SourceTextMode;
  /** statement_timeout of the read (ms); 0 for none. */
  statementTimeoutMs: number;
}

/**
 * Opens a read of the file records of `jobIds` on one read-only REPEATABLE READ snapshot (taking a
 * source connection from `pool`); the caller must `close` it.
 * @throws the source's errors (connection, timeout); the connection is then discarded.
 */
export async function openBareosFileRead(pool: Pool, s: FileReadSettings, jobIds: string[]): Promise<FileRead> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await client.query(`SELECT set_config('statement_timeout', $1, true), set_config('DateStyle', 'ISO, YMD', true)`, [
      String(s.statementTimeoutMs),
    ]);
  } catch (err) {
    client.release(err as Error);
    throw err;
  }
  let streamed = false;
  const session = new ReadSession(client);
  return {
    legacyEncoding: s.mode.legacyEncoding,
    copyFilesOut(): Promise<Readable> {
      if (streamed) throw new Error('a file read streams its records once');
      streamed = true;
      return Promise.resolve(session.copyOut(bareosFilesCopyQuery(s.schema, s.mode, { jobIds })));
    },
    // Committed when the COPY ended, else discarded (lib/sources/read-session.ts).
    close: (err?: Error) => session.close(err),
  };
}
