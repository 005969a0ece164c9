/**
 * A staged listing whose jobs' files are listed by the source's `filesCommand` (restic
 * `ls --json`, borg `list --json-lines`), run per snapshot or archive inside the page (and again by
 * a repair). The source side of its file reconciliation is what each page listed
 * (lib/catalog/listing-files.ts), since a snapshot's file list never changes.
 */
import type { Pool } from 'pg';
import type { FileSourceConfig } from '../config';
import { listingFileBucketStats, listingFileJobStats } from '../catalog/listing-files';
import type { RowHashKind } from '../fingerprint';
import { LISTING_STAGE_COLUMNS } from './file-listing';
import type { CommandJob, FilesCommandSettings } from './files-command';
import { filesCommandStream } from './files-command';
import { listingFormat } from './listing-formats';
import { StagedSource } from './staged';
import { openStagedPageRead } from './staged-page';
import type {
  FileJobStat,
  FileRead,
  FileSchema,
  FileSource,
  PageKeys,
  PageRange,
  PageRead,
  PageReadOptions,
  ReadRow,
  SourceFileReconciliation,
} from './types';

/** Default time limit of one `filesCommand` (ms). */
export const FILES_COMMAND_TIMEOUT_MS = 240_000;

/**
 * The file records a listing says a job holds (`files`: restic's `summary.total_files_processed`,
 * text), at most 10^12; null when it says none (borg) or not a count.
 */
export function listedFileCount(files: string | null | undefined): number | null {
  return typeof files === 'string' && /^\d+$/.test(files) ? Math.min(Number(files), 1e12) : null;
}

/**
 * Pages of a staged listing's jobs for a rebuild with files, in key order (`keys` ascending, default
 * 1..n; `files[i]` is the job of `keys[i]`): a job weighs 1 + its
 * estimated file count (`files[i]`: restic's `summary.total_files_processed`), or the whole
 * `targetRows` when the listing gives none (borg), so such a job is a page of its own; jobs join a
 * page up to `targetRows`.
 */
export function listingFilePages(
  files: (string | null)[],
  targetRows: number,
  keys: string[] = files.map((_, i) => String(i + 1)),
): PageRange[] {
  const pages: PageRange[] = [];
  let first = 0;
  let rows = 0;
  let weight = 0;
  const close = (last: number) => {
    pages.push({ firstKey: keys[first], lastKey: keys[last], rows, ...(weight > rows ? { weight } : {}) });
    rows = 0;
    weight = 0;
  };
  files.forEach((f, i) => {
    const w = 1 + (listedFileCount(f) ?? targetRows);
    if (rows && weight + w > targetRows) close(i - 1);
    if (!rows) first = i;
    rows++;
    weight += w;
  });
  if (rows) close(files.length - 1);
  return pages;
}

/** A staged listing with file records: the page and the repair list them by the source's `filesCommand`. */
export class StagedFileSource extends StagedSource implements FileSource {
  constructor(
    private readonly sourceName: string,
    private readonly listingConfig: FileSourceConfig & { filesCommand: string[] },
    private readonly catalogPool: Pool,
    private readonly version: string,
  ) {
    super(sourceName, listingConfig, catalogPool, version);
  }

  /** A listing's file records have no catalog schema: version 0, `listing`. */
  async fileSchema(): Promise<FileSchema> {
    return { version: 0, name: 'listing' };
  }

  async planFilePages(maxKey: string, targetRows: number): Promise<PageRange[]> {
    const { rows } = await this.catalogPool.query<{ files: string | null }>(
      `SELECT files FROM staged_record WHERE version_id = $1 AND seq <= $2::bigint ORDER BY seq`,
      [this.version, maxKey],
    );
    return listingFilePages(
      rows.map((r) => r.files),
      targetRows,
    );
  }

  /**
   * What the pages listed, per bucket. Listings count no orphan records, and restic's
   * `total_files_processed` counts files only (not directories), so no job's count is compared with it.
   * @throws Error when asked for another hash than `hashtext64` (staged sources hash in the catalog database).
   */
  async fileReconciliation(maxKey: string, hash: RowHashKind): Promise<SourceFileReconciliation> {
    if (hash !== 'hashtext64') throw new Error(`a listing source's file statistics are hashtext64, not ${hash}`);
    return {
      buckets: await listingFileBucketStats(this.catalogPool, this.version, maxKey),
      orphanFiles: 0,
      jobFilesMismatch: { jobs: 0, examples: [] },
    };
  }

  async fileJobStats(jobIds: string[], hash: RowHashKind): Promise<FileJobStat[]> {
    if (hash !== 'hashtext64') throw new Error(`a listing source's file statistics are hashtext64, not ${hash}`);
    return listingFileJobStats(this.catalogPool, this.version, jobIds);
  }

  /**
   * A page read with file records: the page's jobs are listed by the `filesCommand` when the read
   * opens (staged-page.ts), before the page transaction.
   */
  async openPageRead(range: PageKeys, options: PageReadOptions): Promise<PageRead> {
    const settings = await this.pageSettings(options);
    if (!options.files) return openStagedPageRead(this.catalogPool, range, settings);
    return openStagedPageRead(this.catalogPool, range, {
      ...settings,
      files: {
        settings: this.commandSettings(options.signal),
        jobs: (rows) => this.commandJobs(rows),
        legacyEncoding: this.legacyEncodingName(),
        timezone: await this.timezone(),
      },
    });
  }

  /** The encoding a listed path or name that is not UTF-8 is decoded from: `legacyEncoding`, default LATIN1. */
  legacyEncodingName(): string {
    return this.listingConfig.legacyEncoding ?? 'LATIN1';
  }

  /** The settings of this source's `filesCommand` runs; `signal` ends the command in flight. */
  commandSettings(signal?: AbortSignal): FilesCommandSettings {
    return {
      source: this.sourceName,
      kind: this.listingConfig.kind,
      argv: this.listingConfig.filesCommand,
      repository: this.listingConfig.repository,
      timeoutMs: this.listingConfig.filesCommandTimeoutMs ?? FILES_COMMAND_TIMEOUT_MS,
      signal,
    };
  }

  /** The jobs of `rows` (staged records with an id) as the commands list them. */
  commandJobs(rows: ReadRow[]): CommandJob[] {
    const format = listingFormat(this.listingConfig.kind);
    return rows
      .filter((r) => r.job_id !== null && r.job_key !== null)
      .map((r) => ({
        jobKey: r.job_key!,
        jobId: r.job_id!,
        bucket: r.bucket,
        ...format.commandValues({ id: r.job_id!, job: r.job, extra: r.extra }),
      }));
  }

  /**
   * The listed file records of the jobs `jobIds`, one command per job, streamed (used by a repair).
   * Each command has the source's `filesCommandTimeoutMs`; the statement timeout does not apply.
   */
  async openFileRead(jobIds: string[]): Promise<FileRead> {
    const { rows } = await this.catalogPool.query<{ seq: string }>(
      `SELECT seq::text FROM staged_record WHERE version_id = $1 AND job_id = ANY($2::text[]) ORDER BY seq`,
      [this.version, jobIds],
    );
    const records = await this.readKeys(rows.map((r) => r.seq));
    const settings = this.commandSettings();
    const timezone = await this.timezone();
    return {
      copyFilesOut: async () => filesCommandStream(settings, this.commandJobs(records)),
      legacyEncoding: this.legacyEncodingName(),
      stageColumns: LISTING_STAGE_COLUMNS,
      timezone,
      close: async () => undefined,
    };
  }
}
