/**
 * What a refresh's plan reads and stores in the catalog database: the version it builds on (the
 * catalog's active one, with the settings a refresh must share), the refresh's facts on its version
 * row, and the keys of its pages (`plan_page_key`).
 */
import type { Queryable } from '../db';
import type { RefreshPlanCounts } from '../refresh';

/** The active version of a catalog as a refresh would build on it. */
export interface RefreshBase {
  versionId: string;
  sourceName: string;
  /** IANA zone its source's naive times were read in. */
  timezone: string;
  /** The legacy encoding its source's text was decoded from (null: not recorded). */
  legacyEncoding: string | null;
  /** The row mapping version it was written with (lib/sources/bareos-columns.ts ROW_MAPPING_VERSION; 0: not recorded). */
  rowMapping: number;
  /** It holds file records (`--files`). */
  files: boolean;
  /** The source's transaction horizon at its plan (xid8 text); null when not recorded. */
  horizon: string | null;
  /** Its watermark (decimal text; null for an empty source). */
  watermarkKey: string | null;
  /** A later version of the catalog was published and rolled back from: the active one is not the newest. */
  rolledBack: boolean;
  /** sha256 of the listing it was built from (listing sources); null for director catalogs. */
  snapshot: string | null;
}

/** The active version of `catalog` as a refresh base; null when the catalog has none. */
export async function readRefreshBase(db: Queryable, catalog: string): Promise<RefreshBase | null> {
  const { rows } = await db.query<{
    version_id: string;
    source_name: string;
    source_timezone: string;
    legacy_encoding: string | null;
    row_mapping: number;
    files: boolean;
    source_horizon: string | null;
    watermark_key: string | null;
    rolled_back: boolean;
    source_snapshot: string | null;
  }>(
    `SELECT v.version_id::text, v.source_name, v.source_timezone, v.legacy_encoding, v.row_mapping, v.files,
            v.source_horizon, v.watermark_key::text, v.source_snapshot,
            EXISTS (SELECT 1 FROM version n WHERE n.catalog_name = v.catalog_name AND n.version_id > v.version_id
                      AND n.published_at IS NOT NULL) AS rolled_back
     FROM active a JOIN version v USING (version_id) WHERE a.catalog_name = $1`,
    [catalog],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    versionId: r.version_id,
    sourceName: r.source_name,
    timezone: r.source_timezone,
    legacyEncoding: r.legacy_encoding,
    rowMapping: r.row_mapping,
    files: r.files,
    horizon: r.source_horizon,
    watermarkKey: r.watermark_key,
    rolledBack: r.rolled_back,
    snapshot: r.source_snapshot,
  };
}

/** What a version records of how its source was read, for the next refresh to compare. */
export interface SourceReadFacts {
  /** The version it was refreshed from; null for a full rebuild. */
  baseVersionId: string | null;
  /** The source's transaction horizon at the plan (xid8 text); null for sources without one. */
  horizon: string | null;
  /** The legacy encoding of the source's text. */
  legacyEncoding: string | null;
  /** The row mapping version. */
  rowMapping: number;
}

/** Records `facts` on the version row. */
export async function setSourceReadFacts(db: Queryable, versionId: string, facts: SourceReadFacts): Promise<void> {
  await db.query(
    `UPDATE version SET base_version_id = $2, source_horizon = $3, legacy_encoding = $4, row_mapping = $5
     WHERE version_id = $1`,
    [versionId, facts.baseVersionId, facts.horizon, facts.legacyEncoding, facts.rowMapping],
  );
}

/** The version a version was refreshed from; null for a full rebuild (or an unknown version). */
export async function baseVersionOf(db: Queryable, versionId: string): Promise<string | null> {
  const { rows } = await db.query<{ b: string | null }>(
    `SELECT base_version_id::text AS b FROM version WHERE version_id = $1`,
    [versionId],
  );
  return rows[0]?.b ?? null;
}

/**
 * What the `planned` event of a version planned for a refresh (`start --refresh`) records of it, from
 * its details: the changes of a refresh plan, or why it runs as a full rebuild
 * (`refreshAsFullRebuild`); null for a version planned without `--refresh`, or before its event exists.
 */
export async function refreshPlanFacts(
  db: Queryable,
  versionId: string,
): Promise<RefreshPlanCounts | { fullRebuildBecause: string } | null> {
  const { rows } = await db.query<{ d: Record<string, unknown> }>(
    `SELECT details AS d FROM event WHERE version_id = $1 AND kind = 'planned' ORDER BY event_id LIMIT 1`,
    [versionId],
  );
  const d = rows[0]?.d ?? {};
  if (typeof d.refreshAsFullRebuild === 'string') return { fullRebuildBecause: d.refreshAsFullRebuild };
  if (d.refreshOf === undefined) return null;
  return {
    refreshOf: String(d.refreshOf),
    newJobs: Number(d.newJobs),
    changedJobs: Number(d.changedJobs),
    deletedJobs: Number(d.deletedJobs),
    pagesTotal: Number(d.pagesTotal),
  };
}

