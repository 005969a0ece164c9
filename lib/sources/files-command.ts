/**
 * A listing source's `filesCommand`: run once per snapshot (restic) or archive (borg) of a page,
 * inside the page activity, its standard output read line by line and mapped to the page stage's
 * COPY text (file-listing.ts). A snapshot's file list never changes, so it is read from the
 * repository when the page runs instead of being staged at plan time. Memory holds one line and
 * one batch of COPY text at a time, whatever the size of the listing.
 */
import { Readable } from 'node:stream';
import * as path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { Worker } from 'node:worker_threads';
import { SourceDataInvalidError } from '../errors';
import { spawnInGroup } from './process-group';
import type { ListedJob } from './file-listing';
import { LISTING_POSITIONS_PER_JOB, listingRecord, listingRecordCopyLine } from './file-listing';
import type { CommandValues } from './listing-formats';
import { listingFormat } from './listing-formats';

/**
 * A job whose files a command lists: its stage identity and the values of the placeholders (as its
 * format reads them from the staged job: `{id}` the snapshot or archive id, `{short_id}` restic's
 * short id, `{archive}` the borg archive name).
 */
export interface CommandJob extends ListedJob, CommandValues {}

/** How the commands of a page are run. */
export interface FilesCommandSettings {
  /** Source name, for messages. */
  source: string;
  /** The source's listing kind (`restic-json`, `borg-json`): its format reads the listings. */
  kind: string;
  /** argv with placeholders (no shell). */
  argv: string[];
  /** `{repo}`: the configured repository, if any. */
  repository?: string;
  /** Time limit of one command (ms). */
  timeoutMs: number;
  /** Ends the command in flight (its whole process group) and the stream. */
  signal?: AbortSignal;
}

/**
 * A job whose snapshot or archive is no longer in the repository when its command ran (forgotten or
 * pruned after the plan): the stream lists none of its records and goes on with the next job.
 * Its `reason`: `the snapshot is no longer in the repository: <the command's last lines of standard error>`.
 */
export type { GoneJob } from '../rows';
import type { GoneJob } from '../rows';

/** Told of each job the stream found gone, before the stream goes on with the next job. */
export type OnGoneJob = (job: GoneJob) => void;

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

/** Characters of a command's standard error kept for its message: the last ones. */
const STDERR_KEPT = 64_000;

/**
 * The file records of `jobs`, one command after another, as COPY text of the page stage's listing
 * columns (file-listing.ts LISTING_STAGE_COLUMNS). A job whose snapshot or archive is no longer in
 * the repository (its standard error matches its format's `notInRepository`: restic's `no matching
 * ID found for prefix`, borg's `Archive … does not exist`) lists nothing: `onGone` is told (before
 * any later job's records) and the stream goes on with the next job; without `onGone` the stream
 * fails instead, as below.
 * @throws (from the stream) SourceDataInvalidError (non-retryable) naming the snapshot when it is
 *   no longer in the repository and there is no `onGone`, when a listing is not the job's (another
 *   snapshot, no snapshot line), or when a job's listing holds more records than a job may
 *   ({@link LISTING_POSITIONS_PER_JOB}); Error (retryable) when a command cannot start, fails
 *   otherwise or times out (its arguments are not echoed: they may hold secrets).
 */
export function filesCommandStream(s: FilesCommandSettings, jobs: CommandJob[], onGone?: OnGoneJob): Readable {
  return Readable.from(inThread(s, jobs, onGone), { objectMode: false });
}

/**
 * The COPY text of `jobs` as {@link listedCopyText} makes it, run in a worker thread
 * (files-command-thread.ts) with a small heap of its own: the garbage of parsing a listing, a few
 * hundred bytes per record, is collected there and never grows the worker's heap; this thread only
 * passes the batches on, one at a time (the thread waits for each to be taken). Cancellation
 * (`s.signal`) ends the thread, and with it the command's process group (its watchdog sees its
 * standard input close).
 */
async function* inThread(s: FilesCommandSettings, jobs: CommandJob[], onGone?: OnGoneJob): AsyncGenerator<Buffer> {
  const { signal, ...settings } = s;
  const worker = new Worker(path.join(__dirname, 'files-command-thread.js'), {
    workerData: { settings, jobs },
    resourceLimits: { maxOldGenerationSizeMb: 48, maxYoungGenerationSizeMb: 4 },
  });
  const inbox: ThreadMessage[] = [];
  let wake: (() => void) | null = null;
  const deliver = (m: ThreadMessage) => {
    inbox.push(m);
    wake?.();
  };
  worker.on('message', deliver);
  worker.once('error', (e) =>
    deliver({ type: 'error', message: `${s.source}: files command thread failed: ${e.message}` }),
  );
  worker.once('exit', (code) =>
    deliver({ type: 'error', message: `${s.source}: files command thread exited (${code})` }),
  );
  const onAbort = () => deliver({ type: 'error', message: `source ${s.source}: files command was cancelled` });
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      while (!inbox.length) await new Promise<void>((r) => (wake = r));
      wake = null;
      const m = inbox.shift()!;
      if (m.type === 'end') return;
      if (m.type === 'error')
        throw m.code === 'SOURCE_DATA_INVALID' ? new SourceDataInvalidError(m.message) : new Error(m.message);
      if (m.type === 'gone') {
        if (!onGone) throw new SourceDataInvalidError(m.message);
        onGone(m.job);
        continue;
      }
      yield Buffer.from(m.buffer, m.offset, m.length);
      worker.postMessage('next');
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    worker.removeAllListeners('message');
    await worker.terminate();
  }
}

