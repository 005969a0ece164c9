/**
 * What the page pipeline runs over: the worker's dependencies it needs (catalog pool, named sources,
 * the event log, the worker's identity, a logger) and the hooks where test workers hold or slow a page.
 */
import type { Pool, PoolClient } from 'pg';
import type { EventLog } from '../catalog';
import type { SourceRegistry } from '../sources';

/** The page attempt a {@link PageHooks} hook is called for. */
export interface PageAttempt {
  /** Page number, from 1. */
  pageNo: number;
  /** Temporal attempt number of the copyPage activity, from 1. */
  attempt: number;
}

/**
 * Points in a page copy where a caller may run code: test workers use them to hold or slow an
 * attempt (dev/test-worker.ts). A production worker sets none. A hook that throws fails the attempt.
 */
export interface PageHooks {
  /** After the attempt read its rows from the source, before its transaction begins. */
  afterRead?(page: PageAttempt): Promise<void>;
  /**
   * Inside the page transaction, after the ledger row was claimed, the version fenced and the rows
   * written, before the rejects and the ledger's totals; `db` is the transaction's client.
   */
  insideTransaction?(page: PageAttempt, db: PoolClient): Promise<void>;
  /** A streamed page only: once its first rows were read from the source, before they are written on. */
  whileStreaming?(page: PageAttempt): Promise<void>;
}

/** Where the pipeline logs what an operator may want to know (the activity's logger in a worker). */
export interface PageLog {
  /** A warning: `message` and its structured facts. */
  warn(message: string, meta?: Record<string, unknown>): void;
}

/** The dependencies of a page copy; an activity's context plus its logger. */
export interface PageContext {
  /** Pool on the catalog database (the page transaction's session comes from it). */
  pool: Pool;
  /** Named sources from the worker's configuration. */
  sources: SourceRegistry;
  /** Worker identity (`<pid>@<host>`) recorded in the ledger. */
  identity: string;
  /** The event log; it stamps the worker's build id on every event. */
  events: EventLog;
  /** Page hooks (tests only). */
  hooks?: PageHooks;
  /** Logger of the warnings (a fallback to row-by-row writing, a cancelled page). */
  log: PageLog;
}
