/**
 * `catalog-rebuild files` (a job's file records) and `catalog-rebuild find` (which jobs hold a path),
 * both on the active version of a catalog (`active_files`), as text lines or one JSON array.
 */
import { isUtf8 } from 'node:buffer';
import type { Pool } from 'pg';
import type { CommandContext } from './context';
import { ExitCode, withCatalogPool } from './context';
import type { FileHit, FileReads } from './file-reads';
import { catalogFileReads } from './file-reads';
import { JOB_ID_MIN_PREFIX } from '../../lib/catalog/file-reads';

/** Options of `files`. */
export interface FilesOptions {
  catalog: string;
  /** Job id, as `active_jobs.job_id` shows it. */
  job: string;
  /** At most this many records; default all of the job's. */
  limit?: number;
  /** Print one JSON array instead of text. */
  json: boolean;
  /** Include the records the job did not save (FileIndex ≤ 0), marked `deleted`. */
  deleted?: boolean;
}

/** Options of `find`: `path` or `pathHex`. */
export interface FindOptions {
  catalog: string;
  /** Exact path+name, or a prefix ending in `*` (checked by {@link findPatternProblem}). */
  path?: string;
  /**
   * The path+name as the hex of its exact bytes, a prefix when followed by `*`
   * ({@link parsePathHex}): a name the director wrote in a legacy encoding (`--path-hex`, or raw
   * bytes typed on a Latin-1 terminal, which the CLI turns into this).
   */
  pathHex?: string;
  /** At most this many hits. */
  limit: number;
  /** Print one JSON array instead of text. */
  json: boolean;
  /** Include the records their job did not save (FileIndex ≤ 0), marked `deleted`. */
  deleted?: boolean;
}

/**
 * Said when a `--path` that matched nothing holds U+FFFD: a byte that is not UTF-8 was replaced
 * before the CLI could read it (npx and npm pass arguments on as UTF-8 text).
 */
export const LOST_BYTES_HINT =
  'the path holds U+FFFD: a byte that is not UTF-8 was lost before catalog-rebuild saw it (npx and npm pass ' +
  'arguments on as text); run the installed catalog-rebuild or bin/catalog-rebuild.js itself, or give the bytes with --path-hex';

/** Default of `find --limit`. */
export const FIND_DEFAULT_LIMIT = 100;

/**
 * Why `pattern` is not a `find --path` pattern (an exact path+name, or a non-empty prefix followed
 * by one `*` at the end; a `*` elsewhere is part of the name), or null when it is one.
 */
export function findPatternProblem(pattern: string): string | null {
  if (!pattern) return '--path needs a path, e.g. /etc/hosts or /home/alice/*';
  if (pattern === '*') return '--path needs a prefix before the trailing *, e.g. /home/alice/*';
  if (pattern.includes('\0')) return '--path cannot hold a NUL byte';
  return null;
}

/**
 * The bytes and prefix flag of a `--path-hex` value: hex digits (two per byte, at least one byte),
 * then an optional `*` for a prefix (`2f686f6d652f636166e9`, `2f686f6d652f*`).
 * @throws Error naming the expected form when `hex` is not one.
 */
export function parsePathHex(hex: string): { bytes: Buffer; prefix: boolean } {
  const m = /^((?:[0-9a-fA-F]{2})+)(\*?)$/.exec(hex);
  if (!m)
    throw new Error(
      `--path-hex needs the hex of the path's bytes, two digits per byte, and * at the end for a prefix (e.g. 2f6574632f636166e9 or 2f6574632f*)`,
    );
  const bytes = Buffer.from(m[1], 'hex');
  if (bytes.includes(0)) throw new Error('--path-hex cannot hold a NUL byte');
  return { bytes, prefix: m[2] === '*' };
}

/**
 * `argv` with each `find --path` value whose raw bytes (`raw`, the same arguments as the operating
 * system passed them) are not UTF-8 given as `--path-hex` instead: Node decodes such bytes to
 * U+FFFD, which matches nothing; an operator on a Latin-1 terminal types `caf\xe9`, the director
 * wrote those bytes. A trailing `*` stays a prefix. Other arguments are left as they are.
 */
