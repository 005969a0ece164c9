/**
 * restic (`restic-json`): the job listing is `restic snapshots --json` (an array of snapshots,
 * `null`, or `--group-by` groups), a job's file listing `restic ls --json <id>` (a snapshot line,
 * then one node per line; shapes in file-listing.ts).
 */
import { isLosslessNumber, parse, stringify } from 'lossless-json';
import { z } from 'zod';
import { SourceDataInvalidError } from '../../errors';
import { S_IFMT } from '../file-listing';
import { arrayElements } from '../json-elements';
import type { StagedRecord } from '../listing-records';
import {
  compact,
  counter,
  issues,
  mapRecord,
  recordProblem,
  rejected,
  requiredString,
  text,
  time,
  times,
} from '../listing-records';
import type { JobListingContext, ListingFormat, ParsedJobListing } from './types';

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

/**
 * A restic listing: an array of snapshots, `null` (no snapshots), or `--group-by` groups
 * (`[{ "group_key": …, "snapshots": [...] }]`, flattened). The array's elements are parsed one at
 * a time, so memory holds one parsed snapshot at a time instead of the whole document as objects.
 */
function parseSnapshots(text: string, ctx: JobListingContext): ParsedJobListing {
  const restic = (rec: unknown) => resticRecord(rec, ctx.undecodable);
  const records: StagedRecord[] = [];
  let groups = 0;
  const elements = arrayElements(text);
  if (elements) {
    let grouped: boolean | null = null;
    for (const el of elements) {
      let item: unknown;
      try {
        item = parse(el.text);
      } catch (err) {
        throw ctx.invalid(err, ` (element ${el.index + 1}, at character ${el.start})`);
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
          `source ${ctx.source}: a restic --group-by listing must hold only groups { "group_key", "snapshots": [...] }`,
        );
      }
      groups++;
      for (const snap of (g.snapshots as unknown[] | null) ?? []) records.push(mapRecord(restic, snap));
    }
    return { records, groups };
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw ctx.invalid(err);
  }
  if (doc !== null) {
    throw new SourceDataInvalidError(
      `source ${ctx.source}: a restic listing must be a JSON array of snapshots (restic snapshots --json), or null; found ${Array.isArray(doc) ? 'an array' : typeof doc}`,
    );
  }
  return { records, groups };
}

/** restic's node `type` → POSIX file type bits (`irregular`: none). */
const RESTIC_TYPES: Record<string, number> = {
  file: S_IFMT.file,
  dir: S_IFMT.dir,
  symlink: S_IFMT.symlink,
  dev: S_IFMT.block,
  chardev: S_IFMT.char,
  fifo: S_IFMT.fifo,
  socket: S_IFMT.socket,
  irregular: 0,
};

/** Go os.FileMode bits that map to POSIX permission bits beyond the low nine. */
const GO_SETUID = 1 << 23;
const GO_SETGID = 1 << 22;
const GO_STICKY = 1 << 20;

/**
 * A restic node's POSIX st_mode: the file type from the node's `type`, the permissions from Go's
 * `os.FileMode` (low 9 bits, setuid, setgid, sticky). `goMode` is absent when restic left it out (zero).
 * @returns the mode, or a reason when the type is unknown or the mode is not a 32-bit unsigned integer.
 */
export function resticMode(type: unknown, goMode: number | undefined): number | { error: string } {
  if (typeof type !== 'string' || !(type in RESTIC_TYPES))
    return { error: `type: unknown node type ${JSON.stringify(type)}` };
  const m = goMode ?? 0;
  if (!Number.isInteger(m) || m < 0 || m > 0xffffffff) return { error: `mode: not a Go file mode (${m})` };
  const perm = (m & 0o777) | (m & GO_SETUID ? 0o4000 : 0) | (m & GO_SETGID ? 0o2000 : 0) | (m & GO_STICKY ? 0o1000 : 0);
  return RESTIC_TYPES[type] | perm;
}

/** A lossless JSON number as a JS number (Go file modes fit in 32 bits); undefined when absent or not a number. */
function numberOrUndefined(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'number') return v;
  return isLosslessNumber(v) ? Number(v.value) : Number.NaN;
}

/**
 * The id of a restic snapshot line (`struct_type` or `message_type` "snapshot"), or null when the
 * line is not one (a node line, or not JSON).
 */
export function resticSnapshotId(line: string): string | null {
  if (!line.includes('"snapshot"')) return null;
  try {
    const v = JSON.parse(line) as Record<string, unknown>;
    const isSnapshot = v.struct_type === 'snapshot' || v.message_type === 'snapshot';
    return isSnapshot && typeof v.id === 'string' ? v.id : null;
  } catch {
    return null;
  }
}

/** restic: `restic snapshots --json` and `restic ls --json <id>`. */
export const resticFormat: ListingFormat<'restic-json'> = {
  kind: 'restic-json',
  noun: 'snapshot',
  emptyListingHint: 'restic prints [] or null when a repository has no snapshots',
  parseJobListing: parseSnapshots,
  fileEntry: (rec) => ({
    path: rec.path,
    pathBytes: null,
    isDir: rec.type === 'dir',
    mode: resticMode(rec.type, numberOrUndefined(rec.mode)),
    size: rec.size,
    uid: rec.uid,
    gid: rec.gid,
    mtime: rec.mtime,
  }),
  commandValues: (job) => {
    const extra = job.extra ? (JSON.parse(job.extra) as { short_id?: unknown }) : {};
    return {
      id: job.id,
      // the first 8 digits of the id when the listing had no short id
      shortId: typeof extra.short_id === 'string' ? extra.short_id : job.id.slice(0, 8),
      archive: job.id,
    };
  },
  describeJob: (job) => `snapshot ${job.id}`,
  // restic 0.14 prints it and exits 0; 0.17 and later exit 1.
  notInRepository: /no matching ID found for prefix/m,
  fileListingHeader: {
    jobId: resticSnapshotId,
    name: 'snapshot line',
    expected: 'restic ls --json for one snapshot',
  },
};
