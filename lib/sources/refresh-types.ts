/** The change detection of a refresh, as a source offers it (director catalogs). */
import type { Writable } from 'node:stream';

/** A job of the source as change detection sees it: key and row hash (null: the page would quarantine it). */
export interface SourceJobHash {
  key: string;
  hash: string | null;
}

/** The refresh's candidates: jobs a transaction wrote since the active version's plan. */
export interface RefreshCandidates {
  /** The candidates at or below the watermark, by key. */
  jobs: SourceJobHash[];
  /** This plan's horizon (xid8 text): the oldest transaction still running when it looked. */
  horizon: string;
}

/**
 * The key counts per range and the keys of ranges a refresh's reconciliation compares with the
 * version's (director catalogs, and a staged listing: lib/sources/staged.ts).
 */
export interface RangeKeySource {
  /**
   * Jobs at or below `maxKey` per range starting at `firstKeys` (ascending): index i (1-based)
   * from `firstKeys[i-1]` up to the next first key, index 0 below the first.
   */
  rangeKeyCounts(maxKey: string, firstKeys: string[]): Promise<Map<number, number>>;
  /** The job keys at or below `maxKey` in the inclusive `ranges`, ascending. */
  keysInRanges(maxKey: string, ranges: { firstKey: string; lastKey: string }[]): Promise<string[]>;
}

/**
 * The change detection of a refresh (director catalogs; lib/sources/bareos-refresh.ts): the jobs
 * written since a horizon, key counts per range, and the keys of ranges.
 */
export interface RefreshSource extends RangeKeySource {
  /**
   * The jobs at or below `maxKey` written since the horizon `since` (an xid8 as text, taken by the
   * plan of the active version), with their row hashes; null when the source cannot say (the
   * horizon is more than 2^31 transactions back, or ahead of the source: another server).
   */
  candidates(maxKey: string, since: string): Promise<RefreshCandidates | null>;
  /** This source's horizon now (xid8 text), for the plan of a full rebuild. */
  horizon(): Promise<string>;
  /**
   * Streams the jobs at or below `maxKey` per cell of `width` key values (the key divided by
   * `width`, truncated toward zero) as cell codes (lib/refresh.ts `cellCodeSql`) (their count and the sum of their
   * keys' offsets, which tells a cell whose jobs were swapped; NULL out of span) into `into`, a
   * catalog `COPY … FROM STDIN` as COPY text (cell, code); cells without jobs absent. Resolves when
   * `into` has finished. @throws the source's or `into`'s errors.
   */
  copyKeyCells(maxKey: string, width: number, into: Writable): Promise<void>;
  /**
   * Streams the job keys at or below `maxKey` in the inclusive `ranges` into `into`, a catalog
   * `COPY … FROM STDIN`, as COPY text (one key per line). Resolves when `into` has finished.
   * @throws the source's or `into`'s errors.
   */
  copyKeysInRanges(maxKey: string, ranges: { firstKey: string; lastKey: string }[], into: Writable): Promise<void>;
  /** The file records the jobs `keys` are expected to have (their JobFiles), summed: for `--dry-run`. */
  fileRecordsOf(keys: string[]): Promise<number>;
  /** The file records every job at or below `maxKey` is expected to have, summed: for `--dry-run`. */
  fileRecordsUpTo(maxKey: string): Promise<number>;
}