/** Stores the keys of a refresh's pages: page n (from 1) processes `pages[n-1]`. */
export async function insertPlanPageKeys(db: Queryable, versionId: string, pages: string[][]): Promise<void> {
  const pageNos: number[] = [];
  const keys: string[] = [];
  pages.forEach((ks, i) => ks.forEach((k) => (pageNos.push(i + 1), keys.push(k))));
  for (let at = 0; at < keys.length; at += 50_000)
    await db.query(
      `INSERT INTO plan_page_key (version_id, page_no, job_key)
       SELECT $1, p, k FROM unnest($2::int[], $3::bigint[]) AS u(p, k) ON CONFLICT DO NOTHING`,
      [versionId, pageNos.slice(at, at + 50_000), keys.slice(at, at + 50_000)],
    );
}

/** The keys of page `pageNo` of a refresh, ascending; null for a page of a full rebuild (no keys stored). */
export async function readPlanPageKeys(db: Queryable, versionId: string, pageNo: number): Promise<string[] | null> {
  const { rows } = await db.query<{ k: string }>(
    `SELECT job_key::text AS k FROM plan_page_key WHERE version_id = $1 AND page_no = $2 ORDER BY job_key`,
    [versionId, pageNo],
  );
  return rows.length ? rows.map((r) => r.k) : null;
}

/**
 * File records of the active version of `catalog` of the jobs `jobIds` (index lookups); with
 * `jobIds` null, of the whole version, estimated from the planner's row counts of its segments'
 * file tables (no scan). 0 when the catalog has no active version.
 */
export async function countActiveFiles(db: Queryable, catalog: string, jobIds: string[] | null): Promise<number> {
  if (jobIds) {
    if (!jobIds.length) return 0;
    const { rows } = await db.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM active_files WHERE catalog_name = $1 AND job_id = ANY ($2::text[])`,
      [catalog, jobIds],
    );
    return Number(rows[0].n);
  }
  const { rows } = await db.query<{ n: string | null }>(
    `SELECT sum(greatest(c.reltuples, 0))::bigint::text AS n
     FROM active a JOIN version v USING (version_id), unnest(v.segment_ids) s(segment_id)
     JOIN pg_class c ON c.relname = 'file_v' || s.segment_id::text AND c.relkind = 'r'
     WHERE a.catalog_name = $1`,
    [catalog],
  );
  return Number(rows[0]?.n ?? 0);
}

/** Fewest rows a version's committed pages must hold for its copy rate to estimate another rebuild by. */
export const COPY_RATE_MIN_ROWS = 10_000;

/**
 * Rows per second one page in flight copied at, for a dry run's estimate: the rows the plan gave the
 * committed pages (`plan_page.planned_rows`: with file records, each job's 1 + its expected file
 * records; else the ledger's rows) of the newest version of `catalog` with file records (`files`) or
 * without, whose pages hold at least {@link COPY_RATE_MIN_ROWS} rows, over the sum of those pages'
 * transaction times (the ledger's `started_at` to `committed_at`), so that pauses, throttling and
 * the steps after the copy do not count, nor does a refresh of a few jobs. null when the catalog
 * has no such version.
 */
export async function readPageCopyRate(db: Queryable, catalog: string, files: boolean): Promise<number | null> {
  const { rows } = await db.query<{ rows: string | null; s: number | null }>(
    `SELECT sum(coalesce(pp.planned_rows, p.rows))::text AS rows,
            sum(extract(epoch FROM p.committed_at - p.started_at))::float8 AS s
     FROM page p LEFT JOIN plan_page pp ON pp.version_id = p.version_id AND pp.page_no = p.page_no
     WHERE p.committed_at IS NOT NULL AND p.version_id = (
       SELECT v.version_id FROM version v
       JOIN page q ON q.version_id = v.version_id AND q.committed_at IS NOT NULL
       WHERE v.catalog_name = $1 AND v.files = $2
       GROUP BY v.version_id HAVING sum(q.rows) >= $3 ORDER BY v.version_id DESC LIMIT 1)`,
    [catalog, files, COPY_RATE_MIN_ROWS],
  );
  const r = rows[0];
  return r?.rows && r.s && r.s > 0 ? Number(r.rows) / r.s : null;
}
