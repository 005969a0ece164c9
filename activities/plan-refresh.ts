/**
 * A refresh's change detection (`start --refresh`, `--dry-run`): what changed in a director catalog
 * since the catalog's active version, read in O(jobs) on the source and O(changes) in the catalog.
 * 1. Candidates: the jobs a transaction wrote since the active version's plan (their `xmin`, or
 *    their Client's, Pool's or FileSet's), hashed by the source and compared with the row hashes
 *    the active version stored: new, changed or unchanged.
 * 2. Deletions: per cell of 64 job keys, the source's jobs against the version's (one pass over
 *    the source's primary key; the version's stored at its seal); a cell that differs has its keys
 *    compared.
 * A refresh that cannot build on the active version (none, another source or settings, rolled
 * back, no stored hashes or horizon, a horizon the source cannot use) says why, and the caller runs
 * a full rebuild.
 */
import type { Pool, PoolClient } from 'pg';
import { withLongSession, withRangeScanSession } from '../lib/db';
import {
  createFilePartition,
  createVersionPartition,
  insertPlanPageKeys,
  insertPlanPages,
  insertVersion,
  insertVersionSegments,
  readRanges,
  readRefreshBase,
  setPartitionTable,
  setSourceReadFacts,
  setSourceSnapshot,
  setVersionFiles,
  carryListingFileStats,
  storeRanges,
  differingCellsOfSource,
  stageSourceCells,
  sourceKeyDifferences,
  stageSourceKeys,
  versionRowHashes,
} from '../lib/catalog';
import type { RefreshBase, VersionRange } from '../lib/catalog';
import type { SourceConfig } from '../lib/config';
import { isFileSource } from '../lib/config';
import { PAGE_SIZING } from '../lib/page-sizing';
import type { RefreshChanges, WeightedRefreshPage } from '../lib/refresh';
import {
  classifyCandidates,
  cellKeyBounds,
  KEY_CELL_WIDTH,
  refreshedRanges,
  refreshPages,
  refreshPlanText,
  sortKeys,
  workKeys,
} from '../lib/refresh';
import { rowMappingChange, rowMappingOf } from '../lib/sources/row-mapping';
import type { PreparedSource, RefreshSource } from '../lib/sources';
import type { PlanRebuildInput } from '../workflows/activity-types';
import type { ActivityContext } from './context';

/** What a refresh found: the changes and where they fall. */
export interface RefreshDetection {
  base: RefreshBase;
  /** The active version's ranges, by first key. */
  ranges: VersionRange[];
  changes: RefreshChanges;
  /** Candidates found unchanged (rewritten by the director to the same row). */
  unchanged: number;
  /** Cells of job keys whose keys were compared (their jobs differed). */
  cellsCompared: number;
  /** Wall time (ms) of each step: `candidates`, `hashes`, `cells.source`, `cells.compare`, `keys`. */
  detectionMs: Record<string, number>;
}

/** Records the wall time (ms) of each awaited step into `into`. */
function stopwatch(into: Record<string, number>) {
  return async <T>(step: string, p: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await p();
    } finally {
      into[step] = Math.round(performance.now() - t0);
    }
  };
}

/** A refresh that is a full rebuild instead, and why (one sentence). */
export interface RefreshFallback {
  fullRebuild: string;
}

/** The settings a refresh must share with the version it builds on. */
export interface RefreshSettings {
  source: string;
  files: boolean;
  timezone: string;
  config: SourceConfig;
}

/** Why a refresh with `--verify full` is a full rebuild. */
export const VERIFY_FULL_REASON =
  '--verify full re-reads every job and file record of the source, and its reconciliation compares both sides bucket by bucket';

/**
 * Why a refresh of `catalog` cannot build on its active version with `s`, or null when it can.
 */
