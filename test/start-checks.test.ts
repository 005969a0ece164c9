/**
 * `start` checks first, against a private Temporal dev server, real worker processes and real
 * PostgreSQL: workers record the names of their sources (`hidden`, `r18`) at start and refresh
 * them; `start` refuses a source no live worker serves (exit 2 within 10 s, no workflow), waits for
 * a worker when none has recorded (exit 1 naming the task queue and `npm run worker`, or goes on
 * when one appears), and prints a receipt (text and `--json`) once the rebuild is planned. The
 * start check's decisions and defaults are unit-tested through the pure function. Right after the
 * task queue's only worker died (its source records still fresh), `start` says within its wait that
 * no worker polls the queue and how to start one; Ctrl-C during `start --wait` prints that the
 * rebuild goes on and the commands to follow it, and leaves it running.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ApplicationFailure } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { ActivityContext } from '../activities/context';
import { launchRefresh } from '../activities/scheduled-refresh';
import type { Client } from '@temporalio/client';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import {
  privateTemporal,
  runCliAsync,
  spawnWorker,
  startCli,
  temporalClient,
  testDatabases,
  testEnv,
  uniqueQueue,
} from '../dev/harness/harness';
import { waitFor, within } from '../dev/harness/wait';
import { cancel, getProgress, rebuildWorkflowId, startRebuild } from '../client';
import { decideStart, interruptedLines, noPollerLine, startCheckSettings } from '../client/commands/start';
import { buildReceipt, formatReceipt } from '../client/receipt';

const JOBS = 1_200;

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
let dbs: TestDatabases;
let tc: Awaited<ReturnType<typeof temporalClient>>;
let configFile: string;
let queue: string;
let env: NodeJS.ProcessEnv;
const workers: WorkerProcess[] = [];
const catalogs: string[] = [];

/** A worker configuration with two Bareos sources, `r18` and `hidden`, on the generated source. */
function writeTwoSourceConfig(d: TestDatabases): string {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-start-checks-')), 'config.json');
  const source = { kind: 'bareos', databaseUrl: d.sourceUrl };
  fs.writeFileSync(
    file,
    JSON.stringify({ catalogDatabaseUrl: d.catalogUrl, sources: { r18: source, hidden: source } }),
  );
  return file;
}

before(async () => {
  temporal = await privateTemporal();
  dbs = await testDatabases('startchk');
  await dbs.generateSource({ jobs: JOBS, seed: 15 });
  configFile = writeTwoSourceConfig(dbs);
  queue = uniqueQueue('startchk');
  env = testEnv({ address: temporal.address, configFile, taskQueue: queue });
  tc = await temporalClient(temporal.address);
  workers.push(await spawnWorker({ ...env, CATALOG_REBUILD_SOURCE_RECORD_INTERVAL_MS: '500' }));
});

after(async () => {
  for (const w of workers) w.kill();
  for (const c of catalogs)
    await tc?.client.workflow
      .getHandle(rebuildWorkflowId(c))
      .terminate('test cleanup')
      .catch(() => undefined);
  await tc?.close();
  await temporal?.stop();
  await dbs?.drop();
});

