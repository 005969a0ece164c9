/**
 * Records a release: histories of real rebuilds (a private Temporal dev server, real worker
 * processes of this build, a generated Bareos source in a fresh PostgreSQL database) into
 * `test/releases/<release>/histories/` with their workflow ids in `index.json`, and the workflow
 * bundle those workers ran (`workflow-bundle.js.gz`) with its build id (`release.json`). The replay
 * test (`test/replay.test.ts`) replays each release's histories on its own bundle, and the newest
 * release's on this build; the upgrade test runs the recorded bundle as that release's workers.
 *
 * Run: `npm run record:histories -- --release <tag> [<scenario> …]`. Without names it records every
 * scenario whose history file is missing, so recorded histories are kept; a named scenario is
 * recorded again and its files are overwritten. Record a new release when the workflow code no
 * longer replays the newest release's histories (docs/operations.md, "Releases and replay tests").
 */
import { gzipSync } from 'node:zlib';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { WorkflowFailedError } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import format from 'pg-format';
import type { RebuildCatalogInput } from '../client';
import {
  cancel,
  getProgress,
  pause,
  RebuildCatalogResult,
  resume,
  setThrottle,
  startRebuild,
  waitForResult,
} from '../client';
import { generateBareosSource } from './bareos-generator';
import { projectRoot } from '../lib/paths';
import { PACKAGE_VERSION } from '../worker';
import { workflowBundlePath } from '../worker/bundle';
import { workerBuild } from '../worker/build-id';
import type { TestDatabases } from './harness/harness';
import { privateTemporal, temporalClient, testDatabases, testEnv, uniqueQueue, writeConfig } from './harness/harness';
import type { FleetWorker } from './harness/faults';
import { WorkerFleet } from './harness/faults';
import { waitFor } from './harness/wait';

/** Jobs of the generated source: pages of 1,000 make 6 pages, of 500 make 12. */
const SOURCE_JOBS = 6_000;
/** Folder of the recorded histories and their index. */
/** Folder of the recorded releases. */
export const RELEASES = path.join(projectRoot(), 'test', 'releases');
let HISTORIES = '';
let INDEX = '';

/** What a scenario runs against: one Temporal service, one source, workers on the main task queue. */
interface Ctx {
  client: Client;
  dbs: TestDatabases;
  fleet: WorkerFleet;
  /** Task queue of the worker every scenario may use (scenarios with faults spawn their own queue). */
  taskQueue: string;
  /** Starts `RebuildCatalog` on `taskQueue` (default: the main one). */
  start(input: Omit<RebuildCatalogInput, 'source'>, taskQueue?: string): Promise<WorkflowHandle>;
  /** Writes the history of `workflowId` (a given run, or the latest) as `<name>.json` and indexes it. */
  save(name: string, workflowId: string, runId?: string): Promise<void>;
  /** Runs the Temporal CLI against the scenario's server; returns its stdout. */
  temporal(args: string[]): string;
}