export function refreshObstacle(base: RefreshBase | null, s: RefreshSettings): string | null {
  if (!base) return 'the catalog has no active version';
  if (base.sourceName !== s.source)
    return `the active version ${base.versionId} was rebuilt from source ${base.sourceName}`;
  if (base.rolledBack)
    return `the active version ${base.versionId} was rolled back to: a refresh builds on the newest version`;
  if (base.watermarkKey === null)
    return `the active version ${base.versionId} has no jobs: every job of the source is new`;
  if (base.files !== s.files)
    return `the active version ${base.versionId} ${base.files ? 'has' : 'has no'} file records and this rebuild ${s.files ? 'has' : 'has none'}`;
  if (base.timezone !== s.timezone) return `the time zone changed (${base.timezone} → ${s.timezone})`;
  const enc = s.config.legacyEncoding ?? 'LATIN1';
  if (base.legacyEncoding !== enc) return `legacyEncoding changed (${base.legacyEncoding ?? 'not recorded'} → ${enc})`;
  const mapping = rowMappingOf(s.config);
  if (base.rowMapping !== mapping) return rowMappingChange(s.config, base.rowMapping, mapping);
  // A listing's detection compares its records with the version's jobs: it needs no horizon.
  if (!isFileSource(s.config) && !base.horizon)
    return `the active version ${base.versionId} recorded no source horizon`;
  return null;
}

/**
 * Cells whose keys one COPY of the source lists: bounds the literal arrays of its statement (two
 * keys per cell). The keys themselves stream into the catalog and never reach the worker.
 */
const CELLS_PER_KEY_COPY = 10_000;

/**
 * The keys of the differing cells `bounds` (ascending) on which the source and the version
 * disagree, compared in the catalog on session `c`: the source's keys of those cells are streamed
 * into it, `CELLS_PER_KEY_COPY` cells per COPY. `deletedKeys`: the version's that the source no
 * longer has; `missing`: the source's that the version lacks and that were not written since it
 * (not in `candidates`: a job the version is missing, or one quarantined before). Both ascending.
 * At 10^7 jobs with 0.1 % changed, listing these keys in the worker (640,000 per side) and the
 * cells before them took the refresh's worker to 558 MB (docs/performance.md).
 * @throws the source's or the catalog's errors.
 */
export async function keysOfDifferingCells(
  c: PoolClient,
  source: RefreshSource,
  versionId: string,
  maxKey: string,
  bounds: { firstKey: string; lastKey: string }[],
  candidates: string[],
): Promise<{ deletedKeys: string[]; missing: string[] }> {
  for (let i = 0; i < bounds.length; i += CELLS_PER_KEY_COPY) {
    const cells = bounds.slice(i, i + CELLS_PER_KEY_COPY);
    await stageSourceKeys(c, (into) => source.copyKeysInRanges(maxKey, cells, into));
  }
  return sourceKeyDifferences(c, versionId, bounds, candidates);
}

/**
 * Detects what changed in `source` at or below `maxKey` since the catalog's active version.
 * @returns the changes, or why a full rebuild is needed instead.
 * @throws the source's or the catalog's errors.
 */
export async function detectRefresh(
  pool: Pool,
  source: RefreshSource,
  catalog: string,
  settings: RefreshSettings,
  maxKey: string,
): Promise<RefreshDetection | RefreshFallback> {
  const base = await readRefreshBase(pool, catalog);
  const obstacle = refreshObstacle(base, settings);
  if (obstacle || !base) return { fullRebuild: obstacle ?? 'no active version' };
  const ranges = await readRanges(pool, base.versionId);
  if (!ranges.length && base.watermarkKey !== null)
    return { fullRebuild: `the active version ${base.versionId} stored no key ranges` };
  const detectionMs: Record<string, number> = {};
  const timed = stopwatch(detectionMs);
  // Two independent reads, run at once (each on its own session of the source): the candidates
  // with their stored hashes, and the source's cells. Each step timed alone: `candidates`,
  // `hashes`, `cells.source`, `cells.compare`.
  const candidatesStep = async () => {
    const found = await timed('candidates', () => source.candidates(maxKey, base.horizon!));
    if (!found) return null;
    const keys = found.jobs.map((j) => j.key);
    const stored = await timed('hashes', () => versionRowHashes(pool, base.versionId, keys));
    return { found, ...classifyCandidates(found.jobs, stored) };
  };
  const written = candidatesStep();
  // Deletions: cells of 64 key values whose jobs differ between the source and the version, once
  // the new jobs are counted in. The source counts its cells in one pass over its primary key and
  // streams them into a temporary table of the catalog; the version's were stored at its seal
  // (lib/catalog/key-cells.ts); one statement there compares them. What reaches the worker, and
  // what is listed then, grows with the changed jobs, not with the catalog.
  const cellsStep = () =>
    withRangeScanSession(pool, async (c) => {
      const width = Number(KEY_CELL_WIDTH);
      await timed('cells.source', () => stageSourceCells(c, (into) => source.copyKeyCells(maxKey, width, into)));
      const w = await written;
      if (!w) return null;
      const cells = await timed('cells.compare', () => differingCellsOfSource(c, base.versionId, w.newKeys));
      const bounds = cellKeyBounds(cells, KEY_CELL_WIDTH);
      const candidates = w.found.jobs.map((j) => j.key);
      const keys = await timed('keys', () =>
        keysOfDifferingCells(c, source, base.versionId, maxKey, bounds, candidates),
      );
      return { cells: cells.length, ...keys };
    });
  const [w, differing] = await Promise.all([written, cellsStep()]);
  if (!w || !differing)
    return {
      fullRebuild:
        'the source cannot tell what changed since the active version (its transaction horizon is out of reach)',
    };
  const { newKeys, changedKeys, unchanged } = w;
  const { deletedKeys, missing } = differing;
  return {
    base,
    ranges,
    changes: { newKeys: sortKeys([...newKeys, ...missing]), changedKeys: sortKeys(changedKeys), deletedKeys },
    unchanged,
    cellsCompared: differing.cells,
    detectionMs,
  };
}

