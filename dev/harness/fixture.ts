/**
 * One rebuild per test against real worker processes: fresh databases (copies of the migrated
 * catalog and of the generated Bareos source's templates), a configuration file, a unique task queue and catalog name, a worker fleet and a Temporal
 * client, all released by the test's cleanup; and the rebuild's result within a deadline.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { Pool } from 'pg';
import type { RebuildCatalogInput, RebuildCatalogResult, RebuildProgress } from '../../client';
import { getProgress, startRebuild, waitForResult } from '../../client';
import type { FleetWorker } from './faults';
import { WorkerFleet } from './faults';
import type { TestDatabases, WorkerProcess } from './harness';
import { runCliAsync, temporalClient, testDatabases, testEnv, uniqueQueue, writeConfig } from './harness';
import { withDeadline } from './wait';

/** The last 3,000 characters of each worker's output, for failure messages. */
export function workerOutputs(workers: WorkerProcess[]): string {
  return workers.map((w) => `--- worker ${w.pid}\n${w.output().slice(-3000)}`).join('\n');
}

/**
 * The rebuild's result (`waitForResult`) within `timeoutMs` (default 90,000 ms). A failed rebuild
 * rejects with its own error (a `WorkflowFailedError`).
 * @throws Error `rebuild <id> did not end within <ms> ms` followed by `outputs()` (the workers' output).
 */
export function rebuildResult(
  handle: WorkflowHandle,
  timeoutMs = 90_000,
  outputs: () => string = () => '',
): Promise<RebuildCatalogResult> {
  return withDeadline(
    waitForResult(handle),
    timeoutMs,
    () => `rebuild ${handle.workflowId} did not end within ${timeoutMs} ms\n${outputs()}`,
  );
}

/** The session time zone of a database (`current_setting('TimeZone')`): the zone of a generated source's naive times. */
export async function serverTimezone(pool: Pool): Promise<string> {
  return (await pool.query<{ tz: string }>(`SELECT current_setting('TimeZone') AS tz`)).rows[0].tz;
}

/** Options of {@link rebuildFixture}. */
export interface RebuildFixtureOptions {
  /** `host:port` of the Temporal frontend the workers and the client use. */
  address: string;
  /** Short name used in database, queue and temporary folder names. */
  tag: string;
  /** Jobs of the generated Bareos source (source `director`). */
  jobs: number;
  /** Seed of the generator. */
  seed: number;
  /** File records of the generated source in all (dev/bareos-file-generator.ts); default none. */
  files?: number;
  /** Catalog name (default `<tag>-<last 6 characters of the task queue>`). */
  catalog?: string;
  /** Extra environment of every worker. */
  workerEnv?: Record<string, string>;
  /** Leave the databases for a later test to use (it drops them). */
  keepDatabases?: boolean;
  /**
   * The catalog database: `migrated` (default, a copy of the migrated catalog template) or `empty`
   * (the first worker applies the migrations it knows, e.g. a previous release's).
   */
  catalogDatabase?: 'migrated' | 'empty';
}

/** Everything one test owns: databases, queue, workers, a Temporal client. */
export interface RebuildFixture {
  dbs: TestDatabases;
  /** Environment of the workers (and of CLI processes for this rebuild). */
  env: NodeJS.ProcessEnv;
  fleet: WorkerFleet;
  client: Client;
  taskQueue: string;
  catalog: string;
  /** A temporary folder, removed by the cleanup. */
  tmp: string;
  /** Spawns one worker (optionally with extra environment) and waits until it polls. */
  spawn(extra?: Record<string, string>): Promise<FleetWorker>;
  /** Starts a rebuild of the fixture's catalog from source `director`; the cleanup terminates it. */
  start(input: Omit<RebuildCatalogInput, 'catalog' | 'source'>): Promise<WorkflowHandle>;
  /** The rebuild's result within a deadline (default 120,000 ms); any failure names the workers' output. */
  result(handle: WorkflowHandle, timeoutMs?: number): Promise<RebuildCatalogResult>;
  /** The `progress` query (10 s to answer). */
  progress(handle: WorkflowHandle): Promise<RebuildProgress>;
}

/**
 * Sets up {@link RebuildFixture} for test `t`. Its cleanup (registered on `t`) kills every worker
 * the fleet spawned, terminates the rebuilds it started, closes the client, drops the databases
 * (unless `keepDatabases`) and removes the temporary folder.
 */
export async function rebuildFixture(t: TestContext, o: RebuildFixtureOptions): Promise<RebuildFixture> {
  const dbs = await testDatabases(o.tag, {
    catalog: o.catalogDatabase,
    source: { jobs: o.jobs, seed: o.seed, ...(o.files ? { files: o.files } : {}) },
  });
  const taskQueue = uniqueQueue(o.tag);
  const catalog = o.catalog ?? `${o.tag}-${taskQueue.slice(-6)}`;
  const env = testEnv({ address: o.address, configFile: writeConfig(dbs), taskQueue, extra: o.workerEnv });
  const fleet = new WorkerFleet(env);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `catalog-rebuild-${o.tag}-`));
  const handles: WorkflowHandle[] = [];
  let tc: Awaited<ReturnType<typeof temporalClient>> | undefined;
  t.after(async () => {
    await fleet.stopAll();
    for (const h of handles) await h.terminate('test cleanup').catch(() => undefined);
    await tc?.close().catch(() => undefined);
    if (!o.keepDatabases) await dbs.drop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  tc = await temporalClient(o.address);
  const client = tc.client;
  return {
    dbs,
    env,
    fleet,
    client,
    taskQueue,
    catalog,
    tmp,
    spawn: (extra) => fleet.spawn(extra),
    async start(input) {
      const { handle } = await startRebuild(client, { catalog, source: 'director', ...input }, { taskQueue });
      handles.push(handle);
      return handle;
    },
    async result(handle, timeoutMs = 120_000) {
      try {
        return await rebuildResult(handle, timeoutMs);
      } catch (err) {
        throw new Error(`${(err as Error).message}\n${fleet.outputs()}`, { cause: err });
      }
    },
    progress: (handle) => getProgress(handle, 10_000),
  };
}

/**
 * Runs `catalog-rebuild start --catalog <catalog> --source director --page-size 300 --wait <flags>`
 * as a process in the fixture's environment (240 s at most).
 * @returns its exit code and output, with `text` holding stdout and stderr together.
 */
export async function startAndWait(fx: RebuildFixture, catalog: string, flags: string[]) {
  const r = await runCliAsync(
    ['start', '--catalog', catalog, '--source', 'director', '--page-size', '300', '--wait', ...flags],
    fx.env,
    { timeoutMs: 240_000 },
  );
  return { ...r, text: `${r.stdout}\n${r.stderr}` };
}
