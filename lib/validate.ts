/**
 * Per-record validation of source rows before a page writes them: malformed records are
 * quarantined (never fail the page), unknown codes are kept verbatim and counted as warnings,
 * and repeated job ids are de-duplicated with a fixed winner.
 */
import { z } from 'zod';
import type { PageRejectRecord, ReadRow, SourceRow } from './sources/types';
import { JOB_COLUMNS } from './sources/types';
import { fingerprintRow } from './fingerprint';

export { fingerprintRow } from './fingerprint';

/** Largest value of a PostgreSQL bigint. */
const INT8_MAX = 9223372036854775807n;
/** Largest value of a PostgreSQL integer. */
const INT4_MAX = 2147483647n;

const wholeNumber = (max: bigint, what: string) =>
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a non-negative whole number' })
    // Only numbers of 19 digits or more can exceed a 64-bit range: no BigInt for the others.
    .refine((s) => s.length < 19 || !/^\d+$/.test(s) || BigInt(s) <= max, { message: `exceeds the ${what} range` });
const signedNumber = (max: bigint, what: string, safeDigits: number) =>
  z
    .string()
    .regex(/^-?\d+$/, { message: 'must be a whole number' })
    .refine(
      (s) =>
        s.replace('-', '').length < safeDigits || !/^-?\d+$/.test(s) || (BigInt(s) <= max && BigInt(s) >= -max - 1n),
      { message: `exceeds the ${what} range` },
    );
/** Longest job id or client name (bytes): both are index keys, and a btree entry must fit a third of a page. */
export const MAX_KEY_BYTES = 1024;

/** A UTC instant as sources produce it: `YYYY-MM-DDTHH:MM:SS.ffffffZ`. */
const instant = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/, { message: 'is not a time' });

/** What a row must satisfy to be written as a job (every value is text or NULL, as read). */
export const jobRowSchema = z.object({
  job_key: z.string().regex(/^\d+$/, { message: 'paging key must be a non-negative whole number' }),
  job_id: z
    .string({ message: 'no job id' })
    .min(1, { message: 'no job id' })
    .refine((s) => s.length * 3 <= MAX_KEY_BYTES || Buffer.byteLength(s) <= MAX_KEY_BYTES, {
      message: `is longer than ${MAX_KEY_BYTES} bytes (an index key)`,
    }),
  client: z
    .string()
    .refine((s) => s.length * 3 <= MAX_KEY_BYTES || Buffer.byteLength(s) <= MAX_KEY_BYTES, {
      message: `is longer than ${MAX_KEY_BYTES} bytes (an index key)`,
    })
    .nullable(),
  sched_time: instant.nullable(),
  start_time: instant.nullable(),
  end_time: instant.nullable(),
  real_end_time: instant.nullable(),
  files: wholeNumber(INT8_MAX, '64-bit').nullable(),
  bytes: z
    .string()
    .regex(/^\d{1,20}$/, { message: 'must be a non-negative whole number of at most 20 digits' })
    .nullable(),
  read_bytes: z
    .string()
    .regex(/^\d{1,20}$/, { message: 'must be a non-negative whole number of at most 20 digits' })
    .nullable(),
  job_errors: signedNumber(INT4_MAX, '32-bit', 10).nullable(),
  job_tdate: signedNumber(INT8_MAX, '64-bit', 19).nullable(),
  vol_session_id: signedNumber(INT8_MAX, '64-bit', 19).nullable(),
  vol_session_time: signedNumber(INT8_MAX, '64-bit', 19).nullable(),
  bucket: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/, { message: 'is not a date' })
    .nullable(),
});

/**
 * Bareos/Bacula codes (from the products' catalog documentation). Others are kept verbatim and
 * counted as warnings: products add codes over versions.
 */
export const KNOWN_CODES = {
  type: new Set(['B', 'M', 'V', 'R', 'U', 'I', 'D', 'A', 'C', 'c', 'g', 'S', 'O']),
  level: new Set(['F', 'I', 'D', 'S', 'f', 'B', 'C', 'V', 'O', 'd', 'A']),
  status: new Set([
    'T',
    'W',
    'E',
    'e',
    'f',
    'D',
    'A',
    'I',
    'C',
    'R',
    'B',
    'F',
    'S',
    'm',
    'M',
    's',
    'j',
    'c',
    'd',
    't',
    'p',
    'a',
    'i',
    'l',
    'q',
    'L',
    'u',
    'w',
  ]),
} as const;

/** A quarantined record: where it was, why, and the record as read (lib/sources/types.ts). */
export type RejectRecord = PageRejectRecord;

