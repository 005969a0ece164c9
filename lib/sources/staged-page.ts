/**
 * A page's read of a staged listing (restic, borg), the same {@link PageRead} a director catalog
 * gives: its rows stream out of the catalog database (`COPY (SELECT …) TO STDOUT` over the staged
 * records) into the page transaction's COPY, so no good row becomes a JavaScript object. Only the
 * records a cheap SQL test cannot pass (the counterpart of lib/validate.ts `plainlyValid`) are read
 * into the worker and checked by lib/validate.ts, with its exact reasons. With file records, the
 * jobs' `filesCommand` runs when the read opens, before the page transaction, its COPY text spooled
 * to a temporary file that the page's file write then streams: the transaction never waits on a command.
 */
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Pool } from 'pg';
import format from 'pg-format';
import { to as copyTo } from 'pg-copy-streams';
import { discardStagedJobFiles } from '../catalog/files';
import { recordListingFileStats } from '../catalog/listing-files';
import { KNOWN_CODES, MAX_KEY_BYTES, validateRows } from '../validate';
import { LISTING_STAGE_COLUMNS } from './file-listing';
import type { CommandJob, FilesCommandSettings } from './files-command';
import { filesCommandStream } from './files-command';
import { STAGED_ROW_HASH, stagedSelect } from './staged-select';
import type { FileRead, GoneJob, PageKeys, PageRead, PageRejectRecord, ReadRow } from './types';
import { JOB_COLUMNS } from './types';
import { pageCopySelectList } from '../rows';

/** What a staged page read needs to know of its listing. */
export interface StagedPageSettings {
  /** The version whose staged listing is read (decimal text). */
  versionId: string;
  /** IANA zone of the listing's naive times. */
  zone: string;
  /** statement_timeout of the read's statements (ms). */
  statementTimeoutMs: number;
  /** With file records: how the page's jobs are listed. */
  files?: StagedPageFiles;
}

/** How a staged page lists its jobs' files. */
export interface StagedPageFiles {
  /** The source's `filesCommand` settings (with the attempt's cancellation). */
  settings: FilesCommandSettings;
  /** The jobs of the page's rows as the commands list them. */
  jobs(rows: ReadRow[]): CommandJob[];
  /** The source's `legacyEncoding`. */
  legacyEncoding: string;
  /** IANA zone of naive listed mtimes. */
  timezone: string;
}

/** Name prefix of a spooled listing in the temporary directory: `<prefix><pid>-<uuid>.copy`. */
const SPOOL_PREFIX = 'catalog-rebuild-files-';

/**
 * Removes the spooled listings that workers killed before their page attempt ended left in the
 * temporary directory (those of processes no longer running); called when a worker starts.
 * @returns the files removed.
 */
export async function removeStaleSpools(dir: string = os.tmpdir()): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await fs.promises.readdir(dir).catch(() => [] as string[])) {
    const m = new RegExp(`^${SPOOL_PREFIX}(\\d+)-[0-9a-f-]+\\.copy$`).exec(name);
    if (!m || processRuns(Number(m[1]))) continue;
    await fs.promises.rm(path.join(dir, name), { force: true });
    removed.push(name);
  }
  return removed;
}

/** True when a process with this pid runs (signal 0; EPERM: it runs under another user). */
function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A time column passes when NULL or an instant as lib/validate.ts wants it. */
const INSTANT_SQL = `'^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{6}Z$'`;

/**
 * True for a staged row (alias `x`, {@link stagedSelect}) that lib/validate.ts `jobRowSchema` might
 * refuse, or that staging quarantined: read into the worker and validated there. Every row the
 * schema refuses is suspect (a job id or client refused is longer than 1,024 bytes; the columns a
 * staged row leaves NULL cannot be refused); a suspect row the schema accepts is streamed as usual.
 */
const SUSPECT = `(x.reject_reason IS NOT NULL OR x.job_id IS NULL OR x.job_id = ''
  OR octet_length(x.job_id) > ${MAX_KEY_BYTES} OR coalesce(octet_length(x.client) > ${MAX_KEY_BYTES}, false)
  OR NOT coalesce(x.start_time ~ ${INSTANT_SQL}, true) OR NOT coalesce(x.end_time ~ ${INSTANT_SQL}, true)
  OR NOT coalesce(x.files ~ '^\\d{1,18}$', true) OR NOT coalesce(x.bytes ~ '^\\d{1,20}$', true)
  OR NOT coalesce(x.bucket ~ '^\\d{4}-\\d{2}-\\d{2}$', true) OR length(x.job_key) >= 19)`;

