/**
 * Named sources of a worker: director catalog databases (`bareos`, `bacula`) read directly, and
 * listings (`restic-json`, `borg-json`) staged into the catalog database at plan time.
 */
import type { Pool, PoolClient } from 'pg';
import type { SourceConfig } from '../config';
import { isFileSource } from '../config';
import { BareosSource } from './bareos';
import { copyListingToTemp, readListing, StagedSource, stageListing } from './staged';
import { listedFileCount, listingFilePages, StagedFileSource } from './staged-files';
import type { FileSource, JobSource, RangeKeySource, RefreshSource, SourceWatermark } from './types';
import { isFileSource as isFileRecordSource } from './types';
import type { PageRange } from './types';
import type { ListingForStaging } from './listing-thread';
import { listingJobKeys } from '../catalog/listing-keys';
import type { ListingChanges } from '../catalog/listing-changes';
import { listingChanges } from '../catalog/listing-changes';
import { withTransaction } from '../db';

export { BareosSource } from './bareos';
export { StagedSource } from './staged';
export { StagedFileSource } from './staged-files';
export { removeStaleSpools } from './staged-page';
export * from './types';

/** What planRebuild needs from a source before the version exists. */
export interface PreparedSource {
  /** Max paging key and time at plan. */
  watermark: SourceWatermark;
  /** IANA zone of the source's naive times and buckets. */
  timezone: string;
  /** The pages of `pageSize` rows at or below `maxKey` (see {@link JobSource.planPages}). */
  planPages: JobSource['planPages'];
  /** Average bytes of a row's text, sampled (see {@link JobSource.averageRowBytes}). */
  averageRowBytes: JobSource['averageRowBytes'];
  /** Rows at or below `maxKey`, counting at most `limit` (see {@link JobSource.countRowsUpTo}). */
  countRowsUpTo: JobSource['countRowsUpTo'];
  /** sha256 of a staged listing (file sources), null for database sources. */
  snapshot: string | null;
  /** Listing records dropped as repeats of an id (file sources). */
  duplicates: number;
  /** Listing values that were not UTF-8, decoded from `legacyEncoding`, by field name (file sources). */
  decoded?: { encoding: string; values: Record<string, number> };
  /** Stages the listing for the new version, inside the plan transaction (file sources only). */
  stage?(c: PoolClient, versionId: string): Promise<void>;
  /**
   * Sources with file records (director catalogs, listings with a `filesCommand`): pages of about `targetRows` rows where a job
   * weighs 1 + its `JobFiles`, a job heavier than the target a page of its own (see
   * {@link FileSource.planFilePages}); absent for sources without file records.
   */
  planFilePages?: FileSource['planFilePages'];
  /** Checks that the source's file records can be read (its schema version is known). */
  checkFileSchema?(): Promise<void>;
  /**
   * A listing's records against version `baseVersionId`'s jobs: a listing refresh's change
   * detection (lib/catalog/listing-changes.ts), in a transaction of its own that writes nothing
   * lasting (listings only).
   */
  compareListing?(baseVersionId: string): Promise<ListingChanges>;
  /**
   * The file records the listing says the jobs `keys` hold (restic's `summary.total_files_processed`),
   * summed over those that say (listings with a `filesCommand`; borg says none): for `--dry-run`.
   * `keys` null: every job.
   */
  listedFileRecords?(keys: string[] | null): number;
  /**
   * The rows job `key` is expected to write in a page with files: 1 + its listed file count, `unknown`
   * when the listing gives none (borg), 1 for a key the listing does not have (a deleted job)
   * (listings with a `filesCommand`).
   */
  fileWeightOf?(key: string, unknown: number): number;
}

/** Named sources, opened lazily from the worker's configuration and shared by all activities. */
export class SourceRegistry {
  private readonly open = new Map<string, JobSource>();
  /**
   * @param lookup returns the source's settings or throws UnknownSourceError.
   * @param catalogPool the catalog database, where file sources are staged (required for them).
   */
  constructor(
    private readonly lookup: (name: string) => SourceConfig,
    private readonly catalogPool?: Pool,
  ) {}

  /** The settings of source `name`. @throws UnknownSourceError when it is not configured. */
  config(name: string): SourceConfig {
    return this.lookup(name);
  }

