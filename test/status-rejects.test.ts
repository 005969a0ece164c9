/**
 * `status`, `rejects` and the renumbered-jobs report against a private Temporal dev server (with
 * Temporal's workflow pause enabled), real PostgreSQL, real worker processes and the real
 * `temporal` CLI, on one source (600 jobs, maxRejects 1) and the catalogs a, b and c:
 * - `start --wait` and `events` report the job ids renumbered in the source (`UPDATE job SET jobid
 *   = jobid + 5000000`) when catalog a is rebuilt again;
 * - `rejects` lists a's quarantined record (a negative jobbytes) as text and JSON, `--version`
 *   picks another version, a missing version exits 1, a bad one 2;
 * - with no worker left (a `progress` query would wait 5 s), `status` of a published (a) and of a
 *   failed rebuild (b: one reject more than allowed) answers within 2 s (the CLI process's wall
 *   time), exits 0 and reports the result or the failure, the catalog database's view and the
 *   renumbered jobs; a catalog never rebuilt exits 1;
 * - rebuild c's page activity held by the slow-page fault and paused with `temporal activity
 *   pause`, and then the whole rebuild paused with `temporal workflow pause`, show in `status`.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { ensureTemporalCli } from '../dev/env/temporal-cli';
import { freePort, waitForTemporal } from '../dev/env/dev-server';
import { WorkerFleet } from '../dev/harness/faults';
import type { TestDatabases } from '../dev/harness/harness';
import { runCliAsync, temporalClient, testDatabases, testEnv, uniqueQueue, writeConfig } from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';
import { startRebuild } from '../client';

const execFileP = promisify(execFile);
/**
 * `status` of a closed rebuild must not ask the `progress` query (with no worker left it would wait
 * for its 5 s timeout and say `no worker answered the progress query`): a run shorter than this,
 * CLI start-up included, did not wait for it (ms). Not a speed bound: a loaded machine took up to
 * 2.9 s for a run that asked nothing.
 */
const ANSWER_MS = 5_000;
/** What `status` prints when it asked the `progress` query and no worker answered. */
const ASKED = /no worker answered the progress query/;

let server: { address: string; child: ChildProcess; dir: string };
let cli: string;
let dbs: TestDatabases;
let env: NodeJS.ProcessEnv;
let fleet: WorkerFleet;
let client: Awaited<ReturnType<typeof temporalClient>>;
/** The record quarantined in every rebuild of catalog `a` (its jobid before the renumbering). */
let badJobId: number;

/** A dev server with the harness's settings (Temporal's own workflow pause enabled), started as its own process group. */
async function devServerWithWorkflowPause(): Promise<typeof server> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-status-'));
  const port = await freePort();
  const out = fs.openSync(path.join(dir, 'server.log'), 'a');
  const child = spawn(
    cli,
    [
      ...['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--headless'],
      ...['--db-filename', path.join(dir, 'temporal.db'), '--log-level', 'warn'],
      ...['--search-attribute', 'CatalogName=Keyword', '--search-attribute', 'RebuildPhase=Keyword'],
      ...['--dynamic-config-value', 'frontend.WorkflowPauseEnabled=true'],
    ],
    { stdio: ['ignore', out, out], detached: true },
  );
  fs.closeSync(out);
  const address = `127.0.0.1:${port}`;
  await waitForTemporal(address, 60_000);
  return { address, child, dir };
}

/** The official Temporal CLI against the private server. */
async function temporal(args: string[]): Promise<string> {
  const { stdout } = await execFileP(cli, [...args, '--address', server.address, '--namespace', 'default'], {
    timeout: 60_000,
  });
  return stdout;
}

/** Our CLI as a process; `ms` is its wall time (start-up included). */
async function catalogRebuild(args: string[], extraEnv: NodeJS.ProcessEnv = env) {
  const t0 = Date.now();
  const r = await runCliAsync(args, extraEnv);
  return { ...r, ms: Date.now() - t0, all: `${r.stdout}\n${r.stderr}` };
}

/**
 * `status` run until one run answers within `withinMs` (default {@link ANSWER_MS}; at most 3 runs: a loaded machine may
 * stretch one run, but a run that sent the `progress` query with no worker left takes at least 5 s);
 * returns the fastest run and every run's time.
 */
