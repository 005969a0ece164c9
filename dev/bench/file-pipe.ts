/**
 * Baseline (pf) of `npm run bench -- --files N`, what the file-level target is stated against: a
 * shell pipe of two psql processes from the source's `File` ⟕ `Path` into a logged staging table
 * of the catalog database,
 *
 *   psql -c "\copy (SELECT f.fileid, f.jobid, p.path, f.name, f.fileindex, f.deltaseq, f.lstat, f.md5
 *                   FROM file f LEFT JOIN path p USING (pathid)) to stdout" | psql -c "\copy pf_stage from stdin"
 *
 * then one `INSERT … SELECT` applying the catalog's LStat decode (migrations/008_files.sql:
 * `catalog_lstat_field`) into a logged table with the `active_files` columns and
 * `PRIMARY KEY (file_id)`. Wall time of both; and the equivalence of the product's file records
 * (`active_files` of catalog `bench`) with that table.
 */
import { withLongSession } from '../../lib/db';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import type { BenchContext } from './context';
import { fmtInt, fmtS } from './context';
import { filePipeTargets, judge, judgedText } from './targets';

const PSQL = '/usr/bin/psql';
/** Staging table and result table of (pf) in the catalog database. */
export const PF_STAGE = 'bench_pf_stage';
export const PF_TABLE = 'bench_pf';

/** The source side of (pf). */
export const PF_SELECT =
  'SELECT f.fileid, f.jobid, p.path, f.name, f.fileindex, f.deltaseq, f.lstat, f.md5 FROM file f LEFT JOIN path p USING (pathid)';

/** What (pf) measured. */
export interface FilePipeOutcome {
  rows: number;
  /** Pipe plus INSERT … SELECT (ms). */
  ms: number;
  pipeMs: number;
  insertMs: number;
  rate: number;
}

