/**
 * The catalog-rebuild worker: applies migrations, checks search attributes, loads the workflow
 * bundle once and polls the task queue as a version of its Worker Deployment (worker/build-id.ts;
 * every rebuild is pinned to the build it started on), with the activities built over one catalog
 * pool. While it runs it records the names of its sources in the catalog database
 * (worker/source-records.ts), and when its deployment has no current version yet it makes its own
 * build current (worker/deployment.ts).
 */
import * as os from 'node:os';
import { Client, Connection } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { PageHooks } from '../activities';
import { createActivities } from '../activities';
import type { Config } from '../lib/config';
import { catalogDatabaseDescription, getSource, loadConfig, taskQueue as defaultTaskQueue } from '../lib/config';
import { createPool, migrate } from '../lib/db';
import { ConfigError } from '../lib/errors';
import { removeStaleSpools, SourceRegistry } from '../lib/sources';
import { startHealthServer } from './health';
import { loadWorkflowBundle } from './bundle';
import type { WorkerBuild } from './build-id';
import { workerBuild } from './build-id';
import { adoptIfNoCurrentVersion, adoptionLine } from './deployment';
import { REQUIRED_SEARCH_ATTRIBUTES } from '../workflows/search-attributes';
import { installMetricsRuntime, runtimePageMetrics, runtimeRebuildGauges } from './metrics';
import { SourceRecorder, sourceRecordIntervalMs } from './source-records';

/** The package version (package.json), the first part of the default build id. */
export const PACKAGE_VERSION: string = require('../../package.json').version;

let bundle: Promise<string> | undefined;
/**
 * The workflow code, once per process: the prebuilt `dist/workflow-bundle.js` written by
 * `npm run build`, or (when it is missing or older than the compiled workflows) bundled in this
 * process, which is announced in the worker's output.
 */
export function workflowBundle(): Promise<string> {
  bundle ??= loadWorkflowBundle();
  return bundle;
}

/**
 * Checks that the namespace has the CatalogName and RebuildPhase keyword search attributes.
 * @throws ConfigError with the `temporal operator search-attribute create` command when missing.
 */
export async function checkSearchAttributes(
  connection: Connection,
  namespace: string,
  address?: string,
): Promise<void> {
  const r = await connection.operatorService.listSearchAttributes({ namespace });
  const have = new Set([...Object.keys(r.customAttributes ?? {}), ...Object.keys(r.systemAttributes ?? {})]);
  const missing = REQUIRED_SEARCH_ATTRIBUTES.filter((n) => !have.has(n));
  if (missing.length) {
    const flags = missing.map((n) => `--name ${n} --type Keyword`).join(' ');
    throw new ConfigError(
      `search attributes missing on namespace ${namespace}: ${missing.join(', ')}; create them with: temporal operator search-attribute create${address ? ` --address ${address}` : ''} --namespace ${namespace} ${flags}`,
    );
  }
}

/**
 * The worker's Temporal connections (envconfig): a client connection, after the search attributes
 * were checked on the namespace, and the native connection that polls.
 * @throws ConfigError when the search attributes are missing (the client connection is closed).
 */
async function connectTemporal(
  env: NodeJS.ProcessEnv,
): Promise<{ ns: string; clientConnection: Connection; connection: NativeConnection }> {
  const { connectionOptions, namespace } = loadClientConnectConfig({ overrideEnvVars: env as Record<string, string> });
  const ns = namespace ?? 'default';
  const clientConnection = await Connection.connect(connectionOptions as Parameters<typeof Connection.connect>[0]);
  try {
    await checkSearchAttributes(clientConnection, ns, (connectionOptions as { address?: string }).address);
    return { ns, clientConnection, connection: await NativeConnection.connect(connectionOptions) };
  } catch (err) {
    await clientConnection.close();
    throw err;
  }
}

/** A running worker and how to stop it. */
export interface RunningWorker {
  worker: Worker;
  /** The Worker Deployment Version it polls as. */
  build: WorkerBuild;
  /** Runs until shutdown (SIGINT/SIGTERM or `worker.shutdown()`), then closes pools and connections. */
  run(): Promise<void>;
}

/**
 * Creates a worker from the environment: envconfig for Temporal, CATALOG_REBUILD_CONFIG /
 * CATALOG_DATABASE_URL for the catalog and sources, CATALOG_REBUILD_TASK_QUEUE.
 * CATALOG_REBUILD_DEPLOYMENT / CATALOG_REBUILD_BUILD_ID for its Worker Deployment Version.
 * `opts.config` replaces the configuration file; `opts.hooks` are page hooks and `opts.workflowCode`
 * another workflow bundle (a recorded release's), for test workers (dev/test-worker.ts), never set in
 * production.
 * @throws ConfigError for bad configuration, a bad deployment name or build id, or missing search
 *   attributes; SchemaTooNewError.
 */
