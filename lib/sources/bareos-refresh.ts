/**
 * A refresh's change detection on a director catalog, inside the source database, O(jobs) on the
 * source and never O(file records):
 * - candidates: the jobs whose row, or whose Client, Pool or FileSet row, a transaction wrote since
 *   the active version's plan (their `xmin` is at most `distance` transactions old), with their row
 *   hash (lib/sources/bareos-columns.ts `bareosRowHash`: the row as the product writes it, with
 *   `JobFiles` and `PurgedFiles`), computed only for them: one scan of `job` that builds no text for
 *   the others;
 * - jobs and key offsets per cell of 64 keys (one pass over the primary key), which tell the cells
 *   where jobs were deleted, and key counts per key range (for a refresh's reconciliation);
 * - the keys of such a cell or range (index-only), to name the deleted jobs.
 * Rows the page would quarantine are never hashed (their text may not convert).
 */
import type { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Pool } from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { withLongSession, withRangeScanSession } from '../db';
import type { SourceTextMode } from './bareos-columns';
import {
  BAREOS_FROM_JOB,
  bareosRowHash,
  bareosRejectCondition,
  jobIdArrayLiteral,
  jobIdLiteral,
  LONG_CLIENT_IDS_SQL,
} from './bareos-columns';
import { zoneOperand } from './zone-operand';
import { FILE_WEIGHT } from './bareos-files';
import { cellCodeSql } from '../refresh';
import type { RefreshCandidates, SourceJobHash } from './types';

/**
 * SQL: the candidates at or below `$2`: key and row hash (NULL for a job the page would quarantine),
 * by key; `$1` the largest transaction age (int) that counts as written since the active version's
 * plan; naive times read in `zone` ({@link zoneOperand}). `longClientIds`:
 * lib/sources/bareos-columns.ts LONG_CLIENT_IDS_SQL.
 * The Clients, Pools and FileSets written since are looked up first (small tables), so the scan of
 * `job` filters on its own columns and only the candidates are joined: at 10^6 jobs 0.4 s against
 * 1.6 s for a filter on the joined rows' `xmin` (docs/performance.md).
 */
export function candidatesQuery(mode: SourceTextMode, longClientIds: string, zone: string): string {
  const rejected = bareosRejectCondition(mode, longClientIds);
  const hash = bareosRowHash(mode, zoneOperand(zone));
  return `SELECT j.jobid::text AS key, CASE WHEN ${rejected} THEN NULL ELSE ${hash}::text END AS hash
          ${BAREOS_FROM_JOB}
          WHERE j.jobid <= $2::bigint
            AND (age(j.xmin) <= $1::int
                 OR j.clientid IN (SELECT clientid FROM client WHERE age(xmin) <= $1::int)
                 OR j.poolid IN (SELECT poolid FROM pool WHERE age(xmin) <= $1::int)
                 OR j.filesetid IN (SELECT filesetid FROM fileset WHERE age(xmin) <= $1::int))
          ORDER BY j.jobid`;
}

/**
 * SQL: the transactions between `$1` (an xid8 as text: the active version's plan horizon) and the
 * source's next transaction now, as `n` (numeric); the horizon of this plan as `horizon` (xid8 text).
 */
export const HORIZON_DISTANCE_SQL = `SELECT (pg_snapshot_xmax(pg_current_snapshot())::text::numeric - $1::numeric)::text AS n,
        pg_snapshot_xmin(pg_current_snapshot())::text AS horizon`;

/**
 * SQL: jobs at or below `$2` per range (`$1` the ranges' first keys, bigint[] ascending; index 0
 * below the first), as `r`, `n`: an index-only scan of the primary key.
 */
export const RANGE_KEY_COUNTS_SQL = `SELECT width_bucket(jobid, $1::bigint[]) AS r, count(*)::text AS n
   FROM job WHERE jobid <= $2::bigint GROUP BY 1`;

/**
 * SQL: the job ids of range `r` (`r.lo`, `r.hi`) at or below `maxKey`, as one range scan of the
 * primary key per range: `OFFSET 0` keeps the subquery apart, so PostgreSQL cannot join the ranges
 * by filtering every key against every range (a nested loop of 10^6 × ranges comparisons).
 */
const rangeScan = (maxKey: string) =>
  `SELECT jobid FROM job WHERE jobid BETWEEN r.lo AND r.hi AND jobid <= ${maxKey}::bigint OFFSET 0`;

/**
 * SQL: per cell of `width` key values (the key divided by `width`, truncated), the jobs at or
 * below `maxKey` as a cell code (lib/refresh.ts `cellCodeSql`: their count and the sum of their keys' offsets in the cell;
 * NULL out of span): columns cell, code; only cells that hold a job. One pass over the primary
 * key's values, grouped by a hash aggregate on the cell: nothing but one row per 64 keys leaves the
 * source. Literal values (it runs as a COPY, which takes no parameters).
 * @throws Error when `maxKey` is not a job id or `width` not a positive integer.
 */
export function keyCellsSql(maxKey: string, width: number): string {
  if (!Number.isSafeInteger(width) || width < 1) throw new Error(`not a cell width: ${width}`);
  return `SELECT b, ${cellCodeSql('count(*)', 'sum(o)')}::int
   FROM (SELECT jobid / ${width}::bigint AS b, jobid - jobid / ${width}::bigint * ${width}::bigint AS o
         FROM job WHERE jobid <= ${jobIdLiteral(maxKey)}::bigint) k
   GROUP BY b`;
}

/**
 * SQL: the job keys (`j.jobid`, as decimal text) at or below `maxKey` in the inclusive ranges of the
 * arrays `lo` and `hi` (SQL expressions). Text, as the catalog's keys are read: a director's JobId is
 * an `integer`, which node-postgres would hand over as a Number, and a key compared with its text
 * would match nothing.
 */
