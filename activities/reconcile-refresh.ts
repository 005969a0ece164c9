/**
 * One reconciliation round of a refresh (`start --refresh`): per key range of the version, the
 * source's jobs at the watermark against the version's (the counts stored at seal: no scan of the
 * catalog); a range whose counts disagree has its keys compared, and jobs missing from the version
 * are read again and written, jobs it holds that the source no longer has are removed, in one fenced
 * transaction (the repair of a refresh, by key: its changes are jobs, not days). Jobs the source
 * would quarantine are counted, not copied. Then a sample of the jobs the refresh wrote is compared
 * field by field, and the delta above the watermark is counted.
 */
import type { VersionRow, VersionRange } from '../lib/catalog';
import {
  differingCellsOfSource,
  stageSourceCells,
  stagedSourceJobs,
  countFileRejects,
  countRejects,
  estimatedVersionFiles,
  deleteJobsByKeyReturningIds,
  deleteJobFiles,
  lockVersion,
  readRanges,
  rejectSample,
  saveReconciliation,
  storeRanges,
  supersedeRows,
  upsertRows,
  versionHasFiles,
  versionKeysInRanges,
  versionRangeCounts,
} from '../lib/catalog';
import { isDataError, withRangeScanSession, withTransaction } from '../lib/db';
import { NotPublishableError } from '../lib/errors';
import { cellKeyBounds, KEY_CELL_WIDTH, rangeBounds } from '../lib/refresh';
import type { JobSource } from '../lib/sources/types';
import type { RefreshSource } from '../lib/sources';
import { isFileSource as isListing } from '../lib/config';
import { validateRows } from '../lib/validate';
import type { ReconcileInput } from '../workflows/activity-types';
import type { ReconcileSummary } from '../workflows/definitions';
import type { ActivityContext } from './context';
import { readSource } from './failures';
import { rejectThresholdError } from './messages';
import { FILE_REJECT_MIN, FILE_REJECT_SHARE, fileRejectThresholdMessage } from './reconcile-files';
import { compareSampleWithSource } from './reconcile-sample';
import { keysOfDifferingCells } from './plan-refresh';
import { storeBucketFigures } from './version-lifecycle';

/** What the key comparison of the suspect ranges found and did. */
interface KeyRepair {
  /** Ranges whose counts disagreed (their keys were compared). */
  compared: number;
  /** Jobs missing from the version, read again and written. */
  rewritten: number;
  /** Jobs the version held that the source no longer has, removed. */
  removed: number;
  /** Jobs in the source the page would quarantine (not in the version). */
  quarantined: number;
}

/**
 * Reconciles refresh `v` (of `base`). @returns the round's summary (`mismatched` is empty: a
 * refresh repairs by key within the round).
 * @throws NOT_PUBLISHABLE when the source cannot be read or the quarantined records exceed `maxRejects`.
 */