export async function createWorker(
  env: NodeJS.ProcessEnv = process.env,
  opts: { config?: Config; hooks?: PageHooks; workflowCode?: string } = {},
): Promise<RunningWorker> {
  // The worker needs the sources: without the configuration file it would poll and fail every rebuild.
  const config = opts.config ?? loadConfig(env, { requireFile: true });
  // The SDK runtime (with the Prometheus endpoint, when configured) before any native connection.
  const metricsAddress = installMetricsRuntime(env);
  const identity = `${process.pid}@${os.hostname()}`;
  const pool = createPool(config.catalogDatabaseUrl, {
    applicationName: `catalog-rebuild:worker:${process.pid}`,
    statementTimeoutMs: Number(env.CATALOG_REBUILD_STATEMENT_TIMEOUT_MS || 30_000),
    max: 16,
    // Errors about reaching the catalog name it and its setting (never a password); statement
    // errors keep their own words.
    describe: catalogDatabaseDescription(config.catalogDatabaseUrl, env),
    describeOnlyConnectionErrors: true,
  });
  const sources = new SourceRegistry((name) => getSource(config, name), pool);
  const stopGauges = metricsAddress ? runtimeRebuildGauges(pool, env) : () => undefined;
  const cleanup = async () => {
    stopGauges();
    await sources.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
  };
  try {
    await migrate(pool).catch((err: unknown) => {
      if ((err as { code?: string }).code === '3D000') {
        throw new ConfigError(
          `${(err as Error).message}: create it (e.g. createdb -O <owner> <name>) or fix that setting`,
        );
      }
      throw err;
    });
    // Listings spooled by pages of workers killed before their attempt ended (the next attempt lists again).
    const stale = await removeStaleSpools();
    if (stale.length)
      console.log(`catalog-rebuild worker ${process.pid} removed ${stale.length} spooled listing(s) of dead workers`);
    const { ns, clientConnection, connection } = await connectTemporal(env);
    if (metricsAddress)
      console.log(`catalog-rebuild worker ${process.pid} serves metrics on http://${metricsAddress}/metrics`);
    const client = new Client({ connection: clientConnection, namespace: ns });
    const queue = defaultTaskQueue(env);
    const code = opts.workflowCode ?? (await workflowBundle());
    const build = workerBuild(env, code, PACKAGE_VERSION);
    const worker = await Worker.create({
      connection,
      namespace: ns,
      taskQueue: queue,
      workflowBundle: { code },
      // Every rebuild stays on the build it started on, children and continue-as-new included
      // (docs/operations.md, "Rolling out a new build").
      workerDeploymentOptions: { useWorkerVersioning: true, version: build, defaultVersioningBehavior: 'PINNED' },
      activities: createActivities({
        pool,
        sources,
        client,
        identity,
        buildId: build.buildId,
        hooks: opts.hooks,
        onPageCommitted: runtimePageMetrics(),
      }),
      identity,
      stickyQueueScheduleToStartTimeout: '3s',
      maxConcurrentActivityTaskExecutions: Number(env.CATALOG_REBUILD_MAX_ACTIVITIES || 8),
      shutdownGraceTime: Number(env.CATALOG_REBUILD_SHUTDOWN_GRACE_MS || 20_000),
    });
    // The names of this worker's sources, for `catalog-rebuild start`: now, then every 30 s while it runs.
    const sourceRecords = new SourceRecorder({
      pool,
      taskQueue: queue,
      identity,
      sourceNames: Object.keys(config.sources),
      intervalMs: sourceRecordIntervalMs(env),
    });
    await sourceRecords.recordNow();
    const healthAddress = env.CATALOG_REBUILD_HEALTH_ADDRESS;
    const closeHealth = healthAddress ? await startHealthServer(healthAddress, worker, pool) : async () => undefined;
    if (healthAddress)
      console.log(`catalog-rebuild worker ${process.pid} serves its health check on http://${healthAddress}/healthz`);
    return {
      worker,
      build,
      async run() {
        sourceRecords.start();
        const stop = new AbortController();
        const adoption = adoptIfNoCurrentVersion(client, ns, build, { identity, signal: stop.signal }).then((a) => {
          const line = adoptionLine(a, build);
          if (line) console.log(`catalog-rebuild worker ${process.pid}: ${line}`);
        });
        try {
          await worker.run();
        } finally {
          // The adoption's calls end before the connection closes: a gRPC retry of one that fires
          // on a closed channel throws outside any promise and would end the process with exit 1.
          stop.abort();
          await adoption.catch(() => undefined);
          await sourceRecords.stop();
          await closeHealth().catch(() => undefined);
          await connection.close().catch(() => undefined);
          await clientConnection.close().catch(() => undefined);
          await cleanup();
        }
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
