/**
 * A version's jobs per cell of job keys (`page_cell`, `version_cell`, migration 017): the catalog
 * side of a refresh's search for deleted jobs, read instead of the version's table.
 * - Each page of a full rebuild stores its cells in its transaction, from the rows it wrote
 *   (lib/page/digest.ts); the seal sums them per version.
 * - A refresh's are its base's, less the rows it superseded, plus its own rows: O(changes).
 * - Else (a page written row by row, a version repaired after its seal, a base without them) they
 *   are counted on the version's table, every segment, superseded rows left out.
 * A cell is the key divided by {@link KEY_CELL_WIDTH}, truncated toward zero, as PostgreSQL divides.
 * Identifiers are escaped with pg-format's %I.
 */
import type { Writable } from 'node:stream';
import type { PoolClient } from 'pg';
import format from 'pg-format';
import type { Queryable } from '../db';
import { copyInto } from '../db';
import { CELL_CODE_JOBS, cellCodeSql, KEY_CELL_WIDTH } from '../refresh';
import { partitionName } from './partitions';
import { refreshChangesSql, versionSegments } from './segments';

/** A page's rows of one cell of job keys, as lib/page/digest.ts adds them up from its COPY stream. */
export interface StoredCellFigures {
  /** The cell: a job key divided by {@link KEY_CELL_WIDTH}, truncated toward zero, decimal text. */
  cell: string;
  /** Rows. */
  jobs: number;
  /** Sum of their job keys, decimal text. */
  keySum: string;
}

/**
 * Stores a page's cell figures and marks its ledger row as having them (`cell_figures`), inside the
 * page transaction, after its ledger row was claimed.
 */
export async function storePageCells(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  cells: StoredCellFigures[],
): Promise<void> {
  await c.query(`DELETE FROM page_cell WHERE version_id = $1 AND page_no = $2`, [versionId, pageNo]);
  if (cells.length)
    await c.query(
      `INSERT INTO page_cell (version_id, page_no, cell, jobs, key_sum)
       SELECT $1, $2, b, j, s FROM unnest($3::bigint[], $4::bigint[], $5::numeric[]) AS t(b, j, s)`,
      [versionId, pageNo, cells.map((x) => x.cell), cells.map((x) => x.jobs), cells.map((x) => x.keySum)],
    );
  await c.query(`UPDATE page SET cell_figures = true WHERE version_id = $1 AND page_no = $2`, [versionId, pageNo]);
}

/** Whether `versionId`'s cells are stored (`version.key_cells`). */
async function hasStoredCells(db: Queryable, versionId: string): Promise<boolean> {
  const { rowCount } = await db.query(`SELECT 1 FROM version WHERE version_id = $1 AND key_cells`, [versionId]);
  return !!rowCount;
}

/** SQL: `cell`, `n` (jobs), `s` (key sum) per cell of the live rows of segment `segment` in version `$1`. */
const segmentCellsSql = (segment: string): string =>
  format(
    `SELECT job_key / %s AS cell, count(*) AS n, sum(job_key) AS s FROM %I
     WHERE superseded_by IS NULL OR superseded_by > $1 GROUP BY 1`,
    KEY_CELL_WIDTH.toString(),
    partitionName(segment),
  );

/** Replaces the stored cells of `versionId` with the rows of `cellsSql` (`cell`, `n`, `s`; its `$1` the version), summed per cell. */
async function replaceVersionCells(db: Queryable, versionId: string, cellsSql: string): Promise<void> {
  await db.query(`DELETE FROM version_cell WHERE version_id = $1`, [versionId]);
  await db.query(
    `INSERT INTO version_cell (version_id, cell, jobs, key_sum)
     SELECT $1, cell, sum(n), sum(s) FROM (${cellsSql}) t GROUP BY cell HAVING sum(n) > 0`,
    [versionId],
  );
  await db.query(`UPDATE version SET key_cells = true WHERE version_id = $1`, [versionId]);
}

/**
 * Stores a full rebuild's cells from its committed pages' figures. Idempotent.
 * @returns false, storing nothing, when a committed page stored none (it was written row by row).
 */
export async function storeVersionCellsFromPages(db: Queryable, versionId: string): Promise<boolean> {
  const missing = await db.query(
    `SELECT 1 FROM page WHERE version_id = $1 AND committed_at IS NOT NULL AND NOT cell_figures LIMIT 1`,
    [versionId],
  );
  if (missing.rowCount) return false;
  await replaceVersionCells(
    db,
    versionId,
    `SELECT c.cell, c.jobs AS n, c.key_sum AS s FROM page_cell c
     JOIN page p ON p.version_id = c.version_id AND p.page_no = c.page_no AND p.committed_at IS NOT NULL
     WHERE c.version_id = $1`,
  );
  return true;
}

/**
 * Stores refresh `versionId`'s cells: its base's, less the rows it superseded (found by the
 * `superseded_by` index of each segment), plus its own rows. O(changes) but for the copy of the
 * base's cells (one row per 64 keys). Idempotent.
 * @returns false, storing nothing, when the base has no stored cells.
 */
export async function storeRefreshVersionCells(
  db: Queryable,
  versionId: string,
  baseVersionId: string,
): Promise<boolean> {
  if (!(await hasStoredCells(db, baseVersionId))) return false;
  const changes = await refreshChangesSql(
    db,
    versionId,
    format('job_key / %s AS cell, sign AS n, sign * job_key AS s', KEY_CELL_WIDTH.toString()),
  );
  const base = format(`SELECT cell, jobs AS n, key_sum AS s FROM version_cell WHERE version_id = %L`, baseVersionId);
  await replaceVersionCells(db, versionId, `${base} UNION ALL ${changes}`);
  return true;
}