export async function reconcileRefresh(
  ctx: ActivityContext,
  input: ReconcileInput,
  v: VersionRow,
  base: string,
): Promise<ReconcileSummary> {
  const jobs = ctx.sources.get(input.source, input.versionId);
  const maxKey = v.watermark_key ?? '0';
  let ranges = await readRanges(ctx.pool, input.versionId);
  // A director catalog is compared by cells (jobs and key sums per 64 keys): a job gone and another
  // come in one range leave its count as it was. A listing by its ranges' counts.
  const cellSource = ctx.sources.refreshSource(input.source);
  const found = cellSource
    ? await cellDifferences(ctx, input, cellSource, maxKey)
    : await rangeDifferences(ctx, input, ranges, maxKey);
  const repair = await repairKeys(ctx, input, { base, jobs, ...found });
  if (repair.rewritten || repair.removed) {
    const fresh = await versionRangeCounts(ctx.pool, input.versionId, ranges);
    ranges = ranges.map((r) => ({ ...r, jobs: fresh.get(r.rangeNo) ?? r.jobs }));
    await storeRanges(ctx.pool, input.versionId, ranges);
    // The jobs per day and per cell the seal stored no longer describe the version: counted again.
    await storeBucketFigures(ctx, input.versionId);
  }
  const sample = await compareSampleWithSource(ctx, input, jobs, maxKey);
  const rejects = await countRejects(ctx.pool, input.versionId);
  const delta = await readSource(`source ${input.source}`, () => jobs.deltaCount(maxKey));
  const sourceRows = found.sourceJobs;
  const catalogRows = ranges.reduce((n, r) => n + r.jobs, 0);
  const summary: ReconcileSummary = {
    round: input.round,
    ok: sample.mismatches === 0,
    buckets: ranges.length,
    sourceRows,
    catalogRows,
    rejects,
    mismatched: [],
    delta,
    gone: 0,
    duplicateJobNames: 0,
    sampleMismatches: sample.mismatches,
    sampled: sample.sampled,
  };
  const maxRejects = ctx.sources.config(input.source).maxRejects ?? 0;
  const overThreshold = summary.ok && rejects > maxRejects;
  if (overThreshold) summary.ok = false;
  const fileRejects = await refreshFileRejects(ctx, input);
  const overFileThreshold = summary.ok && !!fileRejects && fileRejects.fileRejects > fileRejects.maxFileRejects;
  if (overFileThreshold) summary.ok = false;
  const rejectRows = rejects ? await rejectSample(ctx.pool, input.versionId) : [];
  const message =
    `round ${input.round}: refresh of version ${base}: ${ranges.length} key ranges, source ${sourceRows} jobs = ` +
    `catalog ${catalogRows} + ${repair.quarantined} quarantined; ${repair.compared} ${cellSource ? 'cells' : 'ranges'} compared key by key, ` +
    `${repair.rewritten} jobs written again, ${repair.removed} removed; delta ${delta} jobs after the watermark; ` +
    `sample ${sample.sampled} checked, ${sample.mismatches} differ`;
  const report = {
    ...summary,
    refreshOf: base,
    repair,
    sampleDiffs: sample.diffs,
    watermarkKey: maxKey,
    maxRejects,
    ...(fileRejects ? { files: fileRejects } : {}),
  };
  await saveReconciliation(ctx.pool, input.versionId, input.round, summary.ok, report);
  await ctx.events.record(ctx.pool, {
    catalog: input.catalog,
    versionId: input.versionId,
    kind: 'reconciled',
    message,
    details: report,
  });
  if (overFileThreshold)
    throw new NotPublishableError(fileRejectThresholdMessage(input.source, input.versionId, fileRejects));
  if (overThreshold)
    throw rejectThresholdError({
      source: input.source,
      versionId: input.versionId,
      rejects,
      maxRejects,
      sample: rejectRows,
    });
  return summary;
}

/**
 * The file records a refresh quarantined (its own pages' and repairs') against `maxFileRejects` (by
 * default 0.1 % of the version's file records as the planner estimates them, at least 100), as a
 * full rebuild's round checks them; null for a version without file records.
 */
async function refreshFileRejects(
  ctx: ActivityContext,
  input: ReconcileInput,
): Promise<{ fileRejects: number; maxFileRejects: number } | null> {
  if (!(await versionHasFiles(ctx.pool, input.versionId))) return null;
  const fileRejects = await countFileRejects(ctx.pool, input.versionId);
  const configured = ctx.sources.config(input.source).maxFileRejects;
  const files = configured === undefined ? await estimatedVersionFiles(ctx.pool, input.versionId) : 0;
  return {
    fileRejects,
    maxFileRejects: configured ?? Math.max(FILE_REJECT_MIN, Math.ceil(files * FILE_REJECT_SHARE)),
  };
}

/** Keys on which a refresh and its source disagree at the watermark, and the source's jobs there. */
interface KeyDifferences {
  /** Cells or ranges whose keys were compared. */
  compared: number;
  /** The version's keys the source no longer has. */
  extra: string[];
  /** The source's keys the version lacks. */
  missing: string[];
  /** The source's jobs at or below the watermark. */
  sourceJobs: number;
}

/**
 * A director catalog's differences with refresh `input.versionId`, by cells: the source's cells
 * (one index-only pass over its primary key) streamed into the catalog and compared with the
 * version's, stored at its seal; the keys of the cells that differ listed on both sides there.
 * One cell where a job left and another came differs by its key sum (lib/refresh.ts cellCodeSql).
 */
