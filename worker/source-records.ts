/**
 * The worker's source records: the names of the sources of its configuration (never their
 * settings), written to the catalog database's `worker_source` table at start and every 30 s while
 * it runs, so `catalog-rebuild start` knows which sources the live workers of a task queue serve.
 * A failed write is logged and tried again at the next tick; the timer never keeps the process alive.
 */
import type { Pool } from 'pg';
import { Runtime } from '@temporalio/worker';
import { forgetWorkerSources, recordWorkerSources } from '../lib/catalog';

/** Environment variable overriding the interval between two records (ms), for tests. */
export const SOURCE_RECORD_INTERVAL_ENV = 'CATALOG_REBUILD_SOURCE_RECORD_INTERVAL_MS';

/** Default interval between two records of a running worker (ms). */
export const DEFAULT_SOURCE_RECORD_INTERVAL_MS = 30_000;

/**
 * The interval between two records (ms): `CATALOG_REBUILD_SOURCE_RECORD_INTERVAL_MS` when it is a
 * positive integer (tests shorten it), else 30,000.
 */
export function sourceRecordIntervalMs(env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env[SOURCE_RECORD_INTERVAL_ENV]);
  return Number.isInteger(n) && n > 0 ? n : DEFAULT_SOURCE_RECORD_INTERVAL_MS;
}

/** What a {@link SourceRecorder} records and where. */
export interface SourceRecorderOptions {
  pool: Pool;
  taskQueue: string;
  /** The worker's Temporal identity (`<pid>@<host>`). */
  identity: string;
  /** Source names of the worker's configuration. */
  sourceNames: readonly string[];
  /** Interval between two records (ms). */
  intervalMs: number;
  /** Where failures are logged (message and metadata); default the SDK runtime's logger. */
  warn?: (message: string, meta: Record<string, unknown>) => void;
}

/** Records a worker's source names now and on a timer. */
export class SourceRecorder {
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly o: SourceRecorderOptions) {}

  /**
   * Records the names once (at most one write at a time). Never throws: a failure is logged with
   * the task queue, the identity and the error, and the next tick tries again.
   */
  recordNow(): Promise<void> {
    this.inFlight ??= recordWorkerSources(this.o.pool, {
      taskQueue: this.o.taskQueue,
      workerIdentity: this.o.identity,
      sourceNames: this.o.sourceNames,
    })
      .catch((err: unknown) => this.warn(err))
      .finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  /** Starts the timer (unref'd: it never keeps the process alive); a second call does nothing. */
  start(): void {
    if (this.timer || this.stopped) return;
    this.timer = setInterval(() => void this.recordNow(), this.o.intervalMs);
    this.timer.unref();
  }

  /**
   * Stops the timer, waits for a write in flight and removes this worker's records (it no longer
   * serves its sources; a failure is logged); the pool stays open (the caller ends it).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.inFlight;
    await forgetWorkerSources(this.o.pool, this.o.taskQueue, this.o.identity).catch((err: unknown) =>
      this.warn(err, 'could not remove the source names of this stopping worker; they age out after 5 minutes'),
    );
  }

  private warn(
    err: unknown,
    message = 'could not record the source names of this worker; trying again at the next tick',
  ): void {
    const meta = {
      taskQueue: this.o.taskQueue,
      identity: this.o.identity,
      error: err instanceof Error ? err.message : String(err),
    };
    if (this.o.warn) this.o.warn(message, meta);
    else Runtime.instance().logger.warn(message, meta);
  }
}
