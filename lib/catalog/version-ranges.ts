/**
 * The key ranges of a version (`version_range`, migration 014) and the reads a refresh's change
 * detection makes per range: jobs, keys and row hashes, over every segment of
 * the version (lib/catalog/segments.ts), superseded rows left out. Identifiers are escaped with
 * pg-format's %I.
 */
import type { Writable } from 'node:stream';
import type { PoolClient } from 'pg';
import format from 'pg-format';
import type { Queryable } from '../db';
import { copyInto } from '../db';
import { partitionName } from './partitions';
import { refreshChangesSql, versionSegments } from './segments';

/**
 * SQL: the job keys of segment `segment` in range `r` (`r.lo`, `r.hi`) that are in the version
 * `version` (SQL: a parameter), as one range scan of its `job_key` index per range: `OFFSET 0` keeps
 * the subquery apart, so PostgreSQL cannot join the ranges by filtering every row against every
 * range.
 */
const inRange = (segment: string, version: string) =>
  format(
    `SELECT job_key FROM %I WHERE job_key BETWEEN r.lo AND r.hi AND (superseded_by IS NULL OR superseded_by > ${version}) OFFSET 0`,
    partitionName(segment),
  );

/** A key range of a version with its jobs and their row-hash digest (`version_range`). */
export interface VersionRange {
  rangeNo: number;
  /** First and last job key of the range, decimal text. */
  firstKey: string;
  lastKey: string;
  jobs: number;
  /** Sum modulo 2^64 of the jobs' row hashes, decimal text; `''` when not known. */
  digest: string;
}

/**
 * A full rebuild's ranges: its committed pages (ledger rows: key range, rows written, the rows'
 * digest taken as they were copied), stored as the version's `version_range`. Idempotent.
 */
export async function storeRangesFromLedger(db: Queryable, versionId: string): Promise<number> {
  const r = await db.query(
    `INSERT INTO version_range (version_id, range_no, first_key, last_key, jobs, digest)
     SELECT version_id, page_no, first_key, last_key, rows, checksum FROM page
     WHERE version_id = $1 AND committed_at IS NOT NULL
     ON CONFLICT (version_id, range_no) DO NOTHING`,
    [versionId],
  );
  return r.rowCount ?? 0;
}

/** Stores a refresh's ranges (replacing any stored before). */
export async function storeRanges(db: Queryable, versionId: string, ranges: VersionRange[]): Promise<void> {
  await db.query(`DELETE FROM version_range WHERE version_id = $1`, [versionId]);
  if (!ranges.length) return;
  await db.query(
    `INSERT INTO version_range (version_id, range_no, first_key, last_key, jobs, digest)
     SELECT $1, r, f, l, j, d FROM unnest($2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[]) AS u(r, f, l, j, d)`,
    [
      versionId,
      ranges.map((r) => r.rangeNo),
      ranges.map((r) => r.firstKey),
      ranges.map((r) => r.lastKey),
      ranges.map((r) => r.jobs),
      ranges.map((r) => r.digest),
    ],
  );
}

/** A version's stored ranges, in key order. */
export async function readRanges(db: Queryable, versionId: string): Promise<VersionRange[]> {
  const { rows } = await db.query<{ r: number; f: string; l: string; j: string; d: string }>(
    `SELECT range_no AS r, first_key::text AS f, last_key::text AS l, jobs::text AS j, digest AS d
     FROM version_range WHERE version_id = $1 ORDER BY first_key`,
    [versionId],
  );
  return rows.map((x) => ({ rangeNo: x.r, firstKey: x.f, lastKey: x.l, jobs: Number(x.j), digest: x.d }));
}

/**
 * Stored row hashes of the jobs `keys` (decimal text) in version `versionId` (all its segments,
 * superseded rows left out): key → hash (decimal text, null when none was stored). Uses the
 * segments' `job_key` indexes: O(keys).
 */
export async function versionRowHashes(
  db: Queryable,
  versionId: string,
  keys: string[],
): Promise<Map<string, string | null>> {
  const out = new Map<string, string | null>();
  if (!keys.length) return out;
  for (const s of await versionSegments(db, versionId)) {
    const { rows } = await db.query<{ k: string; h: string | null }>(
      format(
        `SELECT job_key::text AS k, row_hash::text AS h FROM %I
         WHERE job_key = ANY ($1::bigint[]) AND (superseded_by IS NULL OR superseded_by > $2)`,
        partitionName(s),
      ),
      [keys, versionId],
    );
    for (const r of rows) out.set(r.k, r.h);
  }
  return out;
}

/**
 * SQL: the job keys (`k`) of the segments `segments` in the version `$3`, superseded rows left out,
 * in the inclusive ranges of CTE `r` (`lo`, `hi`): one range scan of each segment's `job_key`
 * index per range.
 */
const versionKeysInRangesSql = (segments: string[]): string =>
  segments.map((s) => `SELECT t.job_key AS k FROM r CROSS JOIN LATERAL (${inRange(s, '$3')}) t`).join(' UNION ALL ');

/** SQL: the CTE `r` of the inclusive ranges `$1` (first keys) and `$2` (last keys). */
const RANGES_CTE = `r AS MATERIALIZED (SELECT lo, hi FROM unnest($1::bigint[], $2::bigint[]) AS r(lo, hi))`;

/**
 * The job keys of version `versionId` (all its segments, superseded rows left out) in the
 * inclusive `ranges`, ascending. Uses the segments' `job_key` indexes: O(the ranges' rows).
 */
