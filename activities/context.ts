/**
 * What every activity runs over: the worker's dependencies, built once per worker process by
 * `createActivities` and passed as the first argument of each activity function.
 */
import type { Client } from '@temporalio/client';
import type { Pool, PoolClient } from 'pg';
import type { EventLog } from '../lib/catalog';
import type { SourceRegistry } from '../lib/sources';
import type { CopyPageResult } from '../workflows/definitions';

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

/** The dependencies of the activities. */
export interface ActivityContext {
  /** Pool on the catalog database. */
  pool: Pool;
  /** Named sources from the worker's configuration. */
  sources: SourceRegistry;
  /** Temporal client, to read a retried page's previous failure; optional. */
  client?: Client;
  /** Worker identity (`<pid>@<host>`) recorded in the ledger and events. */
  identity: string;
  /** The event log; it stamps the worker's build id on every event. */
  events: EventLog;
  /** Page hooks (tests only). */
  hooks?: PageHooks;
  /** Called after each page this worker committed (metrics). */
  onPageCommitted?: (r: CopyPageResult) => void;
}