async function cellDifferences(
  ctx: ActivityContext,
  input: ReconcileInput,
  source: RefreshSource,
  maxKey: string,
): Promise<KeyDifferences> {
  return readSource(`source ${input.source}`, () =>
    withRangeScanSession(ctx.pool, async (c) => {
      await stageSourceCells(c, (into) => source.copyKeyCells(maxKey, Number(KEY_CELL_WIDTH), into));
      const sourceJobs = await stagedSourceJobs(c);
      const cells = await differingCellsOfSource(c, input.versionId, []);
      if (!cells.length) return { compared: 0, extra: [], missing: [], sourceJobs };
      const bounds = cellKeyBounds(cells, KEY_CELL_WIDTH);
      const keys = await keysOfDifferingCells(c, source, input.versionId, maxKey, bounds, []);
      return { compared: cells.length, extra: keys.deletedKeys, missing: keys.missing, sourceJobs };
    }),
  );
}

/** A listing's differences with refresh `input.versionId`: its key ranges' counts, then the keys of those that disagree. */
async function rangeDifferences(
  ctx: ActivityContext,
  input: ReconcileInput,
  ranges: VersionRange[],
  maxKey: string,
): Promise<KeyDifferences> {
  const source = ctx.sources.rangeKeySource(input.source, input.versionId);
  const counts = await readSource(`source ${input.source}`, () =>
    source.rangeKeyCounts(
      maxKey,
      ranges.map((r) => r.firstKey),
    ),
  );
  const sourceJobs = [...counts.values()].reduce((n, c) => n + c, 0);
  const suspect: number[] = [];
  for (const [i, n] of counts) if (n !== (i === 0 ? 0 : (ranges[i - 1]?.jobs ?? 0))) suspect.push(i);
  for (let i = 1; i <= ranges.length; i++) if (!counts.has(i) && ranges[i - 1].jobs > 0) suspect.push(i);
  if (!suspect.length) return { compared: 0, extra: [], missing: [], sourceJobs };
  const bounds = suspect.map((i) => rangeBounds(ranges, i, maxKey));
  const [sourceKeys, catalogKeys] = await Promise.all([
    readSource(`source ${input.source}`, () => source.keysInRanges(maxKey, bounds)),
    versionKeysInRanges(ctx.pool, input.versionId, bounds),
  ]);
  const inSource = new Set(sourceKeys);
  const inCatalog = new Set(catalogKeys);
  return {
    compared: suspect.length,
    extra: catalogKeys.filter((k) => !inSource.has(k)),
    missing: sourceKeys.filter((k) => !inCatalog.has(k)),
    sourceJobs,
  };
}

/**
 * Writes the differences in one transaction fenced like a repair (the version building or
 * verifying): the jobs the source no longer has removed, those it has and the version lacks read
 * again and written (or counted, when a page would quarantine them).
 */
async function repairKeys(
  ctx: ActivityContext,
  input: ReconcileInput,
  r: KeyDifferences & { base: string; jobs: JobSource },
): Promise<KeyRepair> {
  const out: KeyRepair = { compared: r.compared, rewritten: 0, removed: 0, quarantined: 0 };
  const { extra, missing } = r;
  const read = missing.length ? await readValid(r.jobs, missing) : { valid: [], invalid: 0 };
  out.quarantined = read.invalid;
  if (!extra.length && !read.valid.length) return out;
  const files = await versionHasFiles(ctx.pool, input.versionId);
  await withTransaction(ctx.pool, async (c) => {
    await lockVersion(c, input.versionId, { mode: 'share', allowed: ['building', 'verifying'] });
    if (extra.length) {
      const keysAreJobIds = !isListing(ctx.sources.config(input.source));
      await supersedeRows(c, input.versionId, r.base, extra, { files, keysAreJobIds });
      out.removed = extra.length;
      const ids = await deleteJobsByKeyReturningIds(c, input.versionId, extra);
      // A director's job id is its key; a listing's files are found by its snapshot id.
      if (files) await deleteJobFiles(c, input.versionId, [...new Set([...(keysAreJobIds ? extra : []), ...ids])]);
    }
    if (read.valid.length) out.rewritten = await upsertRows(c, input.versionId, 0, read.valid);
  });
  return out;
}

/** The source's rows of `keys` that a page would write, and how many it would quarantine. */
async function readValid(jobs: JobSource, keys: string[]) {
  try {
    const checked = validateRows(await jobs.readKeys(keys));
    return { valid: checked.valid, invalid: checked.rejects.length };
  } catch (err) {
    if (!isDataError(err)) throw err;
    return { valid: [], invalid: keys.length }; // text the source cannot decode: quarantined by a page
  }
}
