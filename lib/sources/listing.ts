/**
 * restic (`restic snapshots --json`) and borg (`borg list --json`) listings: parsed with a
 * bigint-safe JSON parser, validated per record, and mapped to staged records (catalog fields as
 * text; times as written, converted later in SQL).
 */
import { createHash } from 'node:crypto';
import { isLosslessNumber, LosslessNumber, parse, stringify } from 'lossless-json';
import { z } from 'zod';
import { SourceDataInvalidError } from '../errors';

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
  /** The record as listed (exact numbers). */
  raw: string;
}

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
  if (Number(y) < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth) return { error: 'is not a calendar date' };
  if (Number(h) > 23 || Number(mi) > 59 || Number(se) > 59) return { error: 'is not a clock time' };
  if (off && off.toUpperCase() !== 'Z' && (Number(off.slice(1, 3)) > 23 || Number(off.slice(4, 6)) > 59)) return { error: 'has an invalid UTC offset' };
  const micro = (frac ?? '').slice(0, 6).padEnd(6, '0');
  return { text: `${y}-${mo}-${d}T${h}:${mi}:${se}.${micro}${off ? (off.toUpperCase() === 'Z' ? 'Z' : off) : ''}`, offset: !!off };
}

/** A JSON number kept exact, as decimal text. */
const exactNumber = z.custom<LosslessNumber>((v) => isLosslessNumber(v), { message: 'must be a number' }).transform((n) => n.value);
/** A non-negative whole number (u64 counters), as decimal text. */
const counter = exactNumber.pipe(
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a non-negative whole number' })
    .refine((s) => BigInt(s) <= 18446744073709551615n, { message: 'exceeds 64 bits' }),
);
const text = z.string();
const time = z.string({ message: 'is missing' }).superRefine((s, ctx) => {
  const t = normalizeTime(s);
  if ('error' in t) ctx.addIssue({ code: 'custom', message: t.error });
});