/**
 * Stores `versionId`'s cells counted on its table (every segment, superseded rows left out): one
 * scan per segment; run it on a session without statement timeout. Idempotent.
 */
export async function storeVersionCellsFromTable(db: Queryable, versionId: string): Promise<void> {
  const segments = await versionSegments(db, versionId);
  await replaceVersionCells(db, versionId, segments.map(segmentCellsSql).join(' UNION ALL '));
}

/** The temporary table a refresh's detection copies the source's cells into, on its own session. */
const SOURCE_CELLS = 'refresh_source_cell';

/**
 * The source's jobs in the cells staged on this session ({@link stageSourceCells}), from their
 * codes (jobs × 8,192 plus the offsets' sum plus 4,096: lib/refresh.ts `cellCodeSql`); a cell
 * without a code (its offsets out of span: never for keys at or above 0) is not counted.
 */
export async function stagedSourceJobs(c: PoolClient): Promise<number> {
  const { rows } = await c.query<{ n: string }>(
    `SELECT coalesce(sum(code / ${CELL_CODE_JOBS}), 0)::text AS n FROM ${SOURCE_CELLS} WHERE code IS NOT NULL`,
  );
  return Number(rows[0].n);
}

/**
 * Creates the session's temporary table of the source's cells and fills it through `fill` (the
 * source's `copyKeyCells`: COPY text of cell and cell code), streamed from the source without a row
 * becoming a JavaScript object. Run it on a session of its own without statement timeout, then
 * {@link differingCellsOfSource} on the same session; the session is discarded afterwards.
 * @throws the catalog's or `fill`'s errors.
 */
export async function stageSourceCells(c: PoolClient, fill: (into: Writable) => Promise<void>): Promise<void> {
  await c.query(`CREATE TEMP TABLE ${SOURCE_CELLS} (cell bigint NOT NULL, code int)`);
  await copyInto(c, `COPY ${SOURCE_CELLS} (cell, code) FROM STDIN`, fill);
  await c.query(`ANALYZE ${SOURCE_CELLS}`);
}

/**
 * The cells (decimal text, ascending) whose jobs differ between the source's cells staged on this
 * session ({@link stageSourceCells}) and `versionId`'s, once the new keys `added` (in the source
 * only) are counted in: by jobs or by the sum of their keys' offsets, so a cell where one job left
 * and another came is found too. A cell on one side only differs; so does a cell without a code on
 * either side (its offsets out of span). The version's cells are its stored ones or, with none
 * stored, counted on its table (one scan per segment). One statement in the catalog: only the
 * differing cells reach the worker.
 * @throws the catalog's errors.
 */
export async function differingCellsOfSource(c: PoolClient, versionId: string, added: string[]): Promise<string[]> {
  const w = KEY_CELL_WIDTH.toString();
  const stored = await hasStoredCells(c, versionId);
  const segments = stored ? [] : await versionSegments(c, versionId);
  const figures = stored
    ? `SELECT cell, jobs AS n, key_sum AS s FROM version_cell WHERE version_id = $1`
    : `SELECT cell, sum(n) AS n, sum(s) AS s FROM (${segments.map(segmentCellsSql).join(' UNION ALL ')}) t
       GROUP BY cell HAVING sum(n) > 0`;
  const { rows } = await c.query<{ cell: string }>(
    `WITH v AS (SELECT f.cell, f.n, f.s - f.n::numeric * ${w} * f.cell AS o FROM (${figures}) f),
          a AS (SELECT k / ${w} AS cell, count(*) AS n, sum(k - k / ${w} * ${w}) AS o
                FROM unnest($2::bigint[]) AS t(k) GROUP BY 1),
          e AS (SELECT coalesce(v.cell, a.cell) AS cell,
                       CASE WHEN v.cell IS NOT NULL AND ${cellCodeSql('v.n', 'v.o')} IS NULL THEN NULL
                            ELSE ${cellCodeSql('coalesce(v.n, 0) + coalesce(a.n, 0)', 'coalesce(v.o, 0) + coalesce(a.o, 0)')} END AS code
                FROM v FULL JOIN a ON a.cell = v.cell)
     SELECT coalesce(s.cell, e.cell) AS cell FROM ${SOURCE_CELLS} s FULL JOIN e ON e.cell = s.cell
     WHERE (s.code = e.code) IS NOT TRUE ORDER BY 1`,
    [versionId, added],
  );
  return rows.map((r) => r.cell);
}

/**
 * Deletes the figures stored for a version whose rows are dropped: its pages' bucket and cell
 * figures (`page_bucket`, `page_cell`) and its cells (`version_cell`, `key_cells` cleared). Its
 * ledger rows, ranges and jobs per bucket stay, as the version's history. Idempotent.
 */
export async function deleteStoredFigures(db: Queryable, versionId: string): Promise<void> {
  await db.query(`DELETE FROM page_bucket WHERE version_id = $1`, [versionId]);
  await db.query(`DELETE FROM page_cell WHERE version_id = $1`, [versionId]);
  await db.query(`DELETE FROM version_cell WHERE version_id = $1`, [versionId]);
  await db.query(`UPDATE version SET key_cells = false WHERE version_id = $1`, [versionId]);
}
