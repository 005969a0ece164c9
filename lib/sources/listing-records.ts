/**
 * The machinery shared by the listing formats' record mappers (lib/sources/listing-formats/): a
 * job listing's record is validated with zod (numbers kept exact by the bigint-safe parser) and
 * mapped to a staged record (catalog fields as text; times as written, converted later in SQL). A
 * record that cannot be used is quarantined with its reason, never thrown.
 */
import type { LosslessNumber } from 'lossless-json';
import { isLosslessNumber, stringify } from 'lossless-json';
import { z } from 'zod';
/** One listing record mapped to catalog fields (text), ready to be staged. */
export interface StagedRecord {
  jobId: string | null;
  job: string | null;
  jobName: string | null;
  client: string | null;
  type: string | null;
  level: string | null;
  status: string | null;
  /** `offset`: RFC 3339 with an offset (converted as an instant); `naive`: wall-clock time in the source's zone. */
  timeKind: 'offset' | 'naive';
  /** Start time as written, fraction truncated to microseconds. */
  startText: string | null;
  endText: string | null;
  /** Decimal text. */
  files: string | null;
  bytes: string | null;
  comment: string | null;
  /** Source extras as JSON text (values as strings, booleans or string arrays). */
  extra: string | null;
  /** Why the record is quarantined; null for a valid record. */
  rejectReason: string | null;
  /** A quarantined record as listed (exact numbers); null for a valid record (its fields are staged). */
  raw: string | null;
}

const TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})?$/i;

/**
 * Checks and normalises a listing time: RFC 3339 (with or without an offset), a real calendar date
 * and clock time (checked with UTC arithmetic, never Node's local zone), fraction truncated to
 * microseconds. Returns the text and whether it carries an offset, or an error message.
 */
export function normalizeTime(s: string): { text: string; offset: boolean } | { error: string } {
  const m = TIME.exec(s);
  if (!m) return { error: 'is not an RFC 3339 time' };
  const [, y, mo, d, h, mi, se, frac, off] = m;
  const month = Number(mo);
  const day = Number(d);
  const daysInMonth = new Date(Date.UTC(Number(y), month, 0)).getUTCDate();
  if (Number(y) < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth)
    return { error: 'is not a calendar date' };
  if (Number(h) > 23 || Number(mi) > 59 || Number(se) > 59) return { error: 'is not a clock time' };
  // PostgreSQL accepts offsets up to ±15:59 (real zones span −12:00 … +14:00).
  if (off && off.toUpperCase() !== 'Z' && (Number(off.slice(1, 3)) > 15 || Number(off.slice(4, 6)) > 59))
    return { error: 'has a UTC offset beyond ±15:59' };
  const micro = (frac ?? '').slice(0, 6).padEnd(6, '0');
  return {
    text: `${y}-${mo}-${d}T${h}:${mi}:${se}.${micro}${off ? (off.toUpperCase() === 'Z' ? 'Z' : off) : ''}`,
    offset: !!off,
  };
}

/** A JSON number kept exact, as decimal text. */
export const exactNumber = z
  .custom<LosslessNumber>((v) => isLosslessNumber(v), { message: 'must be a number' })
  .transform((n) => n.value);
/** A non-negative whole number (u64 counters), as decimal text. */
export const counter = exactNumber.pipe(
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a non-negative whole number' })
    .refine((s) => !/^\d+$/.test(s) || BigInt(s) <= 18446744073709551615n, { message: 'exceeds 64 bits' }),
);
/** Any string. */
export const text = z.string();
/** A non-empty string; `missing` names what is absent (a value of another type says so). */
export const requiredString = (missing: string) =>
  z
    .string({
      error: (iss) =>
        iss.input === undefined || iss.input === null
          ? missing
          : `must be a string, not ${Array.isArray(iss.input) ? 'an array' : typeof iss.input === 'object' && isLosslessNumber(iss.input) ? 'a number' : typeof iss.input}`,
    })
    .min(1, { message: missing });
/** An RFC 3339 time that {@link normalizeTime} accepts (with or without an offset). */
export const time = z.string({ message: 'is missing' }).superRefine((s, ctx) => {
  const t = normalizeTime(s);
  if ('error' in t) ctx.addIssue({ code: 'custom', message: t.error });
});

/** Value of a possibly lossless number or string, as text; null for anything else. */
function scalarText(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (isLosslessNumber(v)) return v.value;
  return null;
}