/** One recorded situation: the history files it writes and how to provoke it. */
interface Scenario {
  /** History names written (`<name>.json`), in the order `run` saves them. */
  files: string[];
  run(ctx: Ctx): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The root cause's message of a failure chain. */
function rootMessage(err: unknown): string {
  let e: unknown = err;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}

/** Whether a page transaction of `worker` sleeps in the slow-page fault's pg_sleep. */
async function slowPageSleeping(dbs: TestDatabases, worker: FleetWorker): Promise<boolean> {
  const { rowCount } = await dbs.catalogPool.query(
    `SELECT 1 FROM pg_stat_activity
     WHERE datname = current_database() AND application_name LIKE $1 || '%' AND state = 'active'
       AND query LIKE 'SELECT pg_sleep%'`,
    [`catalog-rebuild:worker:${worker.pid}`],
  );
  return !!rowCount;
}

/** Waits until the rebuild committed at least `pages` pages; returns its progress then. */
async function pagesDone(handle: WorkflowHandle, pages: number): Promise<Awaited<ReturnType<typeof getProgress>>> {
  return waitFor(`${pages} committed pages`, async () => {
    const p = await getProgress(handle);
    return p.pagesDone >= pages && p;
  });
}

/** Every scenario by name, in the order they run (the source-changing ones last). */
const SCENARIOS: Record<string, Scenario> = {
  normal: {
    files: ['rebuild-normal'],
    async run(ctx) {
      const h = await ctx.start({ catalog: 'normal', pageSize: 500 });
      await waitForResult(h);
      await ctx.save('rebuild-normal', h.workflowId);
    },
  },

  // A worker holds page 6 in a slow statement; it is killed there and the page is retried on another worker.
  'worker-killed': {
    files: ['rebuild-worker-killed'],
    async run(ctx) {
      const queue = uniqueQueue('hist-kill');
      const slow = await ctx.fleet.spawn({
        CATALOG_REBUILD_TASK_QUEUE: queue,
        CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 6, ms: 30_000 } }),
      });
      const h = await ctx.start({ catalog: 'kill', pageSize: 200, concurrency: 2, heartbeatTimeoutMs: 3000 }, queue);
      await waitFor('page 6 to sleep in its transaction', () => slowPageSleeping(ctx.dbs, slow), {
        timeoutMs: 120_000,
      });
      ctx.fleet.kill(slow);
      await ctx.fleet.spawn({ CATALOG_REBUILD_TASK_QUEUE: queue });
      const r = await waitForResult(h);
      if (r.retries < 1) throw new Error('expected a retried page in the kill scenario');
      await ctx.save('rebuild-worker-killed', h.workflowId);
    },
  },

  // The first run continues as new after 4 pages; the last one publishes.
  'continue-as-new': {
    files: ['rebuild-continue-as-new-first-run', 'rebuild-continue-as-new-last-run'],
    async run(ctx) {
      const h = await ctx.start({ catalog: 'can', pageSize: 500, maxPagesPerRun: 4 });
      const r = await waitForResult(h);
      if (r.runs < 2) throw new Error(`expected continue-as-new, got ${r.runs} run`);
      const firstRunId = (h as unknown as { firstExecutionRunId: string }).firstExecutionRunId;
      await ctx.save('rebuild-continue-as-new-first-run', h.workflowId, firstRunId);
      await ctx.save('rebuild-continue-as-new-last-run', h.workflowId);
    },
  },

  // `pause` after two pages; the window drains; `resume`; the rebuild publishes.
  'pause-resume': {
    files: ['rebuild-pause-resume'],
    async run(ctx) {
      const h = await ctx.start({ catalog: 'pause', pageSize: 1000, concurrency: 1, pauseBetweenPagesMs: 300 });
      await pagesDone(h, 2);
      await pause(h);
      const p = await waitFor('the page window to drain', async () => {
        const q = await getProgress(h);
        return q.paused && q.inFlight === 0 && q;
      });
      if (p.pagesDone >= p.pagesTotal) throw new Error('paused too late: every page was already committed');
      await sleep(500);
      await resume(h);
      const r = await waitForResult(h);
      if (!r.published) throw new Error('expected the paused rebuild to publish');
      await ctx.save('rebuild-pause-resume', h.workflowId);
    },
  },

  // The `cancel` signal while page 3 sleeps in its transaction: the page in flight is cancelled, the
  // version abandoned, the rebuild completes unpublished.
  'cancel-signal': {
    files: ['rebuild-cancel-signal'],
    async run(ctx) {
      const queue = uniqueQueue('hist-cancel');
      const slow = await ctx.fleet.spawn({
        CATALOG_REBUILD_TASK_QUEUE: queue,
        CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 3, ms: 5_000 } }),
      });
      const h = await ctx.start({ catalog: 'cancel', pageSize: 1000, concurrency: 1 }, queue);
      await waitFor('page 3 to sleep in its transaction', () => slowPageSleeping(ctx.dbs, slow), {
        timeoutMs: 120_000,
        intervalMs: 25,
      });
      await cancel(h, 'recorded cancel');
      const r = await waitForResult(h);
      if (!r.cancelled || r.published) throw new Error(`expected a cancelled rebuild, got ${JSON.stringify(r)}`);
      await sleep(1_000);
      ctx.fleet.kill(slow);
      await ctx.save('rebuild-cancel-signal', h.workflowId);
    },
  },

  // A `setThrottle` update during the copy phase widens the window and drops the pause between pages.
  'set-throttle': {
    files: ['rebuild-set-throttle'],
    async run(ctx) {
      const h = await ctx.start({ catalog: 'throttle', pageSize: 1000, concurrency: 1, pauseBetweenPagesMs: 500 });
      await pagesDone(h, 1);
      const s = await setThrottle(h, { concurrency: 3, pauseBetweenPagesMs: 0 });
      if (s.concurrency !== 3 || s.pauseBetweenPagesMs !== 0)
        throw new Error(`throttle not in force: ${JSON.stringify(s)}`);
      const r = await waitForResult(h);
      if (!r.published) throw new Error('expected the throttled rebuild to publish');
      await ctx.save('rebuild-set-throttle', h.workflowId);
    },
  },

  // While page 3 sleeps in its transaction, a job of a committed page changes in the source: round 1
  // of reconcile finds its bucket's fingerprint differs, a RepairBucket child re-copies it, round 2 passes.
  'repaired-bucket': {
    files: ['rebuild-repaired-bucket'],
    async run(ctx) {
      const queue = uniqueQueue('hist-repair');
      const slow = await ctx.fleet.spawn({
        CATALOG_REBUILD_TASK_QUEUE: queue,
        CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 3, ms: 3_000 } }),
      });
      const h = await ctx.start({ catalog: 'repair', pageSize: 1000, concurrency: 1 }, queue);
      await waitFor('page 3 to sleep in its transaction', () => slowPageSleeping(ctx.dbs, slow), {
        timeoutMs: 120_000,
        intervalMs: 25,
      });
      const { versionId } = await getProgress(h);
      const { rows } = await ctx.dbs.catalogPool.query<{ k: string }>(
        format('SELECT min(job_key)::text AS k FROM %I WHERE bucket IS NOT NULL', `job_v${versionId}`),
      );
      if (!rows[0]?.k) throw new Error('no committed dated job to change');
      await ctx.dbs.sourcePool.query(`UPDATE job SET jobfiles = jobfiles + 1 WHERE jobid = $1::bigint`, [rows[0].k]);
      const r = await waitForResult(h);
      if (!r.published || r.reconciliation?.round !== 2)
        throw new Error(`expected a publish after one repair round, got ${JSON.stringify(r)}`);
      ctx.fleet.kill(slow);
      await ctx.save('rebuild-repaired-bucket', h.workflowId);
    },
  },

  // Page activities with readable ids (`page-<n>`): while page 3 sleeps in its transaction an
  // operator pauses it (`temporal activity pause`); the attempt reports the pause, the window drains
  // and starts nothing; `temporal activity unpause`; the next attempt reports it runs again; publish.
  'activity-pause': {
    files: ['rebuild-activity-pause'],
    async run(ctx) {
      const queue = uniqueQueue('hist-apause');
      const slow = await ctx.fleet.spawn({
        CATALOG_REBUILD_TASK_QUEUE: queue,
        CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 3, ms: 20_000 } }),
      });
      const h = await ctx.start(
        { catalog: 'apause', pageSize: 500, concurrency: 2, heartbeatTimeoutMs: 2000, pauseBetweenPagesMs: 500 },
        queue,
      );
      await waitFor('page 3 to sleep in its transaction', () => slowPageSleeping(ctx.dbs, slow), {
        timeoutMs: 120_000,
        intervalMs: 25,
      });
      ctx.temporal(['activity', 'pause', '--activity-id', 'page-3', '--workflow-id', h.workflowId]);
      await waitFor('the window to hold with only page 3 in flight', async () => {
        const q = await getProgress(h);
        return q.operatorPausedPages?.includes(3) && q.inFlight === 1;
      });
      await sleep(1_000);
      ctx.temporal(['activity', 'unpause', '--activity-id', 'page-3', '--workflow-id', h.workflowId]);
      const r = await waitForResult(h);
      if (!r.published || r.retries < 1)
        throw new Error(`expected a published rebuild with a retry, got ${JSON.stringify(r)}`);
      ctx.fleet.kill(slow);
      await ctx.save('rebuild-activity-pause', h.workflowId);
    },
  },

  // A second rebuild of a catalog after most jobs of one day were deleted from the source: reconcile
  // passes, the PublishCatalog child's shrink guard refuses, the rebuild fails NOT_PUBLISHABLE.
  'shrink-refused': {
    files: ['rebuild-shrink-refused'],
    async run(ctx) {
      const first = await waitForResult(await ctx.start({ catalog: 'shrink', pageSize: 1000 }));
      if (!first.published) throw new Error('expected the first rebuild to publish');
      const del = await ctx.dbs.sourcePool.query<{ d: string }>(
        `WITH day AS (
           SELECT starttime::date AS d FROM job
           WHERE starttime IS NOT NULL AND starttime::date > (SELECT min(starttime::date) FROM job)
           GROUP BY 1 ORDER BY count(*) DESC, 1 DESC LIMIT 1)
         DELETE FROM job WHERE starttime::date = (SELECT d FROM day) AND jobid % 5 <> 0 RETURNING starttime::date::text AS d`,
      );
      if (del.rowCount! < 5) throw new Error(`deleted only ${del.rowCount} jobs of ${del.rows[0]?.d}`);
      const h = await ctx.start({ catalog: 'shrink', pageSize: 1000 });
      const err = await waitForResult(h).then(
        (r) => new Error(`expected the shrink guard to refuse, got ${JSON.stringify(r)}`),
        (e: unknown) => e,
      );
      if (!(err instanceof WorkflowFailedError) || !/shrink guard/.test(rootMessage(err))) throw err;
      console.log(`shrink guard: ${rootMessage(err)}`);
      await ctx.save('rebuild-shrink-refused', h.workflowId);
    },
  },
};