export function pathArgsFromRawBytes(argv: string[], raw: Buffer[] | undefined): string[] {
  if (!raw || raw.length !== argv.length || argv[0] !== 'find') return argv;
  const hex = (b: Buffer) =>
    b.length > 1 && b[b.length - 1] === 0x2a ? `${b.subarray(0, -1).toString('hex')}*` : b.toString('hex');
  const out = [...argv];
  for (let i = 1; i < argv.length; i++) {
    if (argv[i] === '--path' && i + 1 < argv.length && !isUtf8(raw[i + 1])) {
      out[i] = '--path-hex';
      out[i + 1] = hex(raw[i + 1]);
      i++;
    } else if (argv[i].startsWith('--path=') && !isUtf8(raw[i])) {
      out[i] = `--path-hex=${hex(raw[i].subarray('--path='.length))}`;
    }
  }
  return out;
}

/**
 * One hit as a text line: `job_id  start  path+name  size  mtime` (`-` for an unknown value), and
 * `  deleted` after a record the job did not save.
 */
export function formatFileHit(h: FileHit): string {
  const fields = [h.jobId, h.startTime ?? '-', `${h.path ?? ''}${h.name ?? ''}`, h.size ?? '-', h.mtime ?? '-'];
  if (h.deleted) fields.push('deleted');
  return fields.join('  ');
}

/**
 * The active version's id, after checking that it holds file records.
 * @throws ExitCode 1 when the catalog has no active version, or its active version was rebuilt
 *   without `--files` (naming the command that adds them).
 */
async function activeVersionWithFiles(pool: Pool, reads: FileReads, catalog: string): Promise<string> {
  const v = await reads.activeFileVersion(pool, catalog);
  if (!v) throw new ExitCode(1, `catalog ${catalog} has no active version (no rebuild of it was published)`);
  if (!v.files) {
    throw new ExitCode(
      1,
      `the active version ${v.versionId} of catalog ${catalog} has no file records: it was rebuilt without --files; ` +
        `rebuild it with: catalog-rebuild start --catalog ${catalog} --source <name> --files`,
    );
  }
  return v.versionId;
}

/** Prints `hits` (text lines, or one JSON array) and, on `note`, a line when there are more than shown. */
function printHits(ctx: CommandContext, hits: FileHit[], limit: number | undefined, json: boolean): FileHit[] {
  const shown = limit !== undefined && hits.length > limit ? hits.slice(0, limit) : hits;
  if (json) ctx.out(JSON.stringify(shown));
  else for (const h of shown) ctx.out(formatFileHit(h));
  return shown;
}

/** Matches of a job prefix listed in the ambiguity error (more are counted as "…"). */
const AMBIGUOUS_SHOWN = 10;

/**
 * The one job id of the active version that `job` names: itself, or the one id a listing source's
 * hex prefix (8+ digits, as `restic snapshots` shows them) matches.
 * @throws ExitCode 2 when the prefix matches several jobs (naming them); ExitCode 1 when no job of
 *   the active version matches (naming it).
 */
async function resolveJob(pool: Pool, reads: FileReads, catalog: string, job: string, versionId: string) {
  const ids = await reads.matchJobIds(pool, catalog, job, AMBIGUOUS_SHOWN + 1);
  if (ids.length === 1) return ids[0];
  if (ids.length > 1) {
    const shown = ids.slice(0, AMBIGUOUS_SHOWN).join(', ');
    throw new ExitCode(
      2,
      `--job ${job} is ambiguous: it starts ${ids.length > AMBIGUOUS_SHOWN ? `more than ${AMBIGUOUS_SHOWN}` : ids.length} job ids of the active version ${versionId} of catalog ${catalog}: ${shown}${ids.length > AMBIGUOUS_SHOWN ? ', …' : ''}; give more digits`,
    );
  }
  throw new ExitCode(
    1,
    `job ${job} is not in the active version ${versionId} of catalog ${catalog}` +
      (/^[0-9a-f]+$/.test(job) && !/^\d+$/.test(job) && job.length < JOB_ID_MIN_PREFIX
        ? ` (a snapshot or archive id prefix needs at least ${JOB_ID_MIN_PREFIX} hex digits)`
        : ''),
  );
}

