/**
 * One record of a restic (`restic snapshots --json`) or borg (`borg list --json`) listing: validated
 * with zod (numbers kept exact by the bigint-safe parser) and mapped to a staged record (catalog
 * fields as text; times as written, converted later in SQL). A record that cannot be used is
 * quarantined with its reason, never thrown.
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
const exactNumber = z
  .custom<LosslessNumber>((v) => isLosslessNumber(v), { message: 'must be a number' })
  .transform((n) => n.value);
/** A non-negative whole number (u64 counters), as decimal text. */
const counter = exactNumber.pipe(
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a non-negative whole number' })
    .refine((s) => !/^\d+$/.test(s) || BigInt(s) <= 18446744073709551615n, { message: 'exceeds 64 bits' }),
);
const text = z.string();
/** A non-empty string; `missing` names what is absent (a value of another type says so). */
const requiredString = (missing: string) =>
  z
    .string({
      error: (iss) =>
        iss.input === undefined || iss.input === null
          ? missing
          : `must be a string, not ${Array.isArray(iss.input) ? 'an array' : typeof iss.input === 'object' && isLosslessNumber(iss.input) ? 'a number' : typeof iss.input}`,
    })
    .min(1, { message: missing });
const time = z.string({ message: 'is missing' }).superRefine((s, ctx) => {
  const t = normalizeTime(s);
  if ('error' in t) ctx.addIssue({ code: 'custom', message: t.error });
});

const resticSnapshot = z.looseObject({
  id: requiredString('no snapshot id'),
  short_id: text.nullish(),
  time,
  tree: text.nullish(),
  parent: text.nullish(),
  original: text.nullish(),
  paths: z.array(text).nullish(),
  tags: z.array(text).nullish(),
  excludes: z.array(text).nullish(),
  hostname: text.nullish(),
  username: text.nullish(),
  uid: counter.nullish(),
  gid: counter.nullish(),
  program_version: text.nullish(),
  summary: z
    .looseObject({
      backup_start: time.nullish(),
      backup_end: time.nullish(),
      total_files_processed: counter.nullish(),
      total_bytes_processed: counter.nullish(),
    })
    .nullish(),
});

const borgArchive = z.looseObject({
  id: requiredString('no archive id'),
  name: requiredString('no archive name'),
  archive: text.nullish(),
  barchive: text.nullish(),
  start: time.nullish(),
  time: time.nullish(),
  end: time.nullish(),
  hostname: text.nullish(),
  username: text.nullish(),
  comment: text.nullish(),
});

/** Value of a possibly lossless number or string, as text; null for anything else. */
function scalarText(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (isLosslessNumber(v)) return v.value;
  return null;
}