/** Runs the psql pipe under bash (pipefail); resolves with the rows the receiving psql reported. */
async function runPipe(ctx: BenchContext): Promise<number> {
  const psql = fs.existsSync(PSQL) ? PSQL : 'psql';
  const script = [
    'set -o pipefail',
    `PGDATABASE="$BENCH_SOURCE_DB" ${psql} -X -q -v ON_ERROR_STOP=1 -c "$BENCH_PF_OUT" | PGDATABASE="$BENCH_CATALOG_DB" ${psql} -X -v ON_ERROR_STOP=1 -c "$BENCH_PF_IN"`,
  ].join('\n');
  const child = spawn('/bin/bash', ['-c', script], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...ctx.psqlEnv,
      PGAPPNAME: 'catalog-rebuild:bench:pf',
      BENCH_SOURCE_DB: ctx.sourceDb,
      BENCH_CATALOG_DB: ctx.catalogDb,
      BENCH_PF_OUT: `\\copy (${PF_SELECT}) to stdout`,
      BENCH_PF_IN: `\\copy ${PF_STAGE} from stdin`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
  if (code !== 0) throw new Error(`(pf) psql pipe exited with ${code}:\n${out}\n${err}`);
  return Number(/^COPY (\d+)$/m.exec(out)?.[1] ?? NaN);
}

/** Runs (pf) and prints its figures; leaves table {@link PF_TABLE} for the equivalence check. */
export async function runFilePipeBaseline(ctx: BenchContext): Promise<FilePipeOutcome> {
  const db = ctx.dbs.catalogPool;
  await db.query(`DROP TABLE IF EXISTS ${PF_STAGE}, ${PF_TABLE}`);
  await db.query(
    `CREATE TABLE ${PF_STAGE} (file_id bigint, job_id bigint, path text, name text, file_index integer,
       delta_seq integer, lstat text, md5 text)`,
  );
  await db.query(
    `CREATE TABLE ${PF_TABLE} (job_id text NOT NULL, file_id bigint PRIMARY KEY, path text, name text,
       path_bytes bytea, name_bytes bytea, file_index integer, delta_seq integer, deleted boolean,
       size numeric(20,0), mode integer, uid bigint, gid bigint, mtime timestamptz, md5 text, lstat text)`,
  );
  await ctx.checkpoint();
  const started = Date.now();
  const rows = await runPipe(ctx);
  const pipeMs = Date.now() - started;
  // One statement over every row: no statement timeout (as the product's long steps).
  await withLongSession(db, (c) =>
    c.query(
      `INSERT INTO ${PF_TABLE}
     SELECT job_id::text, file_id, path, name, NULL, NULL, file_index, delta_seq, file_index <= 0,
            catalog_lstat_field(lstat, 8), catalog_lstat_field(lstat, 3)::integer, catalog_lstat_field(lstat, 5),
            catalog_lstat_field(lstat, 6), to_timestamp(catalog_lstat_field(lstat, 12)), md5, lstat
       FROM ${PF_STAGE}`,
    ),
  );
  const ms = Date.now() - started;
  const rate = rows / (ms / 1000);
  ctx.figures.add(
    '(pf) file pipe (\\copy | \\copy into a staging table, then INSERT … SELECT with the LStat decode)',
    `${fmtInt(rate)} file rows/s (${fmtInt(rows)} rows in ${fmtS(ms)}: pipe ${fmtS(pipeMs)}, INSERT … SELECT ${fmtS(ms - pipeMs)}; into a logged table with PRIMARY KEY (file_id))`,
    { rows, ms, pipeMs, insertMs: ms - pipeMs, rowsPerSecond: Math.round(rate) },
  );
  await db.query(`DROP TABLE ${PF_STAGE}`);
  return { rows, ms, pipeMs, insertMs: ms - pipeMs, rate };
}

/** Columns both sides of the file equivalence hash (their text, `|`-separated). */
const FILE_FIELDS = [
  'job_id',
  'file_id',
  'path',
  'name',
  'file_index',
  'delta_seq',
  'deleted',
  'size',
  'mode',
  'uid',
  'gid',
  "to_char(mtime AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')",
  'md5',
  'lstat',
];

/** Count and order-independent digest (sum of a 64-bit hash per record) of file records in `from`. */
async function fileDigest(ctx: BenchContext, from: string, params: unknown[]): Promise<{ rows: number; sum: string }> {
  const line = `concat_ws('|', ${FILE_FIELDS.map((f) => `(${f})::text`).join(', ')})`;
  const { rows } = await withLongSession(ctx.dbs.catalogPool, (c) =>
    c.query<{ n: string; d: string }>(
      `SELECT count(*)::text AS n, coalesce(sum(hashtextextended(${line}, 0)::numeric), 0)::text AS d FROM ${from}`,
      params,
    ),
  );
  return { rows: Number(rows[0].n), sum: rows[0].d };
}

/**
 * Prints the file-level ratio (product file rows/s over (pf)) and whether the product's
 * `active_files` of catalog `catalog` hold the same records as (pf), field by field (exit code 1 if
 * not); drops (pf)'s table.
 * @param productMs wall time of the product's `start --files --wait` (ms).
 */
export async function compareFiles(
  ctx: BenchContext,
  pf: FilePipeOutcome,
  productMs: number,
  catalog: string,
): Promise<void> {
  const rate = pf.rows / (productMs / 1000);
  const judged = judge(rate / pf.rate, filePipeTargets(pf.rows));
  ctx.figures.add(
    'files: product/(pf)',
    `${judgedText(judged)}: product ${fmtInt(rate)} file rows/s over the whole rebuild (${fmtS(productMs)}, jobs included), (pf) ${fmtInt(pf.rate)}`,
    {
      ratio: judged.value,
      targets: judged.targets,
      productFileRowsPerSecond: Math.round(rate),
      pfRowsPerSecond: Math.round(pf.rate),
    },
  );
  const a = await fileDigest(ctx, PF_TABLE, []);
  const b = await fileDigest(ctx, 'active_files WHERE catalog_name = $1', [catalog]);
  const same = a.rows === pf.rows && a.rows === b.rows && a.sum === b.sum;
  ctx.figures.add(
    'files: equivalence',
    same
      ? `(pf) and the product hold the same ${fmtInt(a.rows)} file records, field by field (digest ${a.sum})`
      : `DIFFERENT: (pf) ${a.rows}/${a.sum}, product ${b.rows}/${b.sum}`,
    { same, pf: a, product: b },
  );
  if (!same) process.exitCode = 1;
  await ctx.dbs.catalogPool.query(`DROP TABLE ${PF_TABLE}`);
}
