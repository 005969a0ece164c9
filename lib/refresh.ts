/**
 * The pure part of a refresh's plan: which jobs changed, in which ranges, and the pages that write
 * them. Keys are decimal text (64-bit); no I/O.
 */
import type { VersionRange } from './catalog/version-ranges';
import type { SourceJobHash } from './sources/types';

/** The lowest bigint: where range 0 (keys below the first range) starts. */
export const MIN_KEY = '-9223372036854775808';

/** What a refresh writes, by job key (each list ascending). */
export interface RefreshChanges {
  /** In the source, not in the active version: copied. */
  newKeys: string[];
  /** In both, with another row hash (or now quarantined): superseded, then copied (or quarantined). */
  changedKeys: string[];
  /** In the active version, gone from the source: superseded. */
  deletedKeys: string[];
}

/** What a refresh plan changes, as its `planned` event's details store it. */
export interface RefreshPlanCounts {
  /** The active version it builds on (decimal text). */
  refreshOf: string;
  newJobs: number;
  changedJobs: number;
  deletedJobs: number;
  pagesTotal: number;
}

/**
 * A refresh plan in words, for its `planned` event and `start`'s receipt: `a refresh of version B:
 * x new, y changed and z deleted jobs in p pages`.
 */
export function refreshPlanText(c: RefreshPlanCounts): string {
  return `a refresh of version ${c.refreshOf}: ${c.newJobs} new, ${c.changedJobs} changed and ${c.deletedJobs} deleted jobs in ${c.pagesTotal} pages`;
}

/** The keys a refresh's pages process: every changed key, ascending. */
export function workKeys(c: RefreshChanges): string[] {
  return sortKeys([...c.newKeys, ...c.changedKeys, ...c.deletedKeys]);
}

/** Keys ascending by value, without repeats. */
export function sortKeys(keys: Iterable<string>): string[] {
  return [...new Set(keys)]
    .map(BigInt)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map(String);
}

/**
 * Sorts the candidates (jobs written since the active version's plan) by what the version holds of
 * them: `stored` maps a key of the active version to its stored row hash. A candidate quarantined
 * now (hash null) is a change when the version holds it (its row leaves), else nothing.
 */
export function classifyCandidates(
  candidates: SourceJobHash[],
  stored: Map<string, string | null>,
): { newKeys: string[]; changedKeys: string[]; unchanged: number } {
  const newKeys: string[] = [];
  const changedKeys: string[] = [];
  let unchanged = 0;
  for (const c of candidates) {
    const has = stored.has(c.key);
    if (c.hash === null) {
      if (has) changedKeys.push(c.key);
    } else if (!has) newKeys.push(c.key);
    else if (stored.get(c.key) !== c.hash) changedKeys.push(c.key);
    else unchanged++;
  }
  return { newKeys, changedKeys, unchanged };
}

/**
 * The index of the range holding `key` among ranges starting at `firstKeys` (ascending), as
 * PostgreSQL's `width_bucket(key, firstKeys)`: 0 below the first, i (1-based) from `firstKeys[i-1]`
 * up to the next first key.
 */