/** Scenarios to record: the named ones, or those with a history file missing. */
function selected(args: string[]): string[] {
  for (const a of args)
    if (!SCENARIOS[a]) throw new Error(`unknown scenario ${a}; scenarios: ${Object.keys(SCENARIOS).join(', ')}`);
  if (args.length) return Object.keys(SCENARIOS).filter((s) => args.includes(s));
  return Object.keys(SCENARIOS).filter((s) =>
    SCENARIOS[s].files.some((f) => !fs.existsSync(path.join(HISTORIES, `${f}.json`))),
  );
}

/** Writes the bundle this build's workers run and its build id beside the release's histories. */
function saveBundle(dir: string, release: string): void {
  const code = fs.readFileSync(workflowBundlePath());
  fs.writeFileSync(path.join(dir, 'workflow-bundle.js.gz'), gzipSync(code, { level: 9 }));
  const build = workerBuild({}, code, PACKAGE_VERSION);
  const meta = { release, packageVersion: PACKAGE_VERSION, buildId: build.buildId };
  fs.writeFileSync(path.join(dir, 'release.json'), JSON.stringify(meta, null, 2) + '\n');
  console.log(`release ${release}: build ${build.buildId}, bundle saved`);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const at = args.indexOf('--release');
  const release = at >= 0 ? args[at + 1] : undefined;
  if (!release || !/^v\d+\.\d+\.\d+$/.test(release))
    throw new Error('usage: npm run record:histories -- --release vX.Y.Z [scenario …]');
  const dir = path.join(RELEASES, release);
  HISTORIES = path.join(dir, 'histories');
  INDEX = path.join(HISTORIES, 'index.json');
  const names = selected(args.filter((_, i) => i !== at && i !== at + 1));
  fs.mkdirSync(HISTORIES, { recursive: true });
  saveBundle(dir, release);
  if (!names.length) {
    console.log(`every scenario is recorded in ${HISTORIES}; name scenarios to record them again`);
    return;
  }
  const temporal = await privateTemporal();
  const dbs = await testDatabases('hist');
  const taskQueue = uniqueQueue('hist');
  const fleet = new WorkerFleet(testEnv({ address: temporal.address, configFile: writeConfig(dbs), taskQueue }));
  const tc = await temporalClient(temporal.address);
  try {
    await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: SOURCE_JOBS, seed: 21 });
    await fleet.spawn();
    fs.mkdirSync(HISTORIES, { recursive: true });
    const index: Record<string, string> = fs.existsSync(INDEX) ? JSON.parse(fs.readFileSync(INDEX, 'utf8')) : {};
    const ctx: Ctx = {
      client: tc.client,
      dbs,
      fleet,
      taskQueue,
      async start(input, queue = taskQueue) {
        return (await startRebuild(tc.client, { source: 'director', ...input }, { taskQueue: queue })).handle;
      },
      async save(name, workflowId, runId) {
        const history = await tc.client.workflow.getHandle(workflowId, runId).fetchHistory();
        fs.writeFileSync(path.join(HISTORIES, `${name}.json`), historyToJSON(history));
        index[name] = workflowId;
        const sorted = Object.fromEntries(Object.entries(index).sort(([a], [b]) => a.localeCompare(b)));
        fs.writeFileSync(INDEX, JSON.stringify(sorted, null, 2) + '\n');
        console.log(`recorded ${name}: ${history.events?.length} events`);
      },
      temporal(args) {
        const r = spawnSync(temporal.cli, [...args, '--address', temporal.address, '--namespace', 'default'], {
          encoding: 'utf8',
          timeout: 30_000,
        });
        if (r.status !== 0) throw new Error(`temporal ${args.join(' ')} exited ${r.status}: ${r.stderr}${r.stdout}`);
        return r.stdout;
      },
    };
    for (const name of names) {
      console.log(`scenario ${name}`);
      await SCENARIOS[name].run(ctx).catch((err: unknown) => {
        for (const w of fleet.all) console.error(`worker ${w.n} (pid ${w.pid}):\n${w.output().slice(-3000)}`);
        throw err;
      });
    }
  } finally {
    await tc.close().catch(() => undefined);
    await fleet.stopAll();
    await temporal.stop();
    await dbs.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
