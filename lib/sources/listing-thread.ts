/**
 * Parses a listing in a worker thread, so a large listing (hundreds of MB of JSON take tens of
 * seconds to parse) never blocks the activity's event loop: heartbeats keep flowing, other
 * activities of the worker keep running.
 */
import * as path from 'node:path';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { SourceDataInvalidError } from '../errors';
import { parseListing, toCopyText } from './listing';
import type { ListingKind } from './listing-formats';

interface Job {
  /** A built-in listing kind: the thread knows no other (see listing-formats/index.ts). */
  kind: ListingKind;
  bytes: Uint8Array;
  opts: { source: string; client?: string | null; legacyEncoding?: string };
  withIds: boolean;
}

/** A parsed listing ready to be staged: counts, and the records as COPY text (see `toCopyText`). */
export interface ListingForStaging {
  /** sha256 (hex) of the listing's bytes. */
  sha256: string;
  /** Records to stage (after dropping repeated ids). */
  records: number;
  /** Valid records dropped because a later one had the same id. */
  duplicates: number;
  /** Records in the listing. */
  listed: number;
  /** restic `--group-by` groups flattened. */
  groups: number;
  /** Values that were not UTF-8, decoded from the source's legacy encoding, by field name. */
  decoded: Record<string, number>;
  /** `COPY staged_record (STAGED_COPY_COLUMNS) FROM STDIN` text, UTF-8. */
  copyText: Uint8Array;
  /** Ids of the staged records (when asked for). */
  ids: string[] | null;
  /**
   * Each staged record's id in listing order, the name of its stable job key: null for a record
   * without one and for a quarantined record (its id may repeat a good record's: only good records
   * are unique by id).
   */
  recordIds: (string | null)[];
  /** Each staged record's file count as listed (restic's `summary.total_files_processed`), null when none. */
  files: (string | null)[];
}

type Reply = { ok: true; listing: ListingForStaging } | { ok: false; message: string; code?: string };

/**
 * {@link parseListing} in a worker thread, returning the records as COPY text (moved, not copied,
 * to this thread), so the main thread holds one compact buffer instead of an object per record.
 * @param withIds also return the staged records' ids.
 * @throws SourceDataInvalidError as parseListing does; Error when the thread dies (out of memory).
 */
export function parseListingInThread(
  kind: Job['kind'],
  bytes: Buffer,
  opts: Job['opts'],
  withIds = false,
): Promise<ListingForStaging> {
  return new Promise((resolve, reject) => {
    const heapMb = listingHeapMb();
    const worker = new Worker(path.join(__dirname, 'listing-thread.js'), {
      workerData: { kind, bytes, opts, withIds } satisfies Job,
      // A listing too large for this heap fails its rebuild; it never takes the worker process down.
      resourceLimits: { maxOldGenerationSizeMb: heapMb },
    });
    let settled = false;
    worker.once('message', (reply: Reply) => {
      settled = true;
      if (reply.ok) resolve(reply.listing);
      else
        reject(
          reply.code === 'SOURCE_DATA_INVALID' ? new SourceDataInvalidError(reply.message) : new Error(reply.message),
        );
      void worker.terminate();
    });
    worker.once('error', (err) => {
      if (!settled) {
        const oom = (err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY';
        reject(
          oom
            ? new SourceDataInvalidError(
                `source ${opts.source}: the listing (${bytes.length} bytes) does not fit the parser's ${heapMb} MB heap: split it (e.g. one source per host: restic snapshots --host H --json) or raise CATALOG_REBUILD_LISTING_HEAP_MB`,
              )
            : new Error(`source ${opts.source}: parsing the listing failed: ${err.message}`),
        );
      }
      settled = true;
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`source ${opts.source}: the listing parser thread exited with code ${code}`));
      settled = true;
    });
  });
}

/** Heap limit of the listing parser thread (MB): `CATALOG_REBUILD_LISTING_HEAP_MB`, default 4096. */
export function listingHeapMb(env: NodeJS.ProcessEnv = process.env): number {
  const v = Number(env.CATALOG_REBUILD_LISTING_HEAP_MB);
  return Number.isInteger(v) && v >= 64 ? v : 4096;
}

if (!isMainThread && parentPort && (workerData as Job | undefined)?.kind) {
  const job = workerData as Job;
  let reply: Reply;
  try {
    const l = parseListing(
      job.kind,
      Buffer.from(job.bytes.buffer, job.bytes.byteOffset, job.bytes.byteLength),
      job.opts,
    );
    const copyText = Buffer.from(toCopyText(l.records), 'utf8');
    const ids = job.withIds ? l.records.map((r) => r.jobId).filter((id): id is string => id !== null) : null;
    reply = {
      ok: true,
      listing: {
        sha256: l.sha256,
        records: l.records.length,
        duplicates: l.duplicates,
        listed: l.listed,
        groups: l.groups,
        decoded: l.decoded,
        copyText,
        ids,
        recordIds: l.records.map((r) => (r.rejectReason === null ? r.jobId : null)),
        files: l.records.map((r) => r.files),
      },
    };
  } catch (err) {
    reply = { ok: false, message: (err as Error).message, code: (err as { code?: string }).code };
  }
  if (reply.ok) parentPort.postMessage(reply, [reply.listing.copyText.buffer as ArrayBuffer]);
  else parentPort.postMessage(reply);
}