export function rangeIndexOf(key: string, firstKeys: bigint[]): number {
  const k = BigInt(key);
  let lo = 0;
  let hi = firstKeys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (firstKeys[mid] <= k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The inclusive key bounds of range `index` (as {@link rangeIndexOf} numbers them) of `ranges`
 * (ascending by first key), the last range ending at `maxKey`.
 */
export function rangeBounds(
  ranges: VersionRange[],
  index: number,
  maxKey: string,
): { firstKey: string; lastKey: string } {
  if (index === 0) return { firstKey: MIN_KEY, lastKey: (BigInt(ranges[0].firstKey) - 1n).toString() };
  const next = ranges[index];
  return { firstKey: ranges[index - 1].firstKey, lastKey: next ? (BigInt(next.firstKey) - 1n).toString() : maxKey };
}

/** Keys per range index ({@link rangeIndexOf}). */
export function countByRange(keys: string[], firstKeys: bigint[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const k of keys) {
    const i = rangeIndexOf(k, firstKeys);
    out.set(i, (out.get(i) ?? 0) + 1);
  }
  return out;
}

/** One page of a refresh: the keys it processes (ascending) and their bounds. */
export interface RefreshPage {
  firstKey: string;
  lastKey: string;
  keys: string[];
}

/** A refresh's page: its bounds and keys, and the rows it is expected to write (its statement timeout follows them). */
export interface WeightedRefreshPage extends RefreshPage {
  /** Job and file rows expected. */
  weight: number;
}

/**
 * `keys` (ascending) in pages of at most `size` keys; with `weightOf` (the rows a job is expected to
 * write: 1 + its file records), a page also ends before it would pass `target` rows, and a job
 * heavier than that is a page of its own. Without `weightOf` a job weighs 1.
 */
export function refreshPages(
  keys: string[],
  size: number,
  weightOf: (key: string) => number = () => 1,
  target = Number.POSITIVE_INFINITY,
): WeightedRefreshPage[] {
  const pages: WeightedRefreshPage[] = [];
  let chunk: string[] = [];
  let weight = 0;
  const close = () => {
    if (chunk.length) pages.push({ firstKey: chunk[0], lastKey: chunk[chunk.length - 1], keys: chunk, weight });
    chunk = [];
    weight = 0;
  };
  for (const k of keys) {
    const w = weightOf(k);
    if (chunk.length && (chunk.length >= size || weight + w > target)) close();
    chunk.push(k);
    weight += w;
  }
  close();
  return pages;
}

/**
 * The ranges of the refreshed version: the active version's ranges, its last one ending at the old
 * watermark, then new ranges of at most `size` keys over the new keys above it (`newKeys`
 * ascending), the last range reaching `newMaxKey`. Job counts are the old ones (the seal counts the ranges a refresh touched); new
 * ranges start at 0. Digests are left empty: a refresh's ranges count, they do not hash.
 */
export function refreshedRanges(
  base: VersionRange[],
  oldMaxKey: string,
  newKeys: string[],
  size: number,
  newMaxKey: string,
): VersionRange[] {
  const above = newKeys.filter((k) => BigInt(k) > BigInt(oldMaxKey));
  const out = base.map((r, i) => ({ ...r, rangeNo: i + 1, digest: '' }));
  if (out.length) out[out.length - 1].lastKey = oldMaxKey;
  for (const p of refreshPages(above, size))
    out.push({ rangeNo: out.length + 1, firstKey: p.firstKey, lastKey: p.lastKey, jobs: 0, digest: '' });
  for (let i = 0; i + 1 < out.length; i++) out[i].lastKey = (BigInt(out[i + 1].firstKey) - 1n).toString();
  // The last range reaches the watermark, as the source's count of it does.
  if (out.length && BigInt(newMaxKey) > BigInt(out[out.length - 1].lastKey)) out[out.length - 1].lastKey = newMaxKey;
  return out;
}

/** Key values per cell of a refresh's search for deleted jobs (lib/sources `copyKeyCells`, lib/catalog/key-cells.ts). */
export const KEY_CELL_WIDTH = 64n;

/** The factor of a cell's jobs in its cell code ({@link cellCodeSql}). */
export const CELL_CODE_JOBS = 8192;
/** Added to a cell's offsets' sum in its cell code: sums from −4095 to 4095 fit. */
const CELL_CODE_OFFSETS = 4096;

/**
 * SQL: a cell's code, from its jobs `n` and the sum of its keys' offsets `r` (SQL expressions).
 * The code is a cell's jobs and the sum of their keys' offsets in it (a key less the cell times the width:
 * from −63 to 63, of the key's sign), packed in one integer: `jobs × CELL_CODE_JOBS + offsets +
 * CELL_CODE_OFFSETS`. Two cells of one key range with the same jobs have equal key sums exactly when
 * their offsets' sums are equal (the key sum is jobs × width × cell plus the offsets), and a cell
 * holds at most 64 keys, so the code tells what a (jobs, key sum) pair would, in one `int`: the
 * source's cells travel to the catalog as (cell, code) and are compared there. NULL (never equal
 * to anything) for figures outside that span.
 */
export const cellCodeSql = (n: string, r: string): string =>
  `CASE WHEN abs(${r}) < ${CELL_CODE_OFFSETS} THEN (${n}) * ${CELL_CODE_JOBS} + (${r}) + ${CELL_CODE_OFFSETS} END`;

/** The cell of `key` (the key divided by `width`, truncated toward zero, as PostgreSQL divides). */
export const cellOf = (key: bigint, width: bigint): bigint => key / width;

/** The key values of cell `cell` within the inclusive range `r`. */
export function cellBounds(
  r: { firstKey: string; lastKey: string },
  cell: bigint,
  width: bigint,
): { firstKey: string; lastKey: string } {
  const lo = cell > 0n ? cell * width : cell * width - (width - 1n);
  const hi = cell < 0n ? cell * width : cell * width + (width - 1n);
  const first = BigInt(r.firstKey) > lo ? BigInt(r.firstKey) : lo;
  const last = BigInt(r.lastKey) < hi ? BigInt(r.lastKey) : hi;
  return { firstKey: first.toString(), lastKey: last.toString() };
}

/** Every job key: the bounds of a cell with no range to clip it. */
const ALL_KEYS = { firstKey: MIN_KEY, lastKey: '9223372036854775807' };

/** The key bounds of each of `cells` (decimal text, in their order) of `width` key values. */
export function cellKeyBounds(cells: string[], width: bigint): { firstKey: string; lastKey: string }[] {
  return cells.map((c) => cellBounds(ALL_KEYS, BigInt(c), width));
}