/** A zod error's issues as one reason: `field.path: message; …` (`record` for the record itself). */
export function issues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.length ? i.path.join('.') : 'record'}: ${i.message}`).join('; ');
}

/** A time's normalised text and whether it has an offset; nulls for none or an invalid one. */
function timeOf(s: string | null | undefined): { text: string | null; offset: boolean | null } {
  if (s === null || s === undefined) return { text: null, offset: null };
  const t = normalizeTime(s);
  return 'error' in t ? { text: null, offset: null } : t;
}

/** An object's defined, non-null entries as JSON text (a staged record's `extra`). */
export function compact(o: Record<string, unknown>): string {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null) out[k] = v;
  return JSON.stringify(out);
}

/** Path of the first string (value or key) for which `bad` is true. */
function stringPath(v: unknown, bad: (s: string) => boolean, at: string[] = []): string | null {
  if (typeof v === 'string') return bad(v) ? at.join('.') || 'record' : null;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const p = stringPath(v[i], bad, [...at, String(i)]);
      if (p) return p;
    }
    return null;
  }
  if (v && typeof v === 'object' && !isLosslessNumber(v)) {
    for (const [k, x] of Object.entries(v)) {
      if (bad(k)) return [...at, k.replace(/\u0000/g, '\\u0000')].join('.');
      const p = stringPath(x, bad, [...at, k]);
      if (p) return p;
    }
  }
  return null;
}

/**
 * Problems that make a record unusable before its fields are read: not an object, a NUL character,
 * a string that is not UTF-8 and holds a byte its legacy encoding leaves undefined (`undecodable`:
 * such decoded strings, with the reason).
 */
export function recordProblem(rec: unknown, undecodable?: Map<string, string>): string | null {
  if (rec === null || typeof rec !== 'object' || Array.isArray(rec) || isLosslessNumber(rec))
    return 'record: is not a JSON object';
  const nul = stringPath(rec, (s) => s.includes('\u0000'));
  if (nul) return `${nul}: contains a NUL character (\\u0000), which PostgreSQL text cannot store`;
  if (!undecodable?.size) return null;
  let reason = '';
  const at = stringPath(rec, (s) => {
    reason = undecodable.get(s) ?? '';
    return !!reason;
  });
  return at ? `${at}: ${reason}` : null;
}

/**
 * A quarantined record: the id (`rec.id`, when a usable string) and the `fields` that can be read
 * safely, the reason, the raw record (`raw`: the record as listed, exact numbers).
 */
export function rejected(rec: unknown, reason: string, raw: string, fields: Partial<StagedRecord>): StagedRecord {
  const r = (rec && typeof rec === 'object' && !Array.isArray(rec) ? rec : {}) as Record<string, unknown>;
  const safe = (v: unknown) => (typeof v === 'string' && v && !v.includes('\u0000') ? v : null);
  return {
    jobId: safe(r.id),
    job: null,
    jobName: null,
    client: null,
    type: 'B',
    level: null,
    status: null,
    timeKind: 'offset',
    startText: null,
    endText: null,
    files: null,
    bytes: null,
    comment: null,
    extra: null,
    ...fields,
    rejectReason: reason,
    raw,
  };
}

/**
 * Start and end as staged: both with an offset, or both naive (one kind per record); an absent or
 * invalid time is null. An error (`end: …`) when one has an offset and the other none.
 */
export function times(
  start: string | null | undefined,
  end: string | null | undefined,
): { kind: 'offset' | 'naive'; start: string | null; end: string | null } | { error: string } {
  const a = timeOf(start);
  const b = timeOf(end);
  if (a.offset !== null && b.offset !== null && a.offset !== b.offset) {
    return { error: 'end: has no UTC offset while the start has one (or the reverse): the instant would be ambiguous' };
  }
  return { kind: a.offset === false || b.offset === false ? 'naive' : 'offset', start: a.text, end: b.text };
}

/**
 * Maps one record with `map` (a format's record mapper), quarantining it (never failing the
 * listing) should the mapping itself throw.
 */
export function mapRecord(map: (rec: unknown) => StagedRecord, rec: unknown): StagedRecord {
  try {
    return map(rec);
  } catch (err) {
    return rejected(rec, `record: cannot be read: ${(err as Error).message}`, stringify(rec) ?? 'null', {});
  }
}