/** True for a row (alias `x`) with a type, level or status code not in lib/validate.ts KNOWN_CODES. */
const UNKNOWN_CODE = (['type', 'level', 'status'] as const)
  .map((c) => format(`(x.%I IS NOT NULL AND x.%I <> ALL (%L::text[]))`, c, c, `{${[...KNOWN_CODES[c]].join(',')}}`))
  .join(' OR ');

/**
 * Opens a staged page read: checks the page's records, and with files lists its jobs (spooled).
 * Holds no catalog connection between its statements; `copyOut` takes one while it streams.
 * @throws the catalog's errors; what the command stream throws (SourceDataInvalidError for a
 *   listing that is not the job's, Error for a failed command).
 */
export async function openStagedPageRead(pool: Pool, range: PageKeys, s: StagedPageSettings): Promise<PageRead> {
  for (const k of [range.firstKey, range.lastKey, s.versionId, ...(range.keys ?? [])])
    if (!/^\d{1,19}$/.test(k)) throw new Error(`not a paging key: ${k}`);
  const select = stagedSelect(format('%L', s.zone), s.versionId);
  // A refresh's page reads only its own jobs (`keys`) within its bounds.
  const inRange =
    `x.seq BETWEEN ${range.firstKey} AND ${range.lastKey}` +
    (range.keys ? ` AND x.seq = ANY ('{${range.keys.join(',')}}'::bigint[])` : '');
  const timeout = async (sql: string) => {
    const c = await pool.connect();
    try {
      await c.query('BEGIN READ ONLY');
      await c.query(format('SET LOCAL statement_timeout = %L', String(s.statementTimeoutMs)));
      const r = await c.query(sql);
      await c.query('COMMIT');
      c.release();
      return r;
    } catch (err) {
      c.release(err as Error);
      throw err;
    }
  };
  // Suspects, validated in the worker: exactly the rejects lib/validate.ts would find.
  const suspects = await timeout(`SELECT * FROM (${select}) x WHERE ${inRange} AND ${SUSPECT} ORDER BY x.seq`);
  const rejects = validateRows(suspects.rows.map(withoutSeq)).rejects;
  const rejectKeys = `{${rejects.map((r) => r.jobKey).join(',')}}`;
  const accepted = `(${select}) x WHERE ${inRange} AND x.seq <> ALL ('${rejectKeys}'::bigint[])`;
  // Repeated ids keep the last row read (the highest record number), as lib/validate.ts does.
  const counts = await timeout(
    `SELECT count(*) FILTER (WHERE ${UNKNOWN_CODE})::int AS warnings,
            (count(*) - count(DISTINCT x.job_id))::int AS duplicates,
            coalesce(array_agg(x.seq) FILTER (WHERE x.seq < x.last_seq), '{}')::text AS superseded
     FROM (SELECT x.*, max(x.seq) OVER (PARTITION BY x.job_id) AS last_seq FROM ${accepted}) x`,
  );
  const c = counts.rows[0] as { warnings: number; duplicates: number; superseded: string };
  const gone: GoneJob[] = [];
  let files: FileRead | null = null;
  let spool: string | null = null;
  if (s.files) {
    const winners = await timeout(
      `SELECT * FROM ${accepted} AND x.seq <> ALL ('${c.superseded}'::bigint[]) ORDER BY x.seq`,
    );
    const jobs = s.files.jobs(winners.rows.map(withoutSeq));
    spool = path.join(os.tmpdir(), `${SPOOL_PREFIX}${process.pid}-${randomUUID()}.copy`);
    try {
      await pipeline(
        filesCommandStream(s.files.settings, jobs, (g) => gone.push(g)),
        fs.createWriteStream(spool),
      );
    } catch (err) {
      await fs.promises.rm(spool, { force: true });
      throw err;
    }
    files = listingFileRead(spool, s.files, jobs, gone);
  }
  const skip = (extra: string[]) =>
    `{${[...rejects.map((r) => r.jobKey), ...gone.map((g) => g.jobKey), ...extra].join(',')}}`;
  const superseded = c.superseded.replace(/^\{|\}$/g, '');
  return new StagedPageRead(
    pool,
    s,
    { select, inRange, skipped: skip(superseded ? [superseded] : []), kept: skip([]) },
    {
      rejects,
      warnings: c.warnings,
      duplicates: c.duplicates,
      gone,
      files,
      spool,
    },
  );
}