/** Whether a workflow with the catalog's rebuild id exists. */
async function rebuildExists(client: Client, catalog: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(rebuildWorkflowId(catalog)).describe();
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/** Runs the CLI and measures how long it took (ms). */
async function timedCli(args: string[], e: NodeJS.ProcessEnv = env) {
  const t0 = Date.now();
  const r = await runCliAsync(args, e);
  return { ...r, ms: Date.now() - t0 };
}

/** The records of one worker process: its source names and the newest time (ms since epoch). */
async function recordsOf(w: WorkerProcess): Promise<{ names: string[]; at: number }> {
  const { rows } = await dbs.catalogPool.query<{ source_name: string; at: string }>(
    `SELECT source_name, (extract(epoch FROM recorded_at) * 1000)::text AS at FROM worker_source
      WHERE task_queue = $1 AND worker_identity LIKE $2 ORDER BY source_name`,
    [queue, `${w.pid}@%`],
  );
  return { names: rows.map((r) => r.source_name), at: Math.max(0, ...rows.map((r) => Number(r.at))) };
}

/** The version row of a catalog's latest rebuild, as the receipt shows it. */
async function versionRow(catalog: string) {
  const { rows } = await dbs.catalogPool.query<{
    version_id: string;
    pages_total: number;
    source_rows: string;
    watermark_key: string;
    watermark_time: string;
  }>(
    `SELECT version_id::text, pages_total, source_rows::text, watermark_key::text,
            to_char(watermark_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS watermark_time
       FROM version WHERE catalog_name = $1 ORDER BY version_id DESC LIMIT 1`,
    [catalog],
  );
  assert.equal(rows.length, 1, `a version of ${catalog}`);
  return rows[0];
}

test('the start decision: recent names accept or refuse (sorted); no worker waits 60 s by default, then exit 1', () => {
  const settings = startCheckSettings({});
  assert.deepEqual(settings, {
    workerWaitMs: 60_000,
    recordMaxAgeMs: 300_000,
    planWaitMs: 30_000,
    noPollerMs: 5_000,
    noPollerRepeatMs: 60_000,
    cancelWaitMs: 60_000,
    dryRunNoWorkerMs: 30_000,
    pollMs: 1_000,
  });
  const overridden = startCheckSettings({
    CATALOG_REBUILD_START_WORKER_WAIT_MS: '3000',
    CATALOG_REBUILD_START_SOURCE_MAX_AGE_MS: '2000',
    CATALOG_REBUILD_START_PLAN_WAIT_MS: 'x',
    CATALOG_REBUILD_START_DRY_RUN_NO_WORKER_MS: '4000',
    CATALOG_REBUILD_START_NO_POLLER_REPEAT_MS: '2000',
  });
  assert.deepEqual(overridden, {
    workerWaitMs: 3_000,
    recordMaxAgeMs: 2_000,
    planWaitMs: 30_000,
    noPollerMs: 5_000,
    noPollerRepeatMs: 2_000,
    cancelWaitMs: 60_000,
    dryRunNoWorkerMs: 4_000,
    pollMs: 1_000,
  });

  const base = { source: 'r18', taskQueue: 'Q', waitedMs: 0, settings };
  const served = {
    recentNames: ['r18', 'hidden', 'r18'],
    last: { recordedAt: '2026-01-01T00:00:00.000Z', ageSeconds: 3 },
  };
  assert.deepEqual(decideStart({ ...base, records: served }), { kind: 'accept' });
  assert.deepEqual(decideStart({ ...base, source: 'nosuch', records: served }), {
    kind: 'unknown-source',
    exitCode: 2,
    message: 'unknown source "nosuch"; the workers of task queue Q serve: hidden, r18',
  });

  const none = { recentNames: [], last: null };
  const waiting = decideStart({ ...base, records: none, waitedMs: 59_999 });
  assert.equal(waiting.kind, 'wait');
  assert.match((waiting as { message: string }).message, /no worker of task queue Q has recorded its sources yet/);
  assert.match((waiting as { message: string }).message, /waiting up to 60 s for a worker of task queue Q/);
  const gaveUp = decideStart({ ...base, records: none, waitedMs: 60_000 });
  assert.equal(gaveUp.kind, 'no-worker');
  assert.equal((gaveUp as { exitCode: number }).exitCode, 1);
  assert.match(
    (gaveUp as { message: string }).message,
    /^no worker of task queue Q appeared within 60 s: .*`npm run worker`/,
  );

  // Only stale records (workers gone for more than 5 min): wait as for none, saying when the last one was.
  const stale = { recentNames: [], last: { recordedAt: '2026-01-01T00:00:00.000Z', ageSeconds: 900 } };
  const staleWait = decideStart({ ...base, source: 'nosuch', records: stale });
  assert.equal(staleWait.kind, 'wait');
  assert.match(
    (staleWait as { message: string }).message,
    /within the last 5 min \(last at 2026-01-01T00:00:00.000Z\); waiting up to 60 s/,
  );
  // A catalog database before migration 3: no records; the final message says why.
  const old = decideStart({ ...base, records: { ...none, noTable: true }, waitedMs: 60_000 });
  assert.match((old as { message: string }).message, /predate migration 3 and do not record their sources/);
});

test('the receipt: version, pages and their sizing, rows, watermark; or that the plan was not seen', () => {
  const known = { catalog: 'main', workflowId: 'catalog-rebuild/main', taskQueue: 'Q', attached: false };
  const plan = {
    versionId: '12',
    pagesTotal: 40,
    sourceRows: '20000',
    watermark: { jobKey: '20000', time: '2026-11-01T20:00:00.000000Z' },
    answeredBy: 'database' as const,
  };
  assert.deepEqual(formatReceipt(buildReceipt({ ...known, pageSize: 500, pageSizing: 'fixed' }, plan), 100), [
    'planned version 12 of catalog main:',
    '  pages: 40 (500 jobs per page, fixed by --page-size)',
    '  rows: 20000 source rows at the watermark',
    '  watermark: job 20000 at 2026-11-01T20:00:00.000000Z',
  ]);
  // A refresh plan: what its planned event says, and the rows it reads.
  const refresh = {
    ...plan,
    versionId: '13',
    pagesTotal: 1,
    sourceRows: '62',
    pageSize: 2000,
    baseVersionId: '12',
    refreshNote: 'a refresh of version 12: 30 new, 32 changed and 70 deleted jobs in 1 pages',
  };
  assert.deepEqual(
    formatReceipt(buildReceipt({ ...known, pageSize: null, pageSizing: 'fixed', refresh: true }, refresh), 100),
    [
      'planned version 13 of catalog main:',
      '  a refresh of version 12: 30 new, 32 changed and 70 deleted jobs in 1 pages',
      "  pages: 1 (at most 2000 changed jobs per page, a refresh's fixed size)",
      '  rows: 62 new and changed jobs read from the source',
      '  watermark: job 20000 at 2026-11-01T20:00:00.000000Z',
    ],
  );
  const late = buildReceipt({ ...known, pageSize: null, pageSizing: 'auto' }, null);
  assert.equal(late.planned, false);
  assert.match(formatReceipt(late, 30_000)[0], /not planned within 30 s; it runs on/);
});

test('a worker records the names of its sources at start and refreshes them; a clean shutdown removes them', async () => {
  const first = await recordsOf(workers[0]);
  assert.deepEqual(first.names, ['hidden', 'r18'], 'names only, from the configuration');
  const settings = await dbs.catalogPool.query(`SELECT * FROM worker_source WHERE task_queue = $1`, [queue]);
  assert.deepEqual(Object.keys(settings.rows[0]).sort(), [
    'recorded_at',
    'source_name',
    'task_queue',
    'worker_identity',
  ]);
  await waitFor('a newer record of the worker', async () => (await recordsOf(workers[0])).at > first.at, {
    timeoutMs: 10_000,
    intervalMs: 100,
  });

  // A second worker on the queue records too; on SIGTERM it exits (the timer holds nothing) and its
  // records go: `start` no longer counts it as serving its sources.
  const second = await spawnWorker({ ...env, CATALOG_REBUILD_SOURCE_RECORD_INTERVAL_MS: '300' });
  workers.push(second);
  assert.deepEqual((await recordsOf(second)).names, ['hidden', 'r18']);
  second.kill('SIGTERM');
  const code = await within(second.exited, 20_000).then((c) => (c === 'timeout' ? 'still running' : c));
  assert.equal(code, 0, `the worker exits after SIGTERM:\n${second.output()}`);
  assert.deepEqual((await recordsOf(second)).names, [], 'a cleanly stopped worker removes its records');
  // More than three intervals (300 ms) of the stopped worker pass on the database's clock: the
  // other worker (every 500 ms) records at least that long after the exit was seen.
  const exitSeenAt = Number(
    (await dbs.catalogPool.query<{ t: string }>(`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::text AS t`))
      .rows[0].t,
  );
  await waitFor('a record of the other worker 900 ms after the exit', async () => {
    return (await recordsOf(workers[0])).at > exitSeenAt + 900;
  });
  assert.deepEqual((await recordsOf(second)).names, [], 'no record after shutdown');
  assert.deepEqual((await recordsOf(workers[0])).names, ['hidden', 'r18'], 'the other worker keeps its records');
});

test('start with a source no live worker serves exits 2 within 10 s naming the served sources; no workflow starts', async () => {
  // A source recorded 10 minutes ago by a worker long gone does not count.
  await dbs.catalogPool.query(
    `INSERT INTO worker_source (task_queue, worker_identity, source_name, recorded_at)
     VALUES ($1, '1@gone-host', 'ghost', now() - interval '10 minutes')`,
    [queue],
  );
  for (const source of ['nosuch', 'ghost']) {
    const catalog = `unknown-${source}`;
    const r = await timedCli(['start', '--catalog', catalog, '--source', source, '--wait']);
    assert.equal(r.code, 2, `${r.stdout}\n${r.stderr}`);
    assert.ok(r.ms < 10_000, `exit after ${r.ms} ms`);
    assert.equal(r.stderr.trim(), `unknown source "${source}"; the workers of task queue ${queue} serve: hidden, r18`);
    assert.equal(r.stdout, '');
    assert.equal(await rebuildExists(tc.client, catalog), false, 'no workflow was started');
  }
});

test('start prints the receipt once planned: version, pages, rows, watermark; --json prints one object', async () => {
  const catalog = 'receipt';
  catalogs.push(catalog);
  const r = await timedCli(['start', '--catalog', catalog, '--source', 'r18', '--page-size', '100', '--wait']);
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  const v = await versionRow(catalog);
  assert.equal(v.pages_total, 12);
  assert.equal(v.source_rows, String(JOBS));
  const lines = r.stdout.trimEnd().split('\n');
  assert.match(lines[0], new RegExp(`^started rebuild catalog-rebuild/${catalog} \\(task queue ${queue}\\)$`));
  assert.deepEqual(lines.slice(1, 5), [
    `planned version ${v.version_id} of catalog ${catalog}:`,
    '  pages: 12 (100 jobs per page, fixed by --page-size)',
    `  rows: ${JOBS} source rows at the watermark`,
    `  watermark: job ${v.watermark_key} at ${v.watermark_time}`,
  ]);
  assert.match(
    lines[5],
    new RegExp(`^catalog ${catalog}: version ${v.version_id} published; 12 pages`),
    'the receipt comes before the result',
  );

  const jsonCatalog = 'receipt-json';
  catalogs.push(jsonCatalog);
  const j = await timedCli(['start', '--catalog', jsonCatalog, '--source', 'hidden', '--json']);
  assert.equal(j.code, 0, `${j.stdout}\n${j.stderr}`);
  const receipt = JSON.parse(j.stdout);
  const w = await versionRow(jsonCatalog);
  assert.deepEqual(receipt, {
    catalog: jsonCatalog,
    workflowId: `catalog-rebuild/${jsonCatalog}`,
    taskQueue: queue,
    attached: false,
    files: false,
    refresh: false,
    requestedPageSize: null,
    baseVersionId: null,
    refreshNote: null,
    planned: true,
    versionId: w.version_id,
    pagesTotal: 2,
    pageSize: 1000,
    pageSizing: 'auto',
    sourceRows: JOBS,
    watermark: { jobKey: w.watermark_key, time: w.watermark_time },
    answeredBy: 'database',
  });
  const done = await runCliAsync(['wait', '--catalog', jsonCatalog], env);
  assert.equal(done.code, 0, `${done.stdout}\n${done.stderr}`);
});

test("start while the catalog's rebuild is being cancelled waits for it to end, then starts a new one: not attached; a scheduled launch is retried", async () => {
  const catalog = 'recancel';
  catalogs.push(catalog);
  const { handle } = await startRebuild(
    tc.client,
    { catalog, source: 'r18', pageSize: 100, concurrency: 1, pauseBetweenPagesMs: 60_000 },
    { taskQueue: queue },
  );
  await waitFor('the first rebuild copying', async () => (await getProgress(handle)).phase === 'copying');
  const first = await versionRow(catalog);
  const firstRunId = (await handle.describe()).runId;
  // The test holds the version row: the cancelled rebuild's endVersion waits for it, so the rebuild
  // stays "being cancelled" until the test lets go.
  const lock = await dbs.catalogPool.connect();
  let cli: ReturnType<typeof startCli>;
  try {
    await lock.query('BEGIN');
    await lock.query('SELECT 1 FROM version WHERE version_id = $1 FOR UPDATE', [first.version_id]);
    await cancel(handle, 'test');
    cli = startCli(['start', '--catalog', catalog, '--source', 'r18', '--page-size', '100', '--json'], env);
    await waitFor('start says it waits for the cancelled rebuild', () =>
      cli
        .stderr()
        .includes(
          `the rebuild catalog-rebuild/${catalog} is being cancelled: waiting up to 60 s for it to end before a new one starts`,
        ),
    );
    assert.equal((await handle.describe()).status.name, 'RUNNING', 'still being cancelled while the row is held');
    // A scheduled refresh's launch does not attach to it either: retryable, so a retry starts the refresh.
    const launch = new MockActivityEnvironment({ taskQueue: queue }).run(
      launchRefresh,
      { client: tc.client } as ActivityContext,
      {
        catalog,
        source: 'r18',
        files: false,
        launcherWorkflowId: `catalog-rebuild/${catalog}/scheduled-test`,
        launcherRunId: 'run-1',
      },
    );
    await assert.rejects(launch, (e: unknown) => {
      assert.ok(e instanceof ApplicationFailure);
      assert.equal(e.type, 'REBUILD_CANCELLING');
      assert.equal(e.nonRetryable, false);
      return true;
    });
  } finally {
    await lock.query('COMMIT');
    lock.release();
  }
  const r = await cli.done;
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  const receipt = JSON.parse(r.stdout);
  const second = await versionRow(catalog);
  assert.equal(receipt.attached, false);
  assert.equal(receipt.versionId, second.version_id);
  assert.ok(BigInt(second.version_id) > BigInt(first.version_id), 'a new version was planned');
  const cancelled = tc.client.workflow.getHandle(rebuildWorkflowId(catalog), firstRunId);
  assert.equal((await cancelled.describe()).status.name, 'CANCELLED');
  const { rows } = await dbs.catalogPool.query<{ status: string }>(`SELECT status FROM version WHERE version_id = $1`, [
    first.version_id,
  ]);
  // Abandoned by the cancel, then dropped by the new rebuild's plan (it drops superseded versions).
  assert.ok(['abandoned', 'dropped'].includes(rows[0].status), rows[0].status);
  const done = await runCliAsync(['wait', '--catalog', catalog], env);
  assert.equal(done.code, 0, `${done.stdout}\n${done.stderr}`);
});

test('start with no worker on the task queue waits for one, then exits 1 naming the queue and npm run worker', async () => {
  const lonely = uniqueQueue('noworker');
  const e = {
    ...testEnv({ address: temporal.address, configFile, taskQueue: lonely }),
    CATALOG_REBUILD_START_WORKER_WAIT_MS: '3000',
  };
  const r = await timedCli(['start', '--catalog', 'nobody', '--source', 'r18'], e);
  assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
  assert.match(
    r.stderr,
    new RegExp(`no worker of task queue ${lonely} has recorded its sources yet; waiting up to 3 s`),
  );
  assert.match(
    r.stderr,
    new RegExp(
      `catalog-rebuild: no worker of task queue ${lonely} appeared within 3 s: start one with \`npm run worker\``,
    ),
  );
  assert.ok(r.ms >= 3_000 && r.ms < 15_000, `exit after ${r.ms} ms`);
  assert.equal(await rebuildExists(tc.client, 'nobody'), false, 'no workflow was started');

  // A worker that appears during the wait lets the start go on.
  const later = uniqueQueue('later');
  const le = testEnv({ address: temporal.address, configFile, taskQueue: later });
  catalogs.push('later');
  const pending = startCli(['start', '--catalog', 'later', '--source', 'r18', '--page-size', '600', '--wait'], le);
  await waitFor('start to wait for a worker', () =>
    /has recorded its sources yet; waiting up to/.test(pending.stderr()),
  );
  workers.push(await spawnWorker(le));
  const ok = await pending.done;
  assert.equal(ok.code, 0, `${ok.stdout}\n${ok.stderr}`);
  assert.match(
    ok.stderr,
    new RegExp(`no worker of task queue ${later} has recorded its sources yet; waiting up to 60 s`),
  );
  assert.match(ok.stdout, /pages: 2 \(600 jobs per page, fixed by --page-size\)/);
  assert.match(ok.stdout, /version \d+ published; 2 pages/);
});

test('the no-poller line: only for a task no worker took for noPollerMs; the Ctrl-C lines name the follow-up commands', () => {
  const task = { scheduled: true, scheduledAt: '1.0' };
  const at = (waitedMs: number, t: typeof task | null = task) =>
    noPollerLine({ task: t, waitedMs, taskQueue: 'Q', noPollerMs: 5_000 });
  assert.equal(at(4_999), null);
  assert.equal(at(60_000, { ...task, scheduled: false }), null, 'a worker took it');
  assert.equal(at(60_000, null), null, 'no task waits');
  assert.match(
    at(5_000)!,
    /^no worker polls task queue Q: .* start one with `npm run worker` \(CATALOG_REBUILD_TASK_QUEUE=Q\)/,
  );
  assert.equal(startCheckSettings({}).noPollerMs, 5_000);
  assert.deepEqual(interruptedLines('c', 'catalog-rebuild/c'), [
    'interrupted: rebuild catalog-rebuild/c goes on; Ctrl-C stopped only this command',
    '  follow it:        catalog-rebuild status --catalog c --follow',
    '  wait for its end: catalog-rebuild wait --catalog c',
    '  stop it:          catalog-rebuild cancel --catalog c',
  ]);
});

test('start right after the only worker died says no worker polls the queue within its wait, and again while --wait waits; Ctrl-C says the rebuild goes on', async () => {
  const deadQueue = uniqueQueue('dead');
  const de = testEnv({ address: temporal.address, configFile, taskQueue: deadQueue });
  const w = await spawnWorker({ ...de, CATALOG_REBUILD_SOURCE_RECORD_INTERVAL_MS: '500' });
  await waitFor('the worker to record its sources', async () => {
    const { rows } = await dbs.catalogPool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM worker_source WHERE task_queue = $1`,
      [deadQueue],
    );
    return rows[0].n > 0;
  });
  w.kill('SIGKILL');
  await w.exited;

  const catalog = 'dead-worker';
  catalogs.push(catalog);
  const t0 = Date.now();
  const pending = startCli(['start', '--catalog', catalog, '--source', 'r18', '--wait'], {
    ...de,
    CATALOG_REBUILD_START_PLAN_WAIT_MS: '12000',
    CATALOG_REBUILD_START_NO_POLLER_REPEAT_MS: '2000',
  });
  const noPoller = new RegExp(
    `no worker polls task queue ${deadQueue}: the rebuild's workflow task has waited \\d+(\\.\\d)? s and no worker took it .*start one with \`npm run worker\` \\(CATALOG_REBUILD_TASK_QUEUE=${deadQueue}\\)`,
  );
  await waitFor('start to name the missing worker', () => noPoller.test(pending.stderr()), { timeoutMs: 20_000 });
  const namedAfter = Date.now() - t0;
  assert.ok(namedAfter < 12_000, `named within the plan wait (after ${namedAfter} ms)`);
  assert.doesNotMatch(pending.stdout(), /not planned within/, 'before the plan wait ended');
  assert.match(
    pending.stdout(),
    new RegExp(`^started rebuild catalog-rebuild/${catalog} \\(task queue ${deadQueue}\\)`),
  );
  // Past the plan wait, --wait goes on waiting, and names the missing worker again (every 2 s here,
  // every minute by default) rather than falling silent.
  await waitFor('the receipt of a rebuild not planned', () => /not planned within 12 s/.test(pending.stdout()), {
    timeoutMs: 30_000,
  });
  const namedBefore = pending.stderr().match(new RegExp(noPoller.source, 'g'))?.length ?? 0;
  await waitFor(
    'start --wait to name the missing worker again',
    () => (pending.stderr().match(new RegExp(noPoller.source, 'g'))?.length ?? 0) > namedBefore,
    { timeoutMs: 20_000 },
  );
  // The wait it names goes on from the task's first sighting: past the 12 s plan wait.
  const waited = [...pending.stderr().matchAll(/has waited (\d+(?:\.\d)?) s/g)].map((m) => Number(m[1]));
  assert.ok(waited[waited.length - 1] >= 12, `the repeated line names the whole wait: ${waited.join(', ')} s`);

  pending.signal('SIGINT');
  const r = await pending.done;
  assert.equal(r.code, null, `ended by SIGINT: ${r.stdout}\n${r.stderr}`);
  const tail = r.stderr.trimEnd().split('\n').slice(-4);
  assert.deepEqual(tail, interruptedLines(catalog, `catalog-rebuild/${catalog}`));
  const d = await tc.client.workflow.getHandle(rebuildWorkflowId(catalog)).describe();
  assert.equal(d.status.name, 'RUNNING', 'the rebuild goes on');

  // A dry run changes nothing: no worker took it within its limit, it is ended and start exits 1.
  const dry = await startCli(['start', '--catalog', catalog, '--source', 'r18', '--dry-run', '--json'], {
    ...de,
    CATALOG_REBUILD_START_DRY_RUN_NO_WORKER_MS: '3000',
  }).done;
  assert.equal(dry.code, 1, `${dry.stdout}\n${dry.stderr}`);
  assert.equal(dry.stdout, '', '--json prints nothing but the plan');
  assert.match(
    dry.stderr,
    new RegExp(
      `no worker polls task queue ${deadQueue}: the dry run's workflow task waited \\d+ s and no worker took it .*it was ended, nothing changed`,
    ),
  );
  await waitFor('the dry run to show as terminated', async () => {
    const seen: string[] = [];
    for await (const w of tc.client.workflow.list({
      query: `WorkflowId STARTS_WITH 'catalog-rebuild/${catalog}/dry-run-'`,
    }))
      seen.push(w.status.name);
    return seen.length === 1 && seen[0] === 'TERMINATED';
  });
});

test('start --wait says no worker takes the pages when the only worker died mid-copy, and the rebuild goes on once one polls', async () => {
  const q = uniqueQueue('midcopy');
  const qe = testEnv({ address: temporal.address, configFile, taskQueue: q });
  const heldFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-midcopy-')), 'held');
  // The only worker holds page 1 inside its page transaction, and is killed there.
  const a = await spawnWorker({
    ...qe,
    CATALOG_REBUILD_FAULTS: JSON.stringify({
      holdWhileStreaming: { pageNo: 1, attempt: 1, heldFile, releaseFile: `${heldFile}.release` },
    }),
  });
  const catalog = 'mid-copy';
  catalogs.push(catalog);
  const pending = startCli(
    [
      'start',
      '--catalog',
      catalog,
      '--source',
      'r18',
      '--page-size',
      '400',
      '--concurrency',
      '1',
      '--heartbeat-timeout-ms',
      '2000',
      '--wait',
    ],
    { ...qe, CATALOG_REBUILD_START_NO_POLLER_REPEAT_MS: '2000' },
  );
  await waitFor('page 1 held inside its transaction', () => fs.existsSync(heldFile), { timeoutMs: 60_000 });
  a.kill('SIGKILL');
  await a.exited;
  // After its heartbeat timeout page 1 waits for a worker, and none takes it: --wait says so.
  const line = new RegExp(
    `no worker takes the rebuild's work from task queue ${q}: its activity \\(page 1\\) has waited \\d+(\\.\\d)? s and none runs .*start one with \`npm run worker\` \\(CATALOG_REBUILD_TASK_QUEUE=${q}\\)`,
  );
  await waitFor('start --wait to say no worker takes page 1', () => line.test(pending.stderr()), {
    timeoutMs: 60_000,
    detail: () => pending.stderr(),
  });
  assert.doesNotMatch(pending.stderr(), /workflow task has waited/, 'the workflow task was never the one waiting');
  workers.push(await spawnWorker(qe));
  const r = await pending.done;
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /version \d+ published; 3 pages/);
});