/**
 * Detects what changed in a listing source (restic, borg) since the catalog's active version: its
 * records (under their stable job keys, migration 015) against the version's jobs, row hash by row
 * hash, in the catalog database (lib/catalog/listing-changes.ts). A listing whose sha256 is the
 * version's changed nothing, and is not compared.
 * @returns the changes, or why a full rebuild is needed instead.
 * @throws the catalog's errors.
 */
export async function detectListingRefresh(
  pool: Pool,
  prepared: PreparedSource,
  catalog: string,
  settings: RefreshSettings,
): Promise<(RefreshDetection & { leavingJobIds: string[] }) | RefreshFallback> {
  const base = await readRefreshBase(pool, catalog);
  const obstacle = refreshObstacle(base, settings);
  if (obstacle || !base) return { fullRebuild: obstacle ?? 'no active version' };
  if (!prepared.compareListing) return { fullRebuild: `source ${settings.source} is not a listing` };
  const ranges = await readRanges(pool, base.versionId);
  if (!ranges.length && base.watermarkKey !== null)
    return { fullRebuild: `the active version ${base.versionId} stored no key ranges` };
  const detectionMs: Record<string, number> = {};
  const timed = stopwatch(detectionMs);
  const same = prepared.snapshot !== null && prepared.snapshot === base.snapshot;
  const found = same
    ? {
        newKeys: [],
        changedKeys: [],
        deletedKeys: [],
        leavingJobIds: [],
        unchanged: ranges.reduce((n, r) => n + r.jobs, 0),
      }
    : await timed('listing', () => prepared.compareListing!(base.versionId));
  return {
    base,
    ranges,
    changes: { newKeys: found.newKeys, changedKeys: found.changedKeys, deletedKeys: found.deletedKeys },
    leavingJobIds: found.leavingJobIds,
    unchanged: found.unchanged,
    cellsCompared: 0,
    detectionMs,
  };
}

/**
 * A refresh's pages of `keys` (ascending), at most `pageKeys` keys each; with `files`, a listing's
 * are weighed by the listed file counts, as a full rebuild's pages are (a snapshot whose listing
 * gives none is a page of its own), a director's at 1,000 file records a job.
 */
export function refreshPlanPages(
  keys: string[],
  pageKeys: number,
  files: boolean,
  prepared: Pick<PreparedSource, 'fileWeightOf'>,
): WeightedRefreshPage[] {
  const listingWeight = files ? prepared.fileWeightOf : undefined;
  return listingWeight
    ? refreshPages(keys, pageKeys, (k) => listingWeight(k, PAGE_SIZING.maxRows), PAGE_SIZING.maxRows)
    : refreshPages(keys, pageKeys, () => (files ? FILES_WEIGHT_PER_JOB : 1));
}

/** Keys a refresh page processes at most. */
export const REFRESH_PAGE_KEYS = 2_000;

