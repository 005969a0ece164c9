/**
 * Job listings of the listing sources (`restic snapshots --json`, `borg list --json`): the bytes
 * decoded, parsed by the source kind's format (lib/sources/listing-formats/) with a bigint-safe
 * JSON parser, records de-duplicated by id and turned into COPY text for `staged_record`.
 */
import { createHash } from 'node:crypto';
import { copyValue } from '../text-form';
import { SourceDataInvalidError } from '../errors';

import type { StagedRecord } from './listing-records';
import { decodeListing } from './legacy-text';
import type { ListingFormat } from './listing-formats';
import { listingFormat } from './listing-formats';

export type { StagedRecord } from './listing-records';
export { normalizeTime } from './listing-records';
export { presentTime } from './listing-formats/restic';

/** A parsed listing. */
export interface StagedListing {
  /** sha256 (hex) of the listing's bytes: the watermark of a file source. */
  sha256: string;
  /** Records in listing order, one per job id (the last record of a repeated id wins). */
  records: StagedRecord[];
  /** Records dropped because a later record had the same id. */
  duplicates: number;
  /** Records in the listing, before de-duplication. */
  listed: number;
  /** restic `--group-by` groups flattened (0 for a plain listing). */
  groups: number;
  /** Values that were not UTF-8, decoded from the legacy encoding, by field name (empty for a UTF-8 listing). */
  decoded: Record<string, number>;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The listing's text, a leading byte order mark dropped: the bytes as UTF-8 (as restic and borg
 * write JSON) when they all are; else each JSON string decoded on its own (see `legacy-text.ts`).
 */
function listingText(
  format: ListingFormat,
  bytes: Buffer,
  source: string,
  legacyEncoding: string,
): { text: string; decoded: Record<string, number>; undecodable: Map<string, string> } {
  let text: string;
  let decoded: Record<string, number> = {};
  let undecodable = new Map<string, string>();
  try {
    text = UTF8.decode(bytes);
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  } catch {
    const d = decodeListing(bytes, legacyEncoding);
    if ('badByte' in d) {
      throw new SourceDataInvalidError(
        `source ${source}: the ${format.kind} listing is not valid UTF-8 (byte ${firstInvalidUtf8(bytes)}) and holds a byte above 0x7F outside any JSON string (byte ${d.badByte}); restic and borg write UTF-8 JSON: is the file damaged or converted?`,
      );
    }
    ({ text, decoded, undecodable } = d);
  }
  if (!text.trim()) {
    throw new SourceDataInvalidError(
      `source ${source}: the ${format.kind} listing is empty (${bytes.length} bytes); ${format.emptyListingHint}`,
    );
  }
  return { text, decoded, undecodable };
}

/** Offset of the first byte that does not start or continue a valid UTF-8 sequence. */
function firstInvalidUtf8(bytes: Buffer): number {
  for (let lo = 0, hi = bytes.length; ;) {
    if (hi - lo <= 1) return lo;
    const mid = (lo + hi) >> 1;
    try {
      UTF8.decode(bytes.subarray(0, mid));
      lo = mid;
    } catch {
      hi = mid;
    }
  }
}

/**
 * Parses a listing's bytes into staged records, with the format of `kind` (a registered listing
 * kind: `restic-json`, `borg-json`; shapes in lib/sources/listing-formats/).
 * Of the valid records with the same id the last one listed is kept (the others are counted as
 * duplicates); invalid records are all kept, to be quarantined with their reason.
 * A string that is not valid UTF-8 is decoded from `opts.legacyEncoding` (PostgreSQL name, default
 * LATIN1); a record holding one with a byte that encoding leaves undefined is quarantined.
 * @param opts.client the source's `client` setting, for formats whose listings carry none (borg).
 * @throws ConfigError when no format has that kind; SourceDataInvalidError when the listing is
 *   empty, not JSON (a byte above 0x7F outside a string: "not valid UTF-8"), or not of the
 *   format's shape.
 */
export function parseListing(
  kind: string,
  bytes: Buffer,
  opts: { source: string; client?: string | null; legacyEncoding?: string },
): StagedListing {
  const format = listingFormat(kind);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const { text, decoded, undecodable } = listingText(format, bytes, opts.source, opts.legacyEncoding ?? 'LATIN1');
  const invalid = (err: unknown, where = '') =>
    new SourceDataInvalidError(
      `source ${opts.source}: the ${kind} listing is not valid JSON${where}: ${(err as Error).message}`,
    );
  const { records, groups } = format.parseJobListing(text, {
    source: opts.source,
    client: opts.client ?? null,
    undecodable,
    invalid,
  });
  const last = new Map<string, number>();
  records.forEach((r, i) => r.jobId !== null && r.rejectReason === null && last.set(r.jobId, i));
  const unique = records.filter((r, i) => r.jobId === null || r.rejectReason !== null || last.get(r.jobId) === i);
  return {
    sha256,
    records: unique,
    duplicates: records.length - unique.length,
    listed: records.length,
    groups,
    decoded,
  };
}

/** Columns of `staged_record` in the order of {@link toCopyText} (version_id comes from the session's default). */
export const STAGED_COPY_COLUMNS = [
  'seq',
  'job_id',
  'job',
  'job_name',
  'client',
  'type',
  'level',
  'status',
  'time_kind',
  'start_text',
  'end_text',
  'files',
  'bytes',
  'comment',
  'extra',
  'reject_reason',
  'raw',
] as const;

/** The records as `COPY staged_record (STAGED_COPY_COLUMNS) FROM STDIN` text, numbered from 1. */
export function toCopyText(records: StagedRecord[]): string {
  const lines: string[] = [];
  records.forEach((r, i) => {
    const values = [
      String(i + 1),
      r.jobId,
      r.job,
      r.jobName,
      r.client,
      r.type,
      r.level,
      r.status,
      r.timeKind,
      r.startText,
      r.endText,
      r.files,
      r.bytes,
      r.comment,
      r.extra,
      r.rejectReason,
      r.raw,
    ];
    lines.push(`${values.map(copyValue).join('\t')}\n`);
  });
  return lines.join('');
}