/** The file stream of a staged page: the spooled listing, and what the page records of it. */
function listingFileRead(spool: string, f: StagedPageFiles, jobs: CommandJob[], gone: GoneJob[]): FileRead {
  const goneKeys = new Set(gone.map((g) => g.jobKey));
  return {
    copyFilesOut: () => Promise.resolve(fs.createReadStream(spool)),
    legacyEncoding: f.legacyEncoding,
    stageColumns: LISTING_STAGE_COLUMNS,
    timezone: f.timezone,
    async beforeInsert(c, versionId) {
      await discardStagedJobFiles(c, [...goneKeys]);
      await recordListingFileStats(
        c,
        versionId,
        jobs.filter((j) => !goneKeys.has(j.jobKey)),
        f.timezone,
      );
    },
    close: () => Promise.resolve(),
  };
}

/** A staged row without its record number. */
function withoutSeq(r: ReadRow & { seq?: string }): ReadRow {
  delete r.seq;
  return r;
}

/** Where the page's rows are in SQL: the staged select, the range, and the record numbers left out. */
interface StagedQuery {
  select: string;
  inRange: string;
  /** Left out of the stream: quarantined, gone and superseded records (bigint array literal). */
  skipped: string;
  /** Left out of a read as rows: quarantined and gone records (the rows' own validation drops repeats). */
  kept: string;
}

/** What the check found. */
interface StagedCheck {
  rejects: PageRejectRecord[];
  warnings: number;
  duplicates: number;
  gone: GoneJob[];
  files: FileRead | null;
  spool: string | null;
}

class StagedPageRead implements PageRead {
  private streamed = false;
  private filesOpened = false;
  /** The stream of `copyOut`, ended by `close` if its reader gave it up. */
  private out: PassThrough | null = null;

  constructor(
    private readonly pool: Pool,
    private readonly settings: StagedPageSettings,
    private readonly q: StagedQuery,
    private readonly check: StagedCheck,
  ) {}

  get rejects(): PageRejectRecord[] {
    return this.check.rejects;
  }
  /** A listing's text was decoded when it was staged. */
  readonly decoded: Record<string, number> = {};
  get warnings(): number {
    return this.check.warnings;
  }
  get duplicates(): number {
    return this.check.duplicates;
  }
  get gone(): GoneJob[] {
    return this.check.gone;
  }

  copyOut(versionId: string, pageNo: number): Readable {
    if (this.streamed) throw new Error('a page read streams its rows once');
    // The row hash is what a listing refresh compares the next listing's records against.
    const fields = pageCopySelectList({ versionId, pageNo }, STAGED_ROW_HASH, (c) => `x.${c}`);
    this.streamed = true;
    const sql = `COPY (SELECT ${fields} FROM (${this.q.select}) x
      WHERE ${this.q.inRange} AND x.seq <> ALL ('${this.q.skipped}'::bigint[]) ORDER BY x.seq) TO STDOUT`;
    const out = new PassThrough();
    this.out = out;
    void this.pool.connect().then(
      async (c) => {
        let failed: Error | undefined;
        try {
          await c.query('BEGIN READ ONLY');
          await c.query(format('SET LOCAL statement_timeout = %L', String(this.settings.statementTimeoutMs)));
          await pipeline(c.query(copyTo(sql)), out);
          await c.query('COMMIT');
        } catch (err) {
          failed = err as Error;
          out.destroy(failed);
        } finally {
          // A COPY cut short leaves the connection mid-protocol: discard it rather than reuse it.
          c.release(failed);
        }
      },
      (err: Error) => out.destroy(err),
    );
    return out;
  }

  async readRows(): Promise<ReadRow[]> {
    const { rows } = await this.pool.query<ReadRow & { seq?: string }>(
      `SELECT * FROM (${this.q.select}) x
       WHERE ${this.q.inRange} AND x.seq <> ALL ('${this.q.kept}'::bigint[]) ORDER BY x.seq`,
    );
    return rows.map(withoutSeq);
  }

  async openFiles(): Promise<FileRead> {
    if (!this.check.files) throw new Error('a page read opened without files has no file records');
    if (this.filesOpened) throw new Error('a page read streams its file records once');
    this.filesOpened = true;
    return this.check.files;
  }

  async close(): Promise<void> {
    // A stream nobody reads to its end holds its catalog connection: ending it returns the connection.
    if (this.out && !this.out.readableEnded) this.out.destroy(new Error('page read closed'));
    if (this.check.spool) await fs.promises.rm(this.check.spool, { force: true });
  }
}
