/**
 * restic (`restic snapshots --json`) and borg (`borg list --json`) listings: parsed with a
 * bigint-safe JSON parser one element at a time; each record is validated and mapped by
 * `listing-records.ts`.
 */
import { createHash } from 'node:crypto';
import { parse } from 'lossless-json';
import { copyValue } from '../text-form';
import { SourceDataInvalidError } from '../errors';

import type { StagedRecord } from './listing-records';
import { borgRecord, mapRecord, resticRecord } from './listing-records';
import { decodeListing } from './legacy-text';

export type { StagedRecord } from './listing-records';
export { normalizeTime, presentTime } from './listing-records';

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
  kind: string,
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
        `source ${source}: the ${kind} listing is not valid UTF-8 (byte ${firstInvalidUtf8(bytes)}) and holds a byte above 0x7F outside any JSON string (byte ${d.badByte}); restic and borg write UTF-8 JSON: is the file damaged or converted?`,
      );
    }
    ({ text, decoded, undecodable } = d);
  }
  if (!text.trim()) {
    throw new SourceDataInvalidError(
      `source ${source}: the ${kind} listing is empty (${bytes.length} bytes); ${kind === 'restic-json' ? 'restic prints [] or null when a repository has no snapshots' : 'borg prints {"archives": []} for an empty repository'}`,
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
 * The elements of a top-level JSON array as text slices, found by tracking strings and nesting
 * (each slice is then parsed on its own). Null when the text is not a well-formed array at the top
 * level: the caller parses the whole text, which reports the precise error.
 */
function arrayElements(text: string): { index: number; start: number; text: string }[] | null {
  const ws = (c: number) => c === 32 || c === 10 || c === 13 || c === 9;
  let i = 0;
  while (i < text.length && ws(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== 91 /* [ */) return null;
  i++;
  const out: { index: number; start: number; text: string }[] = [];
  let j = i;
  while (j < text.length && ws(text.charCodeAt(j))) j++;
  if (text.charCodeAt(j) === 93 /* ] */) {
    i = j + 1;
  } else {
    for (;;) {
      const start = i;
      let depth = 0;
      for (; i < text.length; i++) {
        const c = text.charCodeAt(i);
        if (c === 34 /* " */) {
          for (i++; i < text.length && text.charCodeAt(i) !== 34; i++) if (text.charCodeAt(i) === 92 /* \\ */) i++;
        } else if (c === 123 || c === 91) depth++;
        else if (c === 125 || c === 93) {
          if (depth === 0) break;
          depth--;
        } else if (c === 44 /* , */ && depth === 0) break;
      }
      const end = text.charCodeAt(i);
      if (i >= text.length || (end !== 44 && end !== 93)) return null;
      out.push({ index: out.length, start, text: text.slice(start, i) });
      i++;
      if (end === 93) break;
    }
  }
  while (i < text.length && ws(text.charCodeAt(i))) i++;
  return i === text.length ? out : null;
}

/**
 * Parses a listing's bytes into staged records.
 * restic: an array of snapshots, `null` (no snapshots), or `--group-by` groups
 * (`[{ "group_key": …, "snapshots": [...] }]`, flattened). borg: `{ "archives": [...] }`.
 * Of the valid records with the same id the last one listed is kept (the others are counted as
 * duplicates); invalid records are all kept, to be quarantined with their reason.
 * A string that is not valid UTF-8 is decoded from `opts.legacyEncoding` (PostgreSQL name, default
 * LATIN1); a record holding one with a byte that encoding leaves undefined is quarantined.
 * @throws SourceDataInvalidError when the listing is empty, not JSON (a byte above 0x7F outside a
 *   string: "not valid UTF-8"), or not of the kind's shape.
 */
export function parseListing(
  kind: 'restic-json' | 'borg-json',
  bytes: Buffer,
  opts: { source: string; client?: string | null; legacyEncoding?: string },
): StagedListing {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const { text, decoded, undecodable } = listingText(kind, bytes, opts.source, opts.legacyEncoding ?? 'LATIN1');
  const restic = (rec: unknown) => resticRecord(rec, undecodable);
  const invalid = (err: unknown, where = '') =>
    new SourceDataInvalidError(
      `source ${opts.source}: the ${kind} listing is not valid JSON${where}: ${(err as Error).message}`,
    );
  let groups = 0;
  let records: StagedRecord[] = [];
  // A restic listing is an array: its elements are parsed one at a time, so memory holds one
  // parsed snapshot at a time instead of the whole document as objects.
  const elements = kind === 'restic-json' ? arrayElements(text) : null;
  if (elements) {
    let grouped: boolean | null = null;
    for (const el of elements) {
      let item: unknown;
      try {
        item = parse(el.text);
      } catch (err) {
        throw invalid(err, ` (element ${el.index + 1}, at character ${el.start})`);
      }
      const isGroup = !!item && typeof item === 'object' && !Array.isArray(item) && 'group_key' in item;
      grouped ??= isGroup;
      if (!grouped) {
        records.push(mapRecord(restic, item));
        continue;
      }
      const g = item as Record<string, unknown>;
      if (!isGroup || !(g.snapshots === null || Array.isArray(g.snapshots))) {
        throw new SourceDataInvalidError(
          `source ${opts.source}: a restic --group-by listing must hold only groups { "group_key", "snapshots": [...] }`,
        );
      }
      groups++;
      for (const snap of (g.snapshots as unknown[] | null) ?? []) records.push(mapRecord(restic, snap));
    }
  } else {
    let doc: unknown;
    try {
      doc = parse(text);
    } catch (err) {
      throw invalid(err);
    }
    if (kind === 'restic-json') {
      if (doc !== null) {
        throw new SourceDataInvalidError(
          `source ${opts.source}: a restic listing must be a JSON array of snapshots (restic snapshots --json), or null; found ${Array.isArray(doc) ? 'an array' : typeof doc}`,
        );
      }
    } else {
      if (
        !doc ||
        typeof doc !== 'object' ||
        Array.isArray(doc) ||
        !('archives' in doc) ||
        !Array.isArray((doc as { archives: unknown }).archives)
      ) {
        throw new SourceDataInvalidError(
          `source ${opts.source}: a borg listing must be an object with an "archives" array (borg list --json)`,
        );
      }
      records = (doc as { archives: unknown[] }).archives.map((a) =>
        mapRecord((x) => borgRecord(x, opts.client ?? null, undecodable), a),
      );
    }
  }
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
