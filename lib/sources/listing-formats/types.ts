/**
 * What differs between the formats of a listing source (`restic-json`, `borg-json`): the shared
 * machinery (lib/sources/listing.ts for the job listing, file-listing.ts and files-command.ts for
 * the file listings of `start --files`) reads, checks and stages; a {@link ListingFormat} says how
 * its tool's output maps to records and how the tool words what it prints.
 */
import type { SourceDataInvalidError } from '../../errors';
import type { StagedRecord } from '../listing-records';

/** What a format's job-listing parser is given besides the text. */
export interface JobListingContext {
  /** Source name, for messages (`source <name>: …`). */
  source: string;
  /** The source's `client` setting (for listings that carry no host name), null when unset. */
  client: string | null;
  /**
   * Strings of the listing that were not UTF-8 and hold a byte the source's legacy encoding leaves
   * undefined, with the reason: a record holding one is quarantined (see `recordProblem`).
   */
  undecodable: Map<string, string>;
  /**
   * The error for text that is not JSON: `source <name>: the <kind> listing is not valid
   * JSON<where>: <the parser's message>`; `where` locates it (` (element 3, at character 120)`).
   */
  invalid(err: unknown, where?: string): SourceDataInvalidError;
}

/** A job listing parsed by its format, records in listing order, before ids are de-duplicated. */
export interface ParsedJobListing {
  /** One staged record per listed job (invalid ones carry their `rejectReason`). */
  records: StagedRecord[];
  /** Groups flattened into `records` (restic `--group-by`); 0 for a plain listing. */
  groups: number;
}

/**
 * One line of a job's file listing (a JSON object) as its format reads it: the values as listed,
 * which the shared mapping (file-listing.ts `listingRecord`) checks and stages.
 */
export interface ListedFileEntry {
  /** The path as listed (text): a non-empty string, else the record is quarantined (`path: is missing`). */
  path: unknown;
  /**
   * The path's exact bytes when the line carries them (borg 2's `path_b64` for a path that is not
   * UTF-8): staged as bytes, decoded by the catalog; null to stage `path` as text.
   */
  pathBytes: Buffer | null;
  /** Whether the entry is a directory: its path is staged with a trailing '/' and an empty name. */
  isDir: boolean;
  /** The POSIX st_mode (file type and permission bits), or why the listed mode cannot be read. */
  mode: number | { error: string };
  /** Size in bytes as listed (a JSON number kept exact; absent or null for none). */
  size: unknown;
  /** Owner uid and gid as listed (JSON numbers; absent or null for none). */
  uid: unknown;
  gid: unknown;
  /**
   * Modification time as an RFC 3339 string (with an offset, or naive: read in the source's zone);
   * absent or null for none. A format listing another form (epoch seconds) converts it here.
   */
  mtime: unknown;
}

/** Values of the placeholders of a job's `filesCommand`. */
export interface CommandValues {
  /** `{id}`: the job's id in the repository (restic snapshot id, borg archive id). */
  id: string;
  /** `{short_id}`: a short form of the id (restic's `short_id`). */
  shortId: string;
  /** `{archive}`: the name the tool lists the job's files by (borg archive name). */
  archive: string;
}

/** A staged job as its placeholder values are read from it (a staged record's columns). */
export interface StagedJob {
  /** The record's job id (`staged_record.job_id`). */
  id: string;
  /** The record's job name (`staged_record.job`), null when none. */
  job: string | null;
  /** The record's extras as JSON text (`staged_record.extra`), null when none. */
  extra: string | null;
}

/**
 * A first line of a job's file listing that names the job (restic's snapshot line): the listing is
 * checked to be the job's, and a listing without it fails.
 */
export interface FileListingHeader {
  /** The job id the line names, or null when the line is not the header (a record, or not JSON). */
  jobId(line: string): string | null;
  /** The header's name in the message of a listing without one: `snapshot line`. */
  readonly name: string;
  /** The command such a listing comes from, in that message: `restic ls --json for one snapshot`. */
  readonly expected: string;
}

/**
 * One listing format: everything that differs between the tools a listing source reads. A format
 * lives in one file of lib/sources/listing-formats/ and is listed in that folder's index.ts (the
 * registry), which makes its `kind` a valid source `kind` of the configuration.
 * @typeParam K the configuration kind.
 */
export interface ListingFormat<K extends string = string> {
  /** The source `kind` of the configuration (`restic-json`): the registry's key. */
  readonly kind: K;
  /** What one job is called in messages: `snapshot` (restic), `archive` (borg). */
  readonly noun: string;
  /**
   * The end of the message for an empty job listing (`source S: the <kind> listing is empty (N
   * bytes); <hint>`): what the tool prints for a repository without jobs.
   */
  readonly emptyListingHint: string;
  /**
   * Parses the text of a job listing (UTF-8 decoded, byte order mark dropped, not blank) into
   * records: each record mapped with `mapRecord` (lib/sources/listing-records.ts), an unusable
   * record quarantined with its reason, never thrown.
   * @throws SourceDataInvalidError when the text is not JSON (`ctx.invalid`) or not of the
   *   format's shape (the message names the source and the expected shape).
   */
  parseJobListing(text: string, ctx: JobListingContext): ParsedJobListing;
  /** Reads one line of a job's file listing, parsed: a JSON object (exact numbers for long digits). */
  fileEntry(rec: Record<string, unknown>): ListedFileEntry;
  /** The placeholder values of a staged job's `filesCommand`. */
  commandValues(job: StagedJob): CommandValues;
  /** The job as messages of its files command name it: `snapshot <id>`, `archive <name> (id <id>)`. */
  describeJob(job: CommandValues): string;
  /**
   * What the tool prints on standard error for a job no longer in the repository (forgotten or
   * pruned after the plan); must not match a missing or locked repository.
   */
  readonly notInRepository: RegExp;
  /** The header line a job's file listing starts with; absent when its listings have none. */
  readonly fileListingHeader?: FileListingHeader;
}
