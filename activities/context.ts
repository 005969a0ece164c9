/**
 * What every activity runs over: the worker's dependencies, built once per worker process by
 * `createActivities` and passed as the first argument of each activity function.
 */
import type { Client } from '@temporalio/client';
import type { Pool } from 'pg';
import type { EventLog } from '../lib/catalog';
import type { PageHooks } from '../lib/page';
import type { SourceRegistry } from '../lib/sources';
import type { CopyPageResult } from '../workflows/definitions';

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