  /**
   * The source called `name`, as seen by version `versionId` (file sources read that version's
   * staged snapshot; database sources ignore it).
   * @throws UnknownSourceError when the configuration does not define it.
   */
  get(name: string, versionId?: string): JobSource {
    const config = this.lookup(name);
    if (isFileSource(config)) {
      if (!versionId)
        throw new Error(`source ${name} (${config.kind}) is staged per version: a version id is required`);
      if (!this.catalogPool)
        throw new Error(`source ${name} (${config.kind}) needs the catalog database to stage its listing`);
      if (config.filesCommand)
        return new StagedFileSource(
          name,
          { ...config, filesCommand: config.filesCommand },
          this.catalogPool,
          versionId,
        );
      return new StagedSource(name, config, this.catalogPool, versionId);
    }
    let s = this.open.get(name);
    if (!s) {
      s = new BareosSource(name, config);
      this.open.set(name, s);
    }
    return s;
  }

  /**
   * Takes what a plan needs. A database source is asked for its watermark, then walks its keys; a
   * file source's listing is read and parsed now (so every worker pages this snapshot) and staged
   * by `stage` in the plan transaction. A director catalog's naive times are cross-checked against
   * its `JobTDate` first (lib/sources/bareos-zone.ts).
   * @throws UnknownSourceError, SourceDataInvalidError (unreadable or malformed listing; a source
   *   database without a director catalog's job tables; naive times that contradict `JobTDate` in
   *   the zone in use).
   */
  async prepare(name: string, opts: { reserveKeys?: boolean } = {}): Promise<PreparedSource> {
    const config = this.lookup(name);
    if (!isFileSource(config)) {
      const source = this.get(name);
      // A database that is not a director catalog is refused by name, before any read of it.
      if (source instanceof BareosSource) await source.checkCatalogTables();
      const [watermark, timezone] = await Promise.all([source.watermark(), source.timezone()]);
      // Naive times read in another zone than the director's would shift every time: refuse first.
      if (source instanceof BareosSource) await source.checkNaiveTimes(name, watermark.maxKey);
      return {
        watermark,
        timezone,
        snapshot: null,
        duplicates: 0,
        planPages: (maxKey, size, onProgress) => source.planPages(maxKey, size, onProgress),
        averageRowBytes: (maxKey) => source.averageRowBytes(maxKey),
        countRowsUpTo: (maxKey, limit) => source.countRowsUpTo(maxKey, limit),
        ...(isFileRecordSource(source)
          ? {
              planFilePages: (maxKey, target, onProgress) => source.planFilePages(maxKey, target, onProgress),
              checkFileSchema: async () => void (await source.fileSchema()),
            }
          : {}),
      };
    }
    const listing = await readListing(name, config);
    const keyed = await this.keyListing(name, listing, opts.reserveKeys !== false);
    const n = listing.records;
    const now = new Date().toISOString().replace(/Z$/, '000Z');
    return {
      watermark: { maxKey: n ? keyed.sorted[n - 1] : null, time: now },
      timezone: config.timezone ?? 'UTC',
      snapshot: listing.sha256,
      duplicates: listing.duplicates,
      planPages: async (maxKey, size) => keyPages(keyed.sorted, maxKey, size),
      // Not staged yet: the width of a record is that of its staged COPY text.
      averageRowBytes: async () => (n ? listing.copyText.length / n : null),
      countRowsUpTo: async (maxKey, limit) => Math.min(keysUpTo(keyed.sorted, maxKey), limit),
      decoded: { encoding: config.legacyEncoding ?? 'LATIN1', values: listing.decoded },
      stage: (c, versionId) => stageListing(c, versionId, listing, keyed.keys),
      compareListing: (baseVersionId) =>
        withTransaction(this.catalogPool!, async (c) => {
          await copyListingToTemp(c, '0', listing, keyed.keys);
          return listingChanges(c, baseVersionId, config.timezone ?? 'UTC');
        }),
      ...(config.filesCommand
        ? {
            planFilePages: async (_maxKey, target) => listingFilePages(keyed.filesByKey, target, keyed.sorted),
            checkFileSchema: async () => undefined,
            listedFileRecords: (keys) => listedFiles(keyed.sorted, keyed.filesByKey, keys),
            fileWeightOf: listedFileWeight(keyed.sorted, keyed.filesByKey),
          }
        : {}),
    };
  }