/**
 * Lists the file records of job `o.job` in the catalog's active version that the job saved (with
 * `--deleted`, all of them), one line per record (or one JSON array); on `note`, a line when the
 * job has no such records or more than `--limit`. `o.job` is a job id, or for a listing source
 * (restic, borg: hex ids) a unique prefix of at least 8 hex digits, such as restic's short id.
 * @returns 0, also when the job has no file records.
 * @throws ExitCode 1 when the catalog has no active version, its active version has no file
 *   records, or no job of it matches `o.job` (naming it); ExitCode 2 when a prefix matches several
 *   jobs (naming them); the configuration or database error as it is.
 */
export async function filesCommand(
  ctx: CommandContext,
  o: FilesOptions,
  note: (line: string) => void = ctx.out,
  reads: FileReads = catalogFileReads,
): Promise<number> {
  return withCatalogPool(ctx, async (pool) => {
    const versionId = await activeVersionWithFiles(pool, reads, o.catalog);
    const limit = o.limit === undefined ? undefined : o.limit + 1;
    const job = await resolveJob(pool, reads, o.catalog, o.job, versionId);
    const hits = await reads.listJobFiles(pool, o.catalog, job, limit, o.deleted === true);
    const shown = printHits(ctx, hits, o.limit, o.json);
    if (!hits.length) note(`job ${job} has no file records in the active version ${versionId} of catalog ${o.catalog}`);
    else if (shown.length < hits.length) note(`first ${shown.length} file records shown; more with a higher --limit`);
    return 0;
  });
}

/**
 * Prints the file records of the catalog's active version whose path+name is `o.path` (or starts
 * with it, before a trailing `*`), newest job first, one line per hit (or one JSON array); on
 * `note`, a line when nothing matched or when more than `--limit` did.
 * @returns 0, also when nothing matched.
 * @throws ExitCode 2 for an invalid pattern (before connecting); ExitCode 1 when the catalog has no
 *   active version or its active version has no file records; the configuration or database error.
 */
export async function findCommand(
  ctx: CommandContext,
  o: FindOptions,
  note: (line: string) => void = ctx.out,
  reads: FileReads = catalogFileReads,
): Promise<number> {
  if (o.path === undefined && o.pathHex === undefined) throw new ExitCode(2, 'find needs one of --path or --path-hex');
  if (o.path !== undefined && o.pathHex !== undefined)
    throw new ExitCode(2, 'find takes one of --path or --path-hex, not both');
  let byBytes: { bytes: Buffer; prefix: boolean } | undefined;
  if (o.pathHex !== undefined) {
    try {
      byBytes = parsePathHex(o.pathHex);
    } catch (e) {
      throw new ExitCode(2, (e as Error).message);
    }
  }
  const problem = o.path === undefined ? null : findPatternProblem(o.path);
  if (problem) throw new ExitCode(2, problem);
  const shownPath = o.path ?? `--path-hex ${o.pathHex}`;
  return withCatalogPool(ctx, async (pool) => {
    const versionId = await activeVersionWithFiles(pool, reads, o.catalog);
    const deleted = o.deleted === true;
    const hits = byBytes
      ? await reads.findFilesByBytes(pool, o.catalog, byBytes.bytes, byBytes.prefix, o.limit + 1, deleted)
      : await reads.findFiles(pool, o.catalog, o.path!, o.limit + 1, deleted);
    const shown = printHits(ctx, hits, o.limit, o.json);
    if (!hits.length) {
      note(`no file record matches ${shownPath} in the active version ${versionId} of catalog ${o.catalog}`);
      if (o.path?.includes('\uFFFD')) note(LOST_BYTES_HINT);
    } else if (shown.length < hits.length)
      note(`first ${shown.length} hits shown (newest jobs); more with a higher --limit`);
    return 0;
  });
}
