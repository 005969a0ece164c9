/**
 * borg (`borg-json`): the job listing is `borg list --json` (`{ "archives": [...] }`), a job's file
 * listing `borg list --json-lines <repo>::<archive>` (one item per line; shapes in file-listing.ts).
 */
import { parse, stringify } from 'lossless-json';
import { z } from 'zod';
import { SourceDataInvalidError } from '../../errors';
import { S_IFMT } from '../file-listing';
import type { StagedRecord } from '../listing-records';
import {
  compact,
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

/** A borg listing: an object with an `archives` array (`borg list --json`), parsed whole. */
function parseArchives(text: string, ctx: JobListingContext): ParsedJobListing {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw ctx.invalid(err);
  }
  if (
    !doc ||
    typeof doc !== 'object' ||
    Array.isArray(doc) ||
    !('archives' in doc) ||
    !Array.isArray((doc as { archives: unknown }).archives)
  ) {
    throw new SourceDataInvalidError(
      `source ${ctx.source}: a borg listing must be an object with an "archives" array (borg list --json)`,
    );
  }
  const records = (doc as { archives: unknown[] }).archives.map((a) =>
    mapRecord((x) => borgRecord(x, ctx.client, ctx.undecodable), a),
  );
  return { records, groups: 0 };
}

/** borg's mode string's first character → POSIX file type bits. */
const BORG_TYPES: Record<string, number> = {
  '-': S_IFMT.file,
  d: S_IFMT.dir,
  l: S_IFMT.symlink,
  b: S_IFMT.block,
  c: S_IFMT.char,
  p: S_IFMT.fifo,
  s: S_IFMT.socket,
};

/**
 * A borg mode string (`-rw-r--r--`, `drwxrwxrwt`, `-rwsr-xr-x`, as `ls -l` and Python's
 * `stat.filemode` write it) as a POSIX st_mode.
 * @returns the mode, or a reason when the string is not such a mode.
 */
export function borgMode(s: unknown): number | { error: string } {
  if (typeof s !== 'string' || !/^[-dlbcps][-r][-w][-xsS][-r][-w][-xsS][-r][-w][-xtT]$/.test(s))
    return { error: `mode: not a mode string (${JSON.stringify(s)})` };
  let m = BORG_TYPES[s[0]];
  const bit = (i: number, v: number) => (s[i] !== '-' && s[i] !== 'S' && s[i] !== 'T' ? v : 0);
  m |= bit(1, 0o400) | bit(2, 0o200) | bit(3, 0o100) | bit(4, 0o040) | bit(5, 0o020) | bit(6, 0o010);
  m |= bit(7, 0o004) | bit(8, 0o002) | bit(9, 0o001);
  if (s[3] === 's' || s[3] === 'S') m |= 0o4000;
  if (s[6] === 's' || s[6] === 'S') m |= 0o2000;
  if (s[9] === 't' || s[9] === 'T') m |= 0o1000;
  return m;
}

/** borg: `borg list --json` and `borg list --json-lines <repo>::<archive>`. */
export const borgFormat: ListingFormat<'borg-json'> = {
  kind: 'borg-json',
  noun: 'archive',
  emptyListingHint: 'borg prints {"archives": []} for an empty repository',
  parseJobListing: parseArchives,
  fileEntry: (rec) => ({
    path: rec.path,
    // borg 2: the exact bytes of a path that is not UTF-8
    pathBytes: typeof rec.path_b64 === 'string' ? Buffer.from(rec.path_b64, 'base64') : null,
    isDir: rec.type === 'd' || String(rec.mode ?? '').startsWith('d'),
    mode: borgMode(rec.mode),
    size: rec.size,
    uid: rec.uid,
    gid: rec.gid,
    mtime: rec.mtime,
  }),
  commandValues: (job) => {
    const extra = job.extra ? (JSON.parse(job.extra) as { short_id?: unknown }) : {};
    return {
      id: job.id,
      shortId: typeof extra.short_id === 'string' ? extra.short_id : job.id.slice(0, 8),
      archive: job.job ?? job.id,
    };
  },
  describeJob: (job) => `archive ${job.archive} (id ${job.id})`,
  // A missing repository (`Repository … does not exist`) is not one.
  notInRepository: /^Archive .* does not exist/m,
};