async function timedStatus(args: string[], withinMs = ANSWER_MS) {
  const runs: Awaited<ReturnType<typeof catalogRebuild>>[] = [];
  while (runs.length < 3 && !runs.some((r) => r.ms < withinMs)) runs.push(await catalogRebuild(['status', ...args]));
  const best = runs.reduce((a, b) => (b.ms < a.ms ? b : a));
  return { ...best, times: runs.map((r) => `${r.ms} ms`).join(', ') };
}

before(async () => {
  cli = ensureTemporalCli();
  server = await devServerWithWorkflowPause();
  dbs = await testDatabases('statusrej');
  await dbs.generateSource({ jobs: 600, seed: 15 });
  env = testEnv({
    address: server.address,
    configFile: writeConfig(dbs, { maxRejects: 1 }),
    taskQueue: uniqueQueue('statusrej'),
  });
  fleet = new WorkerFleet(env);
  client = await temporalClient(server.address);
});

after(async () => {
  await fleet?.stopAll();
  for (const id of ['catalog-rebuild/c'])
    await client?.client.workflow
      .getHandle(id)
      .terminate('test cleanup')
      .catch(() => undefined);
  await client?.close();
  await dbs?.drop();
  if (server) {
    const exited = new Promise((r) => server.child.once('exit', r));
    process.kill(-server.child.pid!, 'SIGKILL');
    await exited;
    fs.rmSync(server.dir, { recursive: true, force: true });
  }
});

test('start --wait and events report job ids renumbered in the source', async () => {
  await fleet.spawn();
  badJobId = (
    await dbs.sourcePool.query<{ id: number }>(`SELECT jobid AS id FROM job ORDER BY jobid OFFSET 50 LIMIT 1`)
  ).rows[0].id;
  await dbs.sourcePool.query(`UPDATE job SET jobbytes = -5 WHERE jobid = $1`, [badJobId]);
  const first = await catalogRebuild([
    'start',
    '--catalog',
    'a',
    '--source',
    'director',
    '--page-size',
    '100',
    '--wait',
  ]);
  assert.equal(first.code, 0, first.all);
  assert.match(first.stdout, /version \d+ published; 6 pages, 599 rows, 1 rejects/);
  assert.doesNotMatch(first.stdout, /renumbered/, 'nothing to compare with on the first publish');

  // The source is re-created with other job ids: the same unique job names, ids + 5,000,000.
  await dbs.sourcePool.query(`UPDATE job SET jobid = jobid + 5000000`);
  const second = await catalogRebuild([
    'start',
    '--catalog',
    'a',
    '--source',
    'director',
    '--page-size',
    '100',
    '--wait',
  ]);
  assert.equal(second.code, 0, second.all);
  const sentence =
    /^100\+ jobs renumbered: the same unique job names now have other job ids \(e\.g\. (\S+): (\d+) → (\d+)\)$/m;
  const m = sentence.exec(second.stdout);
  assert.ok(m, second.stdout);
  assert.equal(Number(m[3]), Number(m[2]) + 5_000_000);
  const named = await dbs.sourcePool.query(`SELECT 1 FROM job WHERE job = $1 AND jobid = $2`, [m[1], Number(m[3])]);
  assert.equal(named.rowCount, 1, 'the example names a job of the source with its new id');

  const events = await catalogRebuild(['events', '--catalog', 'a']);
  assert.equal(events.code, 0, events.all);
  assert.match(events.stdout, /v\d+ {2}published {4}version \d+ published, replacing version \d+/);
  assert.match(events.stdout, /v\d+ {2}published {4}100\+ jobs renumbered: the same unique job names now have other/);
});

