/**
 * `catalog-rebuild files` (a job's file records) and `catalog-rebuild find` (which jobs hold a path),
 * both on the active version of a catalog (`active_files`), as text lines or one JSON array.
 */
import type { Pool } from 'pg';
import type { CommandContext } from './context';
import { ExitCode, withCatalogPool } from './context';
import type { FileHit, FileReads } from './file-reads';
import { catalogFileReads } from './file-reads';

/** Options of `files`. */
export interface FilesOptions {
  catalog: string;
  /** Job id, as `active_jobs.job_id` shows it. */
  job: string;
  /** At most this many records; default all of the job's. */
  limit?: number;
  /** Print one JSON array instead of text. */
  json: boolean;
}

/** Options of `find`. */
export interface FindOptions {
  catalog: string;
  /** Exact path+name, or a prefix ending in `*` (checked by {@link findPatternProblem}). */
  path: string;
  /** At most this many hits. */
  limit: number;
  /** Print one JSON array instead of text. */
  json: boolean;
}

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

/** One hit as a text line: `job_id  start  path+name  size  mtime` (`-` for an unknown value). */
export function formatFileHit(h: FileHit): string {
  return [h.jobId, h.startTime ?? '-', `${h.path ?? ''}${h.name ?? ''}`, h.size ?? '-', h.mtime ?? '-'].join('  ');
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

/**
 * Lists the file records of job `o.job` in the catalog's active version, one line per record (or
 * one JSON array); on `note`, a line when the job has no file records or more than `--limit`.
 * @returns 0, also when the job has no file records (or is not in the catalog).
 * @throws ExitCode 1 when the catalog has no active version or its active version has no file
 *   records; the configuration or database error as it is.
 */
export async function filesCommand(
  ctx: CommandContext,
  o: FilesOptions,
  note: (line: string) => void = ctx.out,
  reads: FileReads = catalogFileReads,
): Promise<number> {
  return withCatalogPool(ctx, async (pool) => {
    const versionId = await activeVersionWithFiles(pool, reads, o.catalog);
    const hits = await reads.listJobFiles(pool, o.catalog, o.job, o.limit === undefined ? undefined : o.limit + 1);
    const shown = printHits(ctx, hits, o.limit, o.json);
    if (!hits.length)
      note(`job ${o.job} has no file records in the active version ${versionId} of catalog ${o.catalog}`);
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
  const problem = findPatternProblem(o.path);
  if (problem) throw new ExitCode(2, problem);
  return withCatalogPool(ctx, async (pool) => {
    const versionId = await activeVersionWithFiles(pool, reads, o.catalog);
    const hits = await reads.findFiles(pool, o.catalog, o.path, o.limit + 1);
    const shown = printHits(ctx, hits, o.limit, o.json);
    if (!hits.length)
      note(`no file record matches ${o.path} in the active version ${versionId} of catalog ${o.catalog}`);
    else if (shown.length < hits.length)
      note(`first ${shown.length} hits shown (newest jobs); more with a higher --limit`);
    return 0;
  });
}