  /**
   * The stable job keys of a parsed listing's records (lib/catalog/listing-keys.ts): a record
   * without an id, or quarantined, is named by the listing's sha256 and its position. `reserve`
   * records new keys.
   * @returns keys in listing order, the keys ascending, and the records' file counts in key order.
   */
  private async keyListing(
    name: string,
    listing: ListingForStaging,
    reserve: boolean,
  ): Promise<{ keys: string[]; sorted: string[]; filesByKey: (string | null)[] }> {
    if (!this.catalogPool) throw new Error(`source ${name} needs the catalog database to key its listing`);
    const ids = listing.recordIds.map((id, i) => id ?? `#${listing.sha256}:${i + 1}`);
    const keys = await listingJobKeys(this.catalogPool, name, ids, reserve);
    const order = keys.map((_, i) => i).sort((a, b) => compareKeys(keys[a], keys[b]));
    return { keys, sorted: order.map((i) => keys[i]), filesByKey: order.map((i) => listing.files[i]) };
  }

  /**
   * The change detection of source `name` when it has one (director catalogs; lib/sources/bareos-refresh.ts),
   * else null (listings: a refresh compares their records, {@link PreparedSource.compareListing}).
   * @throws UnknownSourceError when the configuration does not define it.
   */
  refreshSource(name: string): RefreshSource | null {
    if (isFileSource(this.lookup(name))) return null;
    return this.get(name) as BareosSource;
  }

  /**
   * What a refresh's reconciliation compares per key range with version `versionId`: a director
   * catalog's jobs, or the version's staged listing.
   * @throws UnknownSourceError when the configuration does not define it.
   */
  rangeKeySource(name: string, versionId: string): RangeKeySource {
    const s: JobSource & Partial<RangeKeySource> = this.get(name, versionId);
    if (!s.rangeKeyCounts || !s.keysInRanges)
      throw new Error(`source ${name} (${s.kind}) has no key ranges to compare`);
    return s as JobSource & RangeKeySource;
  }

  /** Closes every opened database source. */
  async close(): Promise<void> {
    await Promise.all([...this.open.values()].map((s) => s.close()));
    this.open.clear();
  }
}

/** Orders decimal keys numerically. */
const compareKeys = (a: string, b: string): number => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0);

/** The listed file counts (`files`, aligned with `sorted`) of `keys` (null: all), summed where given. */
function listedFiles(sorted: string[], files: (string | null)[], keys: string[] | null): number {
  const wanted = keys ? new Set(keys) : null;
  let n = 0;
  sorted.forEach((k, i) => {
    if (!wanted || wanted.has(k)) n += listedFileCount(files[i]) ?? 0;
  });
  return n;
}

/** {@link PreparedSource.fileWeightOf} over the listed file counts `files`, aligned with `sorted`. */
function listedFileWeight(sorted: string[], files: (string | null)[]) {
  const byKey = new Map(sorted.map((k, i) => [k, files[i]]));
  return (key: string, unknown: number): number => {
    if (!byKey.has(key)) return 1; // a deleted job
    const count = listedFileCount(byKey.get(key));
    return count === null ? unknown : 1 + count;
  };
}

/** Keys of `sorted` (ascending) at or below `maxKey`. */
function keysUpTo(sorted: string[], maxKey: string): number {
  const max = BigInt(maxKey);
  let n = 0;
  while (n < sorted.length && BigInt(sorted[n]) <= max) n++;
  return n;
}

/**
 * Pages of `pageSize` consecutive keys of `sorted` (ascending) at or below `maxKey`: a listing's
 * keys have gaps (forgotten snapshots), so pages are cut from the keys themselves.
 */
export function keyPages(sorted: string[], maxKey: string, pageSize: number): PageRange[] {
  const upTo = keysUpTo(sorted, maxKey);
  const pages: PageRange[] = [];
  for (let i = 0; i < upTo; i += pageSize) {
    const last = Math.min(i + pageSize, upTo) - 1;
    pages.push({ firstKey: sorted[i], lastKey: sorted[last], rows: last - i + 1 });
  }
  return pages;
}