test('rejects lists the quarantined record of the active version (text, JSON, --version) with its reason', async () => {
  const text = await catalogRebuild(['rejects', '--catalog', 'a']);
  assert.equal(text.code, 0, text.all);
  const lines = text.stdout.trim().split('\n');
  assert.match(lines[0], /^catalog a version (\d+) \(active; the active version\):$/);
  assert.match(
    lines[1],
    new RegExp(
      `^job key ${badJobId + 5_000_000} · job id ${badJobId + 5_000_000} · bucket \\d{4}-\\d{2}-\\d{2} · bytes: must be a non-negative whole number.*"-5"`,
    ),
  );
  assert.equal(lines[2], '1 quarantined record');
  assert.equal(lines.length, 3);
  const json = await catalogRebuild(['rejects', '--catalog', 'a', '--json']);
  assert.equal(json.code, 0, json.all);
  const rows = JSON.parse(json.stdout) as Record<string, unknown>[];
  assert.equal(rows.length, 1);
  assert.equal(rows[0].jobKey, String(badJobId + 5_000_000));
  assert.equal(rows[0].jobId, String(badJobId + 5_000_000));
  assert.match(String(rows[0].bucket), /^\d{4}-\d{2}-\d{2}$/);
  assert.match(String(rows[0].reason), /^bytes: must be a non-negative whole number/);
  assert.match(String(rows[0].raw), /-5/);
  assert.equal(typeof rows[0].pageNo, 'number');
  assert.ok(!Number.isNaN(Date.parse(String(rows[0].createdAt))));
  // --version: the first version's record (its old id); no such version exits 1; a bad value 2.
  const v1 = await catalogRebuild(['rejects', '--catalog', 'a', '--version', String(Number(rows[0].versionId) - 1)]);
  assert.equal(v1.code, 0, v1.all);
  assert.match(v1.stdout, new RegExp(`\\(retired; as requested\\):\\njob key ${badJobId} · `));
  assert.equal((await catalogRebuild(['rejects', '--catalog', 'a', '--version', '999999'])).code, 1);
  assert.equal((await catalogRebuild(['rejects', '--catalog', 'a', '--version', 'x'])).code, 2);
  const none = await catalogRebuild(['rejects', '--catalog', 'never']);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /catalog never has no version/);
});