const keysInRangesSql = (lo: string, hi: string, maxKey: string) =>
  `SELECT j.jobid::text AS key FROM unnest(${lo}, ${hi}) AS r(lo, hi) CROSS JOIN LATERAL (${rangeScan(maxKey)}) j`;

/** SQL: the job keys at or below `$3` in the inclusive ranges (`$1` first, `$2` last keys), ascending. */
export const KEYS_IN_RANGES_SQL = `${keysInRangesSql('$1::bigint[]', '$2::bigint[]', '$3')} ORDER BY j.jobid`;

/** The source's transaction horizon now: the oldest transaction still running (xid8 text). */
export async function sourceHorizon(pool: Pool): Promise<string> {
  const { rows } = await pool.query<{ h: string }>(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS h`);
  return rows[0].h;
}

/**
 * The jobs at or below `maxKey` written since the horizon `since` (xid8 text), with their row
 * hashes, in one scan of `job` on a session without statement timeout (see {@link candidatesQuery}).
 * @returns null when the horizon is out of reach: more than 2^31 transactions back (`age()` counts
 *   in 32 bits), or ahead of the source's transactions (another server).
 */
export async function refreshCandidates(
  pool: Pool,
  s: { tz: string; mode: SourceTextMode },
  maxKey: string,
  since: string,
): Promise<RefreshCandidates | null> {
  if (!/^\d+$/.test(since)) return null;
  return withLongSession(pool, async (c) => {
    const d = await c.query<{ n: string; horizon: string }>(HORIZON_DISTANCE_SQL, [since]);
    const distance = Number(d.rows[0].n);
    if (!Number.isSafeInteger(distance) || distance < 0 || distance >= 2 ** 31) return null;
    const long = await c.query<{ ids: string }>(LONG_CLIENT_IDS_SQL);
    const { rows } = await c.query<SourceJobHash>(candidatesQuery(s.mode, long.rows[0].ids, s.tz), [distance, maxKey]);
    return { jobs: rows, horizon: d.rows[0].horizon };
  });
}

/** Jobs at or below `maxKey` per range (see {@link RANGE_KEY_COUNTS_SQL}): range index → jobs. */
export async function rangeKeyCounts(pool: Pool, maxKey: string, firstKeys: string[]): Promise<Map<number, number>> {
  const { rows } = await withLongSession(pool, (c) =>
    c.query<{ r: number; n: string }>(RANGE_KEY_COUNTS_SQL, [firstKeys, maxKey]),
  );
  return new Map(rows.map((r) => [r.r, Number(r.n)]));
}

/**
 * Streams the source's cells (see {@link keyCellsSql}) as COPY text (cell, code) into `into`, a
 * catalog `COPY … FROM STDIN`, on a session without statement timeout: no cell becomes a
 * JavaScript object. Resolves when `into` has finished.
 * @throws the source's or `into`'s errors (both streams are ended).
 */
export async function copyKeyCells(pool: Pool, maxKey: string, width: number, into: Writable): Promise<void> {
  const sql = keyCellsSql(maxKey, width);
  await withLongSession(pool, (c) => pipeline(c.query(copyTo(`COPY (${sql}) TO STDOUT`)), into));
}

/** The job keys at or below `maxKey` in the inclusive `ranges`, ascending (index-only). */
export async function keysInRanges(
  pool: Pool,
  maxKey: string,
  ranges: { firstKey: string; lastKey: string }[],
): Promise<string[]> {
  if (!ranges.length) return [];
  const { rows } = await withRangeScanSession(pool, (c) =>
    c.query<{ key: string }>(KEYS_IN_RANGES_SQL, [ranges.map((r) => r.firstKey), ranges.map((r) => r.lastKey), maxKey]),
  );
  return rows.map((r) => r.key);
}

/**
 * Streams the job keys at or below `maxKey` in the inclusive `ranges` as COPY text (one key per
 * line) into `into`, a catalog `COPY … FROM STDIN` (index-only, JIT off; the ranges as literal
 * arrays, since a COPY takes no parameters). Resolves when `into` has finished.
 * @throws Error for a key or bound that is not a job id; the source's or `into`'s errors.
 */
export async function copyKeysInRanges(
  pool: Pool,
  maxKey: string,
  ranges: { firstKey: string; lastKey: string }[],
  into: Writable,
): Promise<void> {
  const sql = keysInRangesSql(
    jobIdArrayLiteral(ranges.map((r) => r.firstKey)),
    jobIdArrayLiteral(ranges.map((r) => r.lastKey)),
    jobIdLiteral(maxKey),
  );
  await withRangeScanSession(pool, (c) => pipeline(c.query(copyTo(`COPY (${sql}) TO STDOUT`)), into));
}

/**
 * The file records the jobs `keys` are expected to have (`FILE_WEIGHT`: their `JobFiles` unless they
 * keep none), summed; with `keys` null, of every job at or below `maxKey`. One statement on a
 * session without statement timeout.
 */
export async function expectedFileRecords(pool: Pool, keys: string[] | null, maxKey?: string): Promise<number> {
  const { rows } = await withLongSession(pool, (c) =>
    c.query<{ n: string }>(
      `SELECT coalesce(sum(${FILE_WEIGHT}), 0)::text AS n FROM job j
       WHERE ($1::bigint[] IS NULL OR j.jobid = ANY ($1::bigint[])) AND ($2::bigint IS NULL OR j.jobid <= $2::bigint)`,
      [keys, maxKey ?? null],
    ),
  );
  return Number(rows[0].n);
}