const resticSnapshot = z.looseObject({
  id: z.string({ message: 'no snapshot id' }).min(1, { message: 'no snapshot id' }),
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
  id: z.string({ message: 'no archive id' }).min(1, { message: 'no archive id' }),
  name: z.string({ message: 'no archive name' }).min(1, { message: 'no archive name' }),
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

/** Maps one restic snapshot; invalid snapshots keep what could be read and carry the reason. */
function resticRecord(rec: unknown): StagedRecord {
  const raw = stringify(rec) ?? 'null';
  const r = (rec && typeof rec === 'object' && !Array.isArray(rec) ? rec : {}) as Record<string, unknown>;
  const parsed = resticSnapshot.safeParse(rec);
  const reason = rec === null || typeof rec !== 'object' || Array.isArray(rec) ? 'record: is not a JSON object' : parsed.success ? null : issues(parsed.error);
  const id = typeof r.id === 'string' && r.id ? r.id : null;
  if (!parsed.success || reason) {
    return {
      jobId: id, job: id, jobName: null, client: typeof r.hostname === 'string' ? r.hostname : null, type: 'B', level: null, status: 'T',
      timeKind: 'offset', startText: null, endText: null,
      files: null, bytes: null, comment: null, extra: null, rejectReason: reason ?? 'record: invalid', raw,
    };
  }
  const s = parsed.data;
  const start = timeOf(s.summary?.backup_start ?? s.time);
  const end = timeOf(s.summary?.backup_end ?? s.time);
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
    timeKind: start.offset === false || end.offset === false ? 'naive' : 'offset',
    startText: start.text,
    endText: end.text,
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
    raw,
  };
}

/** Borg names checkpoint archives `<name>.checkpoint` (or `.checkpoint.N`): partial backups. */
const CHECKPOINT = /\.checkpoint(\.\d+)?$/;

/** Maps one borg archive; `client` is the configured client name (borg listings carry none). */
function borgRecord(rec: unknown, client: string | null): StagedRecord {
  const raw = stringify(rec) ?? 'null';
  const r = (rec && typeof rec === 'object' && !Array.isArray(rec) ? rec : {}) as Record<string, unknown>;
  const parsed = borgArchive.safeParse(rec);
  let reason = rec === null || typeof rec !== 'object' || Array.isArray(rec) ? 'record: is not a JSON object' : parsed.success ? null : issues(parsed.error);
  if (!reason && parsed.success && !parsed.data.start && !parsed.data.time) reason = 'start: is missing (neither start nor time)';
  const id = typeof r.id === 'string' && r.id ? r.id : null;
  const name = scalarText(r.name);
  if (!parsed.success || reason) {
    return {
      jobId: id, job: name, jobName: name, client, type: 'B', level: null, status: null,
      timeKind: 'naive', startText: null, endText: null,
      files: null, bytes: null, comment: null, extra: null, rejectReason: reason ?? 'record: invalid', raw,
    };
  }
  const a = parsed.data;
  const start = timeOf(a.start ?? a.time);
  const end = timeOf(a.end);
  return {
    jobId: a.id,
    job: a.name,
    jobName: a.name,
    client,
    type: 'B',
    level: null,
    status: CHECKPOINT.test(a.name) ? 'I' : 'T',
    timeKind: start.offset || end.offset ? 'offset' : 'naive',
    startText: start.text,
    endText: end.text,
    files: null,
    bytes: null,
    comment: a.comment ?? null,
    extra: compact({ archive: a.archive, barchive: a.barchive, time: a.time, hostname: a.hostname, username: a.username }),
    rejectReason: null,
    raw,
  };
}

/**
 * Parses a listing's bytes into staged records.
 * restic: an array of snapshots, `null` (no snapshots), or `--group-by` groups
 * (`[{ "group_key": …, "snapshots": [...] }]`, flattened). borg: `{ "archives": [...] }`.
 * Records repeating an earlier id are dropped, the last one listed wins; records without an id are
 * kept (to be quarantined).
 * @throws SourceDataInvalidError when the listing is not JSON or not of the kind's shape.
 */
export function parseListing(kind: 'restic-json' | 'borg-json', bytes: Buffer, opts: { source: string; client?: string | null }): StagedListing {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  let doc: unknown;
  try {
    doc = parse(bytes.toString('utf8'));
  } catch (err) {
    throw new SourceDataInvalidError(`source ${opts.source}: the ${kind} listing is not valid JSON: ${(err as Error).message}`);
  }
  let items: unknown[];
  let groups = 0;
  let records: StagedRecord[];
  if (kind === 'restic-json') {
    if (doc === null) items = [];
    else if (!Array.isArray(doc)) {
      throw new SourceDataInvalidError(`source ${opts.source}: a restic listing must be a JSON array of snapshots (restic snapshots --json), or null; found ${typeof doc}`);
    } else if (doc.some((g) => g && typeof g === 'object' && !Array.isArray(g) && 'group_key' in g)) {
      items = [];
      for (const g of doc as Record<string, unknown>[]) {
        if (!g || typeof g !== 'object' || !('group_key' in g) || !(g.snapshots === null || Array.isArray(g.snapshots))) {
          throw new SourceDataInvalidError(`source ${opts.source}: a restic --group-by listing must hold only groups { "group_key", "snapshots": [...] }`);
        }
        groups++;
        items.push(...((g.snapshots as unknown[] | null) ?? []));
      }
    } else items = doc;
    records = items.map(resticRecord);
  } else {
    if (!doc || typeof doc !== 'object' || Array.isArray(doc) || !('archives' in doc) || !Array.isArray((doc as { archives: unknown }).archives)) {
      throw new SourceDataInvalidError(`source ${opts.source}: a borg listing must be an object with an "archives" array (borg list --json)`);
    }
    items = (doc as { archives: unknown[] }).archives;
    records = items.map((a) => borgRecord(a, opts.client ?? null));
  }
  const last = new Map<string, number>();
  records.forEach((r, i) => r.jobId !== null && last.set(r.jobId, i));
  const unique = records.filter((r, i) => r.jobId === null || last.get(r.jobId) === i);
  return { sha256, records: unique, duplicates: records.length - unique.length, listed: records.length, groups };
}