test('with no worker, status of a published and of a failed rebuild answers without asking the progress query and exits 0', async (t) => {
  // A second bad record is one more than maxRejects: catalog b's rebuild fails at reconciliation.
  await dbs.sourcePool.query(
    `UPDATE job SET readbytes = -1 WHERE jobid = (SELECT jobid FROM job ORDER BY jobid OFFSET 150 LIMIT 1)`,
  );
  const failed = await catalogRebuild([
    'start',
    '--catalog',
    'b',
    '--source',
    'director',
    '--page-size',
    '100',
    '--wait',
  ]);
  assert.equal(failed.code, 1, failed.all);
  await fleet.stopAll(); // from here on a progress query would wait 5 s for an answer

  const published = await timedStatus(['--catalog', 'a']);
  t.diagnostic(`status of the published rebuild: ${published.times}`);
  assert.equal(published.code, 0, published.all);
  assert.ok(published.ms < ANSWER_MS, `status took ${published.times}:\n${published.all}`);
  assert.doesNotMatch(published.all, ASKED);
  assert.match(published.stdout, /^catalog a: rebuild catalog-rebuild\/a completed at \S+Z$/m);
  assert.match(published.stdout, /^catalog a: version (\d+) published; 6 pages, 599 rows, 1 rejects/m);
  assert.match(published.stdout, /^reconciliation: ok: /m);
  assert.match(published.stdout, /^100\+ jobs renumbered: the same unique job names now have other job ids \(e\.g\./m);
  assert.match(published.stdout, /^catalog database: version \d+ active · 6\/6 pages committed \(checkpoint 6\)/m);
  assert.match(published.stdout, /^last event: /m);
  const pj = await timedStatus(['--catalog', 'a', '--json']);
  assert.equal(pj.code, 0, pj.all);
  assert.ok(pj.ms < ANSWER_MS, `status --json took ${pj.times}`);
  assert.doesNotMatch(pj.all, ASKED);
  const p = JSON.parse(pj.stdout);
  assert.equal(p.answeredBy, 'temporal');
  assert.equal(p.workflowStatus, 'COMPLETED');
  assert.equal(p.phase, 'done');
  assert.deepEqual([p.pagesDone, p.checkpoint, p.rowsUpserted, p.rejects], [6, 6, 599, 1]);
  assert.equal(p.renumbered.count, 100);
  assert.equal(p.renumbered.truncated, true);

  const fail = await timedStatus(['--catalog', 'b']);
  t.diagnostic(`status of the failed rebuild: ${fail.times}`);
  assert.equal(fail.code, 0, fail.all);
  assert.ok(fail.ms < ANSWER_MS, `status of the failed rebuild took ${fail.times}`);
  assert.doesNotMatch(fail.all, ASKED);
  assert.match(
    fail.stdout,
    /^rebuild of b failed, not published: 2 source records of director are quarantined, more than the threshold of 1/m,
  );
  assert.match(fail.stdout, /^catalog database: version \d+ failed/m);
  assert.match(fail.stdout, /^no active version: catalog b was never published$/m);
  const fj = JSON.parse((await catalogRebuild(['status', '--catalog', 'b', '--json'])).stdout);
  assert.equal(fj.workflowStatus, 'FAILED');
  assert.equal(fj.phase, 'failed');
  assert.match(fj.failure, /quarantined, more than the threshold of 1/);
  assert.equal(fj.rejects, 2);
  // No active version: rejects shows the newest version with quarantined records.
  const rb = await catalogRebuild(['rejects', '--catalog', 'b']);
  assert.equal(rb.code, 0, rb.all);
  assert.match(rb.stdout, /^catalog b version \d+ \(failed; no active version; the newest version with quarantined/);
  assert.match(rb.stdout, /^2 quarantined records$/m);

  const never = await catalogRebuild(['status', '--catalog', 'never']);
  assert.equal(never.code, 1, never.all);
  assert.match(never.stderr, /no rebuild of catalog never has been started/);
});

test('a page activity paused with temporal activity pause shows in status', async () => {
  // Page 2's first attempt sleeps inside its transaction: it is the running page activity to pause.
  await fleet.spawn({ CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 2, ms: 60_000 } }) });
  const { handle } = await startRebuild(
    client.client,
    { catalog: 'c', source: 'director', pageSize: 100, concurrency: 1 },
    { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
  );
  const activityId = await waitFor(
    'page 2 running',
    async () => {
      const d = await handle.describe();
      const a = (d.raw.pendingActivities ?? []).find(
        (x) => x.activityType?.name === 'copyPage' && x.heartbeatDetails?.payloads?.length,
      );
      const details = a ? JSON.parse(Buffer.from(a.heartbeatDetails!.payloads![0].data!).toString()) : null;
      return details?.pageNo === 2 ? a!.activityId! : null;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  await temporal(['activity', 'pause', '--workflow-id', handle.workflowId, '--activity-id', activityId]);
  const s = await catalogRebuild(['status', '--catalog', 'c']);
  assert.equal(s.code, 0, s.all);
  assert.match(s.stdout, /^c: copying · version \d+ · page 1\/6/m, 'the workflow answers the query');
  assert.match(
    s.stdout,
    new RegExp(
      `^page 2 is paused by an operator \\(temporal activity pause by \\S+ since \\S+Z\\); resume it with: temporal activity unpause --workflow-id catalog-rebuild/c --activity-id ${activityId}$`,
      'm',
    ),
  );
  const sj = JSON.parse((await catalogRebuild(['status', '--catalog', 'c', '--json'])).stdout);
  assert.equal(sj.answeredBy, 'workflow');
  assert.deepEqual(sj.operatorPausedPages, [2]);
});

test('a rebuild paused with temporal workflow pause shows as such in status, at once', async (t) => {
  await temporal(['workflow', 'pause', '--workflow-id', 'catalog-rebuild/c', '--reason', 'maintenance window']);
  const w = await timedStatus(['--catalog', 'c'], 5_000);
  t.diagnostic(`status of the paused workflow: ${w.times}`);
  assert.equal(w.code, 0, w.all);
  assert.ok(w.ms < 5_000, `status of a paused workflow took ${w.times}: it waits for no query`);
  assert.match(
    w.stdout,
    /^rebuild catalog-rebuild\/c is paused by Temporal's workflow pause \(temporal workflow pause by \S+ since \S+Z: maintenance window\): .*temporal workflow unpause --workflow-id catalog-rebuild\/c; this is the catalog database's view/m,
  );
  assert.match(w.stdout, /^page 2 is paused by an operator/m);
  const wj = JSON.parse((await catalogRebuild(['status', '--catalog', 'c', '--json'])).stdout);
  assert.equal(wj.workflowStatus, 'PAUSED');
  assert.equal(wj.workflowPause.reason, 'maintenance window');
  assert.equal(wj.latest.status, 'building');
});