/** The `planned` message of a refresh ({@link refreshPlanText}). */
export function refreshPlannedMessage(versionId: string, base: string, c: RefreshChanges, pages: number): string {
  return `planned version ${versionId}: ${refreshPlanText({
    refreshOf: base,
    newJobs: c.newKeys.length,
    changedJobs: c.changedKeys.length,
    deletedJobs: c.deletedKeys.length,
    pagesTotal: pages,
  })}`;
}

/** What the refresh's plan transaction stores. */
export interface RefreshToStore {
  detection: RefreshDetection;
  watermark: { maxKey: string; time: string };
  timezone: string;
  horizon: string;
  legacyEncoding: string;
  pageKeys: number;
  /** The source as the plan prepared it: a listing is staged for the version. */
  prepared: PreparedSource;
}

/**
 * The refresh's plan, in the plan transaction of `c` (under the catalog's publish lock): the
 * version with its base, horizon and settings, its segments (its own and the base's), its tables,
 * its pages (each a list of keys) and ranges, and the `planned` event.
 * @returns the version id and the pages.
 */
export async function storeRefreshPlan(
  ctx: ActivityContext,
  c: PoolClient,
  input: PlanRebuildInput,
  r: RefreshToStore,
): Promise<{ versionId: string; pages: WeightedRefreshPage[] }> {
  const { detection: d } = r;
  const keys = workKeys(d.changes);
  const pages = refreshPlanPages(keys, r.pageKeys, !!input.files, r.prepared);
  const versionId = await insertVersion(c, {
    catalog: input.catalog,
    source: input.source,
    workflowId: input.workflowId,
    firstRunId: input.firstRunId,
    pageSize: r.pageKeys,
    pageSizing: 'fixed',
    pagesTotal: pages.length,
    sourceRows: String(d.changes.newKeys.length + d.changes.changedKeys.length),
    watermarkKey: r.watermark.maxKey,
    watermarkTime: r.watermark.time,
    timezone: r.timezone,
  });
  await setSourceReadFacts(c, versionId, {
    baseVersionId: d.base.versionId,
    horizon: r.horizon || null,
    legacyEncoding: r.legacyEncoding,
    rowMapping: rowMappingOf(ctx.sources.config(input.source)),
  });
  await insertVersionSegments(c, versionId, d.base.versionId);
  await setPartitionTable(c, versionId, await createVersionPartition(c, versionId));
  if (input.files) {
    await setVersionFiles(c, versionId);
    await createFilePartition(c, versionId);
  }
  if (r.prepared.stage) {
    // A listing: its records are staged for the pages, which read only the keys of the changes.
    await r.prepared.stage(c, versionId);
    await setSourceSnapshot(c, versionId, r.prepared.snapshot, r.prepared.duplicates);
    if (input.files) await carryListingFileStats(c, versionId, d.base.versionId, keys);
  }
  await insertPlanPages(
    c,
    versionId,
    pages.map((p) => ({ firstKey: p.firstKey, lastKey: p.lastKey, plannedRows: p.weight })),
  );
  await insertPlanPageKeys(
    c,
    versionId,
    pages.map((p) => p.keys),
  );
  const oldMax = d.base.watermarkKey ?? r.watermark.maxKey;
  await storeRanges(
    c,
    versionId,
    refreshedRanges(d.ranges, oldMax, d.changes.newKeys, PAGE_SIZING.maxRows, r.watermark.maxKey),
  );
  await ctx.events.record(c, {
    catalog: input.catalog,
    versionId,
    kind: 'planned',
    message: refreshPlannedMessage(versionId, d.base.versionId, d.changes, pages.length),
    details: {
      refreshOf: d.base.versionId,
      pagesTotal: pages.length,
      newJobs: d.changes.newKeys.length,
      changedJobs: d.changes.changedKeys.length,
      deletedJobs: d.changes.deletedKeys.length,
      unchangedCandidates: d.unchanged,
      detectionMs: d.detectionMs,
      cellsCompared: d.cellsCompared,
      watermarkKey: r.watermark.maxKey,
      watermarkTime: r.watermark.time,
    },
  });
  return { versionId, pages };
}

/**
 * Rows a job weighs in a refresh page with file records, for its statement timeout (the refresh
 * does not ask the source for each job's JobFiles).
 */
const FILES_WEIGHT_PER_JOB = 1_000;