/** The outcome of validating one page's rows. */
export interface ValidatedRows {
  /** Rows to write, unique by job id (the last row read for an id wins). */
  valid: SourceRow[];
  /** Quarantined records. */
  rejects: RejectRecord[];
  /** Rows with a type, level or status code not in {@link KNOWN_CODES} (kept verbatim). */
  warnings: number;
  /** Rows dropped because a later row in the page had the same job id. */
  duplicates: number;
}

/** Only the job columns of a read row. */
export function jobColumns(r: ReadRow): SourceRow {
  const out = {} as SourceRow;
  for (const c of JOB_COLUMNS) out[c] = r[c] ?? null;
  return out;
}

/** True when the row carries a type, level or status code that is not a known Bareos/Bacula code. */
export function hasUnknownCode(r: SourceRow): boolean {
  return (
    (r.type !== null && !KNOWN_CODES.type.has(r.type)) ||
    (r.level !== null && !KNOWN_CODES.level.has(r.level)) ||
    (r.status !== null && !KNOWN_CODES.status.has(r.status))
  );
}

function describeIssues(err: z.ZodError, row: Record<string, unknown>): string {
  return err.issues
    .map((i) => {
      const field = i.path.join('.');
      const value = i.path.length === 1 ? row[String(i.path[0])] : undefined;
      const shown = value !== undefined && value !== null ? JSON.stringify(value) : '';
      return `${field}: ${i.message}${shown ? ` (${shown.length > 80 ? `${shown.slice(0, 77)}…` : shown})` : ''}`;
    })
    .join('; ');
}

const DIGITS = /^\d+$/;
const SIGNED = /^-?\d+$/;
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const short = (s: string | null, max: number, re: RegExp) => s === null || (s.length < max && re.test(s));

/**
 * A fast check that accepts only rows {@link jobRowSchema} accepts (every test here is at least as
 * strict as the schema's), so the common, well-formed row skips the schema; any other row is
 * decided, and explained, by the schema. Measured: the schema alone costs about 2.3 µs per row in
 * the worker, a third of the page's own CPU (docs/performance.md).
 */
export function plainlyValid(r: SourceRow): boolean {
  return (
    r.job_key !== null &&
    r.job_key.length < 19 &&
    DIGITS.test(r.job_key) &&
    r.job_id !== null &&
    r.job_id.length > 0 &&
    r.job_id.length * 3 <= MAX_KEY_BYTES &&
    (r.client === null || r.client.length * 3 <= MAX_KEY_BYTES) &&
    short(r.sched_time, 28, INSTANT) &&
    short(r.start_time, 28, INSTANT) &&
    short(r.end_time, 28, INSTANT) &&
    short(r.real_end_time, 28, INSTANT) &&
    short(r.files, 19, DIGITS) &&
    short(r.bytes, 21, DIGITS) &&
    short(r.read_bytes, 21, DIGITS) &&
    short(r.job_errors, 10, SIGNED) &&
    short(r.job_tdate, 19, SIGNED) &&
    short(r.vol_session_id, 19, SIGNED) &&
    short(r.vol_session_time, 19, SIGNED) &&
    short(r.bucket, 11, DATE)
  );
}

/**
 * Validates one page's rows (ascending by key): rows already marked by staging (`reject_reason`) or
 * failing {@link jobRowSchema} are quarantined with their reason; the rest are de-duplicated by job
 * id, the LAST row read winning (deterministic: sources read in key order), and counted.
 */
export function validateRows(rows: ReadRow[]): ValidatedRows {
  const rejects: RejectRecord[] = [];
  const byId = new Map<string, SourceRow>();
  let accepted = 0;
  let warnings = 0;
  for (const r of rows) {
    // Rows of a database source carry only the job columns; staged rows also carry reject_reason and raw.
    const row = 'reject_reason' in r || 'raw' in r ? jobColumns(r) : (r as SourceRow);
    let reason = r.reject_reason ?? null;
    if (!reason && !plainlyValid(row)) {
      const parsed = jobRowSchema.safeParse(row);
      if (!parsed.success) reason = describeIssues(parsed.error, row);
    }
    if (reason) {
      rejects.push({
        jobKey: row.job_key!,
        jobId: row.job_id,
        bucket: row.bucket,
        fingerprintRow: fingerprintRow(row),
        reason,
        raw: r.raw ?? JSON.stringify(row),
      });
      continue;
    }
    accepted++;
    if (hasUnknownCode(row)) warnings++;
    byId.delete(row.job_id!); // re-insert so the map keeps key order of the winners
    byId.set(row.job_id!, row);
  }
  return { valid: [...byId.values()], rejects, warnings, duplicates: accepted - byId.size };
}