/**
 * What the files command thread sends: a batch of COPY text, a job found gone (with the failure
 * message for a stream that takes none), the end, or why it stopped.
 */
export type ThreadMessage =
  | { type: 'data'; buffer: ArrayBuffer; offset: number; length: number }
  | { type: 'gone'; job: GoneJob; message: string }
  | { type: 'end' }
  | { type: 'error'; message: string; code?: string };

/** The settings a files command thread runs with: a cancellation ends the thread itself. */
export type ThreadSettings = Omit<FilesCommandSettings, 'signal'>;

/** A job found gone, with the message of a stream that cannot go on without it. */
export type GoneNotice = (job: GoneJob, message: string) => void;

/**
 * The COPY text of `jobs`, one command after another (run by files-command-thread.ts); a job gone
 * from the repository lists nothing and is told to `gone` before the next job runs.
 */
export async function* listedCopyText(s: ThreadSettings, jobs: CommandJob[], gone: GoneNotice): AsyncGenerator<Buffer> {
  for (const job of jobs) yield* oneJob(s, job, gone);
}

/**
 * The lines of a stream (`\n` or `\r\n`), read one chunk at a time as they are asked for, so the
 * command is held back by the pipe while the page writes (readline reads ahead without limit when
 * its consumer is slower than the command, and the worker's memory grew with the listing).
 */
async function* linesOf(stream: Readable): AsyncGenerator<string> {
  const decoder = new StringDecoder('utf8');
  let rest = '';
  for await (const chunk of stream) {
    const text = rest + decoder.write(chunk as Buffer);
    let start = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', start)) {
      yield text.charCodeAt(nl - 1) === 13 && nl > start ? text.slice(start, nl - 1) : text.slice(start, nl);
      start = nl + 1;
    }
    rest = text.slice(start);
  }
  rest += decoder.end();
  if (rest) yield rest.endsWith('\r') ? rest.slice(0, -1) : rest;
}

async function* oneJob(s: ThreadSettings, job: CommandJob, gone: GoneNotice): AsyncGenerator<Buffer> {
  const format = listingFormat(s.kind);
  const header = format.fileListingHeader;
  const argv = commandArgv(s, job);
  const what = `source ${s.source}: files command ${argv[0]} for ${format.describeJob(job)}`;
  const { child, killGroup } = spawnInGroup(argv, { endWithParent: true });
  let stderr = '';
  let failure: string | null = null;
  const timer = setTimeout(() => {
    failure = `timed out after ${s.timeoutMs} ms`;
    killGroup();
  }, s.timeoutMs);
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
    let snapshotSeen = !header;
    // Each line's COPY text is written into a buffer at once, so its strings die young (a string
    // batch kept them alive across collections, and the worker's heap grew with the listing).
    let batch = Buffer.allocUnsafe(BATCH_BYTES);
    let used = 0;
    for await (const line of linesOf(child.stdout)) {
      if (!line.trim()) continue;
      if (header && !snapshotSeen) {
        const id = header.jobId(line);
        if (id !== null) {
          if (id !== job.id && !id.startsWith(job.id))
            throw new SourceDataInvalidError(`${what} listed ${format.noun} ${id} instead`);
          snapshotSeen = true;
          continue;
        }
      }
      position++;
      if (BigInt(position) >= LISTING_POSITIONS_PER_JOB)
        throw new SourceDataInvalidError(`${what} lists more than ${LISTING_POSITIONS_PER_JOB - 1n} records`);
      const text = listingRecordCopyLine(listingRecord(format, job, position, line));
      const bytes = Buffer.byteLength(text);
      if (used && used + bytes > batch.length) {
        yield batch.subarray(0, used);
        batch = Buffer.allocUnsafe(Math.max(BATCH_BYTES, bytes));
        used = 0;
      } else if (bytes > batch.length) batch = Buffer.allocUnsafe(bytes);
      used += batch.write(text, used);
    }
    const { code, signal } = await closed;
    const tail = stderr.trim().split('\n').slice(-3).join(' | ').slice(-500);
    if (failure) throw new Error(`${what} ${failure}${tail ? `: ${tail}` : ''}`);
    if ((code !== 0 || !snapshotSeen) && format.notInRepository.test(stderr)) {
      // Nothing of its listing is passed on: the records of this job not yet yielded are dropped here,
      // and the page drops any it staged already.
      const thing = format.noun;
      const reason = `the ${thing} is no longer in the repository${tail ? `: ${tail}` : ''}`;
      gone(
        { jobKey: job.jobKey, jobId: job.jobId, bucket: job.bucket, reason },
        `${what}: the ${thing} is no longer in the repository (pruned or deleted after the plan?)${tail ? `: ${tail}` : ''}; start a new rebuild to plan without it`,
      );
      return;
    }
    if (code === 0 && header && !snapshotSeen) {
      throw new SourceDataInvalidError(
        `${what} printed no ${header.name} (${position} records): is it ${header.expected}?${tail ? ` ${tail}` : ''}`,
      );
    }
    if (code !== 0)
      throw new Error(
        `${what} ${code === null ? `was killed by ${signal}` : `exited with status ${code}`}${tail ? `: ${tail}` : ''}`,
      );
    if (used) yield batch.subarray(0, used);
  } finally {
    clearTimeout(timer);
    killGroup(); // nothing of the command outlives its listing
  }
}