export async function versionKeysInRanges(
  db: Queryable,
  versionId: string,
  ranges: { firstKey: string; lastKey: string }[],
): Promise<string[]> {
  if (!ranges.length) return [];
  const segments = await versionSegments(db, versionId);
  const { rows } = await db.query<{ k: string }>(
    `WITH ${RANGES_CTE} SELECT k::text AS k FROM (${versionKeysInRangesSql(segments)}) v ORDER BY v.k`,
    [ranges.map((r) => r.firstKey), ranges.map((r) => r.lastKey), versionId],
  );
  return rows.map((r) => r.k);
}

/** The temporary table a refresh's detection copies the source's keys of differing cells into. */
const SOURCE_KEYS = 'refresh_source_key';

/** Creates the session's temporary table of source keys unless it exists. */
const createSourceKeys = (c: PoolClient) =>
  c.query(`CREATE TEMP TABLE IF NOT EXISTS ${SOURCE_KEYS} (key bigint NOT NULL)`);

/**
 * Adds source keys to the session's temporary table of them (created on first use) through `fill`
 * (the source's `copyKeysInRanges`: COPY text of one key per line), streamed without a key
 * becoming a JavaScript object. Run on the detection's own session (no statement timeout; the
 * session is discarded afterwards), then {@link sourceKeyDifferences} on it.
 * @throws the catalog's or `fill`'s errors.
 */
export async function stageSourceKeys(c: PoolClient, fill: (into: Writable) => Promise<void>): Promise<void> {
  await createSourceKeys(c);
  await copyInto(c, `COPY ${SOURCE_KEYS} (key) FROM STDIN`, fill);
}

/**
 * The keys of the inclusive `ranges` on which the source keys staged on this session
 * ({@link stageSourceKeys}) and version `versionId` (all its segments, superseded rows left out)
 * disagree: `deletedKeys`, the version's that the source no longer has, and `missing`, the
 * source's that the version lacks and that are not `candidates` (written since the version: a
 * job the version is missing, or one quarantined before). Both ascending, decimal text. One
 * statement; the version's keys by the segments' `job_key` indexes, range by range.
 * @throws the catalog's errors.
 */
export async function sourceKeyDifferences(
  c: PoolClient,
  versionId: string,
  ranges: { firstKey: string; lastKey: string }[],
  candidates: string[],
): Promise<{ deletedKeys: string[]; missing: string[] }> {
  if (!ranges.length) return { deletedKeys: [], missing: [] };
  await createSourceKeys(c);
  await c.query(`ANALYZE ${SOURCE_KEYS}`);
  const version = versionKeysInRangesSql(await versionSegments(c, versionId));
  const { rows } = await c.query<{ gone: boolean; k: string }>(
    `WITH ${RANGES_CTE},
          v AS MATERIALIZED (${version}),
          s AS MATERIALIZED (SELECT DISTINCT key AS k FROM ${SOURCE_KEYS})
     SELECT true AS gone, k FROM (SELECT k FROM v EXCEPT SELECT k FROM s) d
     UNION ALL
     SELECT false, k FROM (SELECT k FROM s EXCEPT SELECT k FROM v EXCEPT SELECT unnest($4::bigint[])) m
     ORDER BY 1 DESC, 2`,
    [ranges.map((r) => r.firstKey), ranges.map((r) => r.lastKey), versionId, candidates],
  );
  const deletedKeys: string[] = [];
  const missing: string[] = [];
  for (const r of rows) (r.gone ? deletedKeys : missing).push(r.k);
  return { deletedKeys, missing };
}

/**
 * Jobs of version `versionId` per inclusive range (all its segments, superseded rows left out):
 * range → jobs, for the given ranges only. Uses the segments' `job_key` indexes.
 */
export async function versionRangeCounts(
  db: Queryable,
  versionId: string,
  ranges: VersionRange[],
): Promise<Map<number, number>> {
  const out = new Map<number, number>(ranges.map((r) => [r.rangeNo, 0]));
  if (!ranges.length) return out;
  for (const s of await versionSegments(db, versionId)) {
    const { rows } = await db.query<{ r: number; n: string }>(
      format(
        `SELECT r.no AS r, count(t.job_key)::text AS n FROM unnest($1::int[], $2::bigint[], $3::bigint[]) AS r(no, lo, hi)
         CROSS JOIN LATERAL (%s) t GROUP BY r.no`,
        inRange(s, '$4'),
      ),
      [ranges.map((r) => r.rangeNo), ranges.map((r) => r.firstKey), ranges.map((r) => r.lastKey), versionId],
    );
    for (const r of rows) out.set(r.r, (out.get(r.r) ?? 0) + Number(r.n));
  }
  return out;
}

/**
 * Jobs per range of refresh `versionId` (its `ranges`, by first key, as its plan stored them: its
 * base's `baseRanges`, by first key, then ranges above the base's watermark): each base range's
 * jobs, plus the refresh's own rows in it, less the rows it superseded there (found by the
 * `superseded_by` index of each segment). O(changes); the same for every call (idempotent).
 * @returns `ranges` with their jobs.
 */
export async function refreshRangeCounts(
  db: Queryable,
  versionId: string,
  ranges: VersionRange[],
  baseRanges: VersionRange[],
): Promise<VersionRange[]> {
  const delta = new Map<number, number>();
  if (ranges.length) {
    const changes = await refreshChangesSql(db, versionId, 'width_bucket(job_key, $1::bigint[]) AS r, sign AS n');
    const { rows } = await db.query<{ r: number; n: string }>(
      `SELECT r, sum(n)::text AS n FROM (${changes}) c GROUP BY r`,
      [ranges.map((r) => r.firstKey)],
    );
    for (const r of rows) delta.set(r.r, Number(r.n));
  }
  return ranges.map((r, i) => ({ ...r, jobs: (baseRanges[i]?.jobs ?? 0) + (delta.get(i + 1) ?? 0) }));
}