function issues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.length ? i.path.join('.') : 'record'}: ${i.message}`).join('; ');
}

function timeOf(s: string | null | undefined): { text: string | null; offset: boolean | null } {
  if (s === null || s === undefined) return { text: null, offset: null };
  const t = normalizeTime(s);
  return 'error' in t ? { text: null, offset: null } : t;
}

/** Object with only the defined, non-null entries. */
function compact(o: Record<string, unknown>): string {
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
function recordProblem(rec: unknown, undecodable?: Map<string, string>): string | null {
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

/** A quarantined record: the id and names that can be read safely, the reason, the raw record. */
function rejected(rec: unknown, reason: string, raw: string, fields: Partial<StagedRecord>): StagedRecord {
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

/** Start and end as staged: both with an offset, or both naive (one kind per record). */
function times(
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

/** Go's zero `time.Time` as restic writes it, with any fraction or a zero offset. */
const GO_ZERO_TIME = /^0001-01-01T00:00:00(\.0+)?(Z|[+-]00:00)$/;

/** A restic time, or null when it is absent or Go's zero time (restic's "not recorded"). */
export function presentTime(t: string | null | undefined): string | null {
  return t && !GO_ZERO_TIME.test(t) ? t : null;
}

/**
 * Maps one restic snapshot; invalid snapshots keep their id and carry the reason.
 * @param undecodable decoded strings holding a byte undefined in the legacy encoding, with the reason.
 */
export function resticRecord(rec: unknown, undecodable?: Map<string, string>): StagedRecord {
  const raw = () => stringify(rec) ?? 'null';
  const problem = recordProblem(rec, undecodable);
  if (problem) return rejected(rec, problem, raw(), {});
  const parsed = resticSnapshot.safeParse(rec);
  if (!parsed.success) return rejected(rec, issues(parsed.error), raw(), {});
  const s = parsed.data;
  // summary.backup_start/backup_end when present, else time; a summary with a start but no end has no end.
  // restic's zero time (0001-01-01T00:00:00Z, written by `restic rewrite --snapshot-summary`) is a missing value.
  const start = presentTime(s.summary?.backup_start);
  const end = presentTime(s.summary?.backup_end);
  const t = times(start ?? s.time, end ?? (start ? null : s.time));
  if ('error' in t) return rejected(rec, `summary.backup_${t.error}`, raw(), {});
  const paths = s.paths ?? [];
  const tags = s.tags ?? [];
  return {
    jobId: s.id,
    job: s.id,
    jobName: paths.length ? paths.join(', ') : tags.length ? tags.join(', ') : null,
    client: s.hostname ?? null,
    type: 'B',
    level: null,
    status: 'T',
    timeKind: t.kind,
    startText: t.start,
    endText: t.end,
    files: s.summary?.total_files_processed ?? null,
    bytes: s.summary?.total_bytes_processed ?? null,
    comment: null,
    extra: compact({
      short_id: s.short_id,
      time: s.time,
      tree: s.tree,
      parent: s.parent,
      original: s.original,
      copy: !!s.original,
      paths: s.paths,
      tags: s.tags,
      username: s.username,
      // restic omits empty fields: a missing uid or gid is 0.
      uid: s.uid ?? '0',
      gid: s.gid ?? '0',
      program_version: s.program_version,
    }),
    rejectReason: null,
    raw: null,
  };
}

/** Borg names checkpoint archives `<name>.checkpoint` (or `.checkpoint.N`): partial backups. */
const CHECKPOINT = /\.checkpoint(\.\d+)?$/;

/**
 * Maps one borg archive; `client` is the configured client name (borg listings carry none).
 * @param undecodable decoded strings holding a byte undefined in the legacy encoding, with the reason.
 */
export function borgRecord(rec: unknown, client: string | null, undecodable?: Map<string, string>): StagedRecord {
  const raw = () => stringify(rec) ?? 'null';
  const problem = recordProblem(rec, undecodable);
  const name =
    typeof (rec as { name?: unknown } | null)?.name === 'string' ? (rec as { name: string }).name || null : null;
  const known = {
    job: name && !name.includes('\u0000') ? name : null,
    jobName: name && !name.includes('\u0000') ? name : null,
    client,
    timeKind: 'naive' as const,
  };
  if (problem) return rejected(rec, problem, raw(), known);
  const parsed = borgArchive.safeParse(rec);
  if (!parsed.success) return rejected(rec, issues(parsed.error), raw(), known);
  const a = parsed.data;
  if (!a.start && !a.time) return rejected(rec, 'start: is missing (neither start nor time)', raw(), known);
  const t = times(a.start ?? a.time, a.end);
  if ('error' in t) return rejected(rec, t.error, raw(), known);
  return {
    jobId: a.id,
    job: a.name,
    jobName: a.name,
    client,
    type: 'B',
    level: null,
    status: CHECKPOINT.test(a.name) ? 'I' : 'T',
    timeKind: t.kind,
    startText: t.start,
    endText: t.end,
    files: null,
    bytes: null,
    comment: a.comment ?? null,
    extra: compact({
      archive: a.archive,
      barchive: a.barchive,
      time: a.time,
      hostname: a.hostname,
      username: a.username,
    }),
    rejectReason: null,
    raw: null,
  };
}

/** Maps one record, quarantining it (never failing the listing) should the mapping itself fail. */
export function mapRecord(map: (rec: unknown) => StagedRecord, rec: unknown): StagedRecord {
  try {
    return map(rec);
  } catch (err) {
    return rejected(rec, `record: cannot be read: ${(err as Error).message}`, stringify(rec) ?? 'null', {});
  }
}
