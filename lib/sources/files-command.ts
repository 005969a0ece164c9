/**
 * A listing source's `filesCommand`: run once per snapshot (restic) or archive (borg) of a page,
 * inside the page activity, its standard output read line by line and mapped to the page stage's
 * COPY text (file-listing.ts). A snapshot's file list never changes, so it is read from the
 * repository when the page runs instead of being staged at plan time. Memory holds one line and
 * one batch of COPY text at a time, whatever the size of the listing.
 */
import { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import { SourceDataInvalidError } from '../errors';
import { spawnInGroup } from './process-group';
import type { FileListingKind, ListedJob } from './file-listing';
import { LISTING_POSITIONS_PER_JOB, listingRecord, listingRecordCopyLine, resticSnapshotId } from './file-listing';

/** A job whose files a command lists: its stage identity and the values of the placeholders. */
export interface CommandJob extends ListedJob {
  /** `{id}`: the snapshot id (restic) or archive id (borg). */
  id: string;
  /** `{short_id}`: restic's short id (the first 8 digits of the id when the listing had none). */
  shortId: string;
  /** `{archive}`: the archive name (borg); the id for restic. */
  archive: string;
}

/** How the commands of a page are run. */
export interface FilesCommandSettings {
  /** Source name, for messages. */
  source: string;
  kind: FileListingKind;
  /** argv with placeholders (no shell). */
  argv: string[];
  /** `{repo}`: the configured repository, if any. */
  repository?: string;
  /** Time limit of one command (ms). */
  timeoutMs: number;
  /** Ends the command in flight (its whole process group) and the stream. */
  signal?: AbortSignal;
}

/** Lines of COPY text gathered before they are pushed (bytes). */
const BATCH_BYTES = 1 << 16;

/**
 * The argv of one job: each placeholder replaced by the job's value, in one pass (a value that
 * holds a placeholder's text, an archive named `{repo}`, stays as it is).
 */
export function commandArgv(s: FilesCommandSettings, job: CommandJob): string[] {
  const values: Record<string, string> = {
    '{id}': job.id,
    '{short_id}': job.shortId,
    '{archive}': job.archive,
    '{repo}': s.repository ?? '',
  };
  return s.argv.map((a) => a.replace(/\{(id|short_id|archive|repo)\}/g, (p) => values[p]));
}

/**
 * What restic and borg print for a snapshot or archive that is not in the repository: restic's
 * `no matching ID found for prefix "…"` (restic 0.14 prints it and exits 0; 0.17 and later exit 1),
 * borg's `Archive … does not exist`. A missing repository (`Repository … does not exist`) is not one.
 */
const NOT_IN_REPOSITORY = /no matching ID found for prefix|^Archive .* does not exist/m;

/** Characters of a command's standard error kept for its message: the last ones. */
const STDERR_KEPT = 64_000;

/**
 * The file records of `jobs`, one command after another, as COPY text of the page stage's listing
 * columns (file-listing.ts LISTING_STAGE_COLUMNS).
 * @throws (from the stream) SourceDataInvalidError (non-retryable) naming the snapshot when it is
 *   no longer in the repository (pruned after the plan), or when a job's listing holds more
 *   records than a job may ({@link LISTING_POSITIONS_PER_JOB}); Error (retryable) when a command
 *   cannot start, fails otherwise or times out (its arguments are not echoed: they may hold secrets).
 */
export function filesCommandStream(s: FilesCommandSettings, jobs: CommandJob[]): Readable {
  async function* lines(): AsyncGenerator<string> {
    for (const job of jobs) yield* oneJob(s, job);
  }
  return Readable.from(lines(), { objectMode: false });
}

async function* oneJob(s: FilesCommandSettings, job: CommandJob): AsyncGenerator<string> {
  const argv = commandArgv(s, job);
  const what = `source ${s.source}: files command ${argv[0]} for ${s.kind === 'restic' ? `snapshot ${job.id}` : `archive ${job.archive} (id ${job.id})`}`;
  const { child, killGroup } = spawnInGroup(argv, { endWithParent: true });
  let stderr = '';
  let failure: string | null = null;
  const timer = setTimeout(() => {
    failure = `timed out after ${s.timeoutMs} ms`;
    killGroup();
  }, s.timeoutMs);
  const onAbort = () => {
    failure ??= 'was cancelled';
    killGroup();
  };
  s.signal?.addEventListener('abort', onAbort, { once: true });
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString('utf8');
    if (stderr.length > 2 * STDERR_KEPT) stderr = stderr.slice(-STDERR_KEPT);
  });
  const started = new Promise<void>((resolve, reject) => {
    child.once('spawn', () => resolve());
    child.once('error', (e) => reject(new Error(`${what} cannot be run: ${e.message}`)));
  });
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  try {
    await started;
    let position = 0;
    let snapshotSeen = s.kind !== 'restic';
    let batch = '';
    for await (const line of createInterface({ input: child.stdout, crlfDelay: Infinity })) {
      if (!line.trim()) continue;
      if (!snapshotSeen) {
        const id = resticSnapshotId(line);
        if (id !== null) {
          if (id !== job.id && !id.startsWith(job.id))
            throw new SourceDataInvalidError(`${what} listed snapshot ${id} instead`);
          snapshotSeen = true;
          continue;
        }
      }
      position++;
      if (BigInt(position) >= LISTING_POSITIONS_PER_JOB)
        throw new SourceDataInvalidError(`${what} lists more than ${LISTING_POSITIONS_PER_JOB - 1n} records`);
      batch += listingRecordCopyLine(listingRecord(s.kind, job, position, line));
      if (batch.length >= BATCH_BYTES) {
        yield batch;
        batch = '';
      }
    }
    const { code, signal } = await closed;
    const tail = stderr.trim().split('\n').slice(-3).join(' | ').slice(-500);
    if (failure) throw new Error(`${what} ${failure}${tail ? `: ${tail}` : ''}`);
    if ((code !== 0 || !snapshotSeen) && NOT_IN_REPOSITORY.test(stderr)) {
      throw new SourceDataInvalidError(
        `${what}: the ${s.kind === 'restic' ? 'snapshot' : 'archive'} is no longer in the repository (pruned or deleted after the plan?)${tail ? `: ${tail}` : ''}; start a new rebuild to plan without it`,
      );
    }
    if (code === 0 && !snapshotSeen) {
      throw new SourceDataInvalidError(
        `${what} printed no snapshot line (${position} records): is it restic ls --json for one snapshot?${tail ? ` ${tail}` : ''}`,
      );
    }
    if (code !== 0)
      throw new Error(
        `${what} ${code === null ? `was killed by ${signal}` : `exited with status ${code}`}${tail ? `: ${tail}` : ''}`,
      );
    if (batch) yield batch;
  } finally {
    clearTimeout(timer);
    s.signal?.removeEventListener('abort', onAbort);
    killGroup(); // nothing of the command outlives its listing
  }
}
