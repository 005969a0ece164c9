/**
 * Two clones of the project on one Temporal server and one PostgreSQL server run `npm run demo`
 * without seeing or touching each other (dev/demo/identity.ts, state.ts):
 * - both demos, run at the same time, publish their own catalog in their own databases, on their
 *   own task queues, and neither names the other's catalog, queue or workers;
 * - a second demo of one clone while the first runs refuses to start, and stops nothing;
 * - the second demo of a clone publishes a new version of its own catalog, names a worker started
 *   by hand on its queue, counts its pages truthfully, and leaves it running;
 * - a demo whose catalog has a rebuild it did not start refuses and leaves that rebuild running;
 * - a demo interrupted by Ctrl-C leaves its rebuild running; the next demo of that clone terminates
 *   it (its state file names it) and publishes.
 * A "clone" is a folder whose entries (dist, bin, node_modules, ...) link to this project's; the demo runs from it
 * with --preserve-symlinks, so its project root (and so its names and .data/) is that folder.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { dropDatabase, resolveAdminUrl } from '../dev/env/postgres';
import type { DemoIdentity } from '../dev/demo/identity';
import { demoIdentity } from '../dev/demo/identity';
import type { WorkerProcess } from '../dev/harness/harness';
import { privateTemporal, spawnWorker, temporalClient } from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';
import { startRebuild } from '../client';
import { projectRoot } from '../lib/paths';

type Temporal = Awaited<ReturnType<typeof privateTemporal>>;
let temporal: Temporal;
let adminUrl: string;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-clones-'));
const clones: DemoIdentity[] = [];

/** A folder that runs this build as a clone of its own: every entry of the project but .data and .git linked. */
function makeClone(name: string): DemoIdentity {
  const root = path.join(dir, name);
  fs.mkdirSync(root);
  for (const f of fs.readdirSync(projectRoot())) {
    if (f === '.data' || f === '.git') continue;
    fs.symlinkSync(fs.realpathSync(path.join(projectRoot(), f)), path.join(root, f));
  }
  const id = demoIdentity(root);
  clones.push(id);
  return id;
}

/** A demo run of a clone: its output so far and its end. */
interface DemoRun {
  out(): string;
  /** Sends `signal` to the demo process (SIGINT: Ctrl-C). */
  signal(signal: NodeJS.Signals): void;
  done: Promise<{ code: number | null; out: string }>;
}

function runDemo(id: DemoIdentity): DemoRun {
  const child = spawn(
    process.execPath,
    [
      '--preserve-symlinks',
      '--preserve-symlinks-main',
      path.join(id.projectRoot, 'dist/dev/demo/main.js'),
      '--jobs',
      '2000',
      '--page-size',
      '200',
      // The killed worker's pages wait for this before their retry (the default 15 s, four times over).
      '--heartbeat-timeout-ms',
      '3000',
      '--temporal-port',
      String(temporal.port),
    ],
    {
      cwd: id.projectRoot,
      env: { ...process.env, TEMPORAL_CLI_PATH: temporal.cli, DATABASE_URL: adminUrl },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 300_000,
    },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return {
    out: () => out,
    signal: (sig) => void child.kill(sig),
    done: new Promise((resolve) => child.on('exit', (code) => resolve({ code, out }))).then((r) => ({
      ...(r as { code: number | null; out: string }),
      out: unwrap((r as { out: string }).out),
    })),
  };
}

/**
 * The demo's output with its wrapped lines joined again (a continuation line is indented 6 or more
 * columns), after checking that every line fits 80 columns unless it is one unbreakable word or a
 * line to paste (export, a command).
 */
function unwrap(out: string): string {
  for (const line of out.split('\n')) {
    if (line.length <= 80) continue;
    const text = line.trim();
    assert.ok(!text.includes(' ') || /^(export|node) /.test(text), `a line over 80 columns: ${JSON.stringify(line)}`);
  }
  return out.replace(/\n {6,}/g, ' ');
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

before(async () => {
  adminUrl = await resolveAdminUrl();
  temporal = await privateTemporal();
});

after(async () => {
  await temporal?.stop();
  for (const id of clones) {
    await dropDatabase(adminUrl, id.catalogDatabase).catch(() => undefined);
    await dropDatabase(adminUrl, id.sourceDatabase).catch(() => undefined);
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('two clones run their demos on one server without seeing or touching each other', async (t) => {
  const a = makeClone('clone-a');
  const b = makeClone('clone-b');
  for (const k of ['catalog', 'sourceDatabase', 'catalogDatabase', 'taskQueue', 'deploymentName'] as const)
    assert.notEqual(a[k], b[k], `${k} belongs to the checkout`);
  assert.deepEqual(demoIdentity(a.projectRoot + '/'), a, 'the same path gives the same names');

  // Both at once; a second demo of clone A while its first runs refuses and stops nothing.
  const runA = runDemo(a);
  const runB = runDemo(b);
  let exited = false;
  void runA.done.then(() => (exited = true));
  await waitFor(
    'clone A to start its worker',
    () => {
      if (exited) throw new Error(`clone A's demo ended:\n${runA.out()}`);
      return /worker 1 \(pid \d+\) polls/.test(runA.out());
    },
    { timeoutMs: 120_000, rethrow: true },
  ).catch((err: Error) => assert.fail(`${err.message}\n${runA.out()}`));
  const again = await runDemo(a).done;
  assert.equal(again.code, 1, again.out);
  assert.match(again.out, /another demo of this checkout is running \(pid \d+\)/);
  const [doneA, doneB] = await Promise.all([runA.done, runB.done]);
  assert.equal(doneA.code, 0, doneA.out);
  assert.equal(doneB.code, 0, doneB.out);
  for (const [mine, other, out] of [
    [a, b, doneA.out],
    [b, a, doneB.out],
  ] as const) {
    assert.match(out, new RegExp(`catalog +${mine.catalog} \\(database ${mine.catalogDatabase}\\)`));
    assert.match(out, new RegExp(`export CATALOG_REBUILD_TASK_QUEUE=${mine.taskQueue}`));
    assert.match(out, /versions +version 1 active \(this run\)/);
    // Only this demo's workers committed pages, 10 in all (worker 1 may have committed every page before
    // its kill landed, when its last page was already committing).
    const byWorker = /pages by worker +(.*)/.exec(out)![1];
    const counts = [...byWorker.matchAll(/worker [12] \(pid \d+\) (\d+)/g)].map((m) => Number(m[1]));
    assert.equal(
      counts.reduce((n, c) => n + c, 0),
      10,
      byWorker,
    );
    assert.equal(byWorker.replace(/worker [12] \(pid \d+\) \d+(, )?/g, ''), '', byWorker);
    assert.doesNotMatch(out, /not started by this demo/, 'no other worker polls its queue');
    for (const name of [other.catalog, other.taskQueue, other.catalogDatabase]) assert.ok(!out.includes(name), name);
    assert.doesNotMatch(out, /terminating|stopping worker \d+ \(pid/);
  }

  // A worker started by hand on clone A's queue: the next demo of A names it and leaves it running.
  const config = path.join(a.projectRoot, '.data', 'demo-config.json');
  const hand: WorkerProcess = await spawnWorker(
    {
      ...process.env,
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: 'default',
      CATALOG_REBUILD_CONFIG: config,
      CATALOG_REBUILD_TASK_QUEUE: a.taskQueue,
      CATALOG_REBUILD_DEPLOYMENT: a.deploymentName,
      CATALOG_DATABASE_URL: '',
    },
    { entry: 'product' },
  );
  t.after(async () => {
    hand.kill();
    await hand.exited;
  });
  const second = await runDemo(a).done;
  assert.equal(second.code, 0, second.out);
  assert.match(second.out, /versions +version 1 retired, version 2 active \(this run\)/);
  const handId = `${hand.pid}@${os.hostname()}`;
  assert.match(
    second.out,
    new RegExp(`other workers +polling task queue ${a.taskQueue}, not started by this demo: .*${handId}`),
  );
  const pages = /pages by worker +(.*)/.exec(second.out)![1];
  const counted = [...pages.matchAll(/ (\d+)(?:,|$)/g)].reduce((n, m) => n + Number(m[1]), 0);
  assert.equal(counted, 10, `every committed page counted once: ${pages}`);
  assert.ok(alive(hand.pid), 'the demo left the hand-started worker running');

  // A rebuild of clone B's catalog started by hand: B's demo refuses and leaves it running.
  const c = await temporalClient(temporal.address);
  t.after(() => c.close());
  const byHand = await startRebuild(
    c.client,
    { catalog: b.catalog, source: 'director', pageSize: 200 },
    { taskQueue: `${b.taskQueue}-by-hand` },
  );
  t.after(() => byHand.handle.terminate('test over').catch(() => undefined));
  const refused = await runDemo(b).done;
  assert.equal(refused.code, 1, refused.out);
  assert.match(refused.out, /a rebuild of catalog .* that this demo did not start is running/);
  assert.equal((await byHand.handle.describe()).status.name, 'RUNNING');
  await byHand.handle.terminate('test: the hand-started rebuild is done with');

  // Ctrl-C during clone B's demo leaves its rebuild running; B's next demo terminates it and publishes.
  const interrupted = runDemo(b);
  await waitFor('clone B to start its rebuild', () => /workflow catalog-rebuild\/demo-/.test(interrupted.out()), {
    timeoutMs: 120_000,
  });
  interrupted.signal('SIGINT');
  const stopped = await interrupted.done;
  assert.equal(stopped.code, 130, stopped.out);
  const left = await c.client.workflow.getHandle(`catalog-rebuild/${b.catalog}`).describe();
  assert.equal(left.status.name, 'RUNNING', 'Ctrl-C stops the demo, not its rebuild');
  const next = await runDemo(b).done;
  assert.equal(next.code, 0, next.out);
  assert.match(
    next.out.replace(/\s+/g, ' '),
    new RegExp(`terminating the rebuild an earlier, interrupted demo of this checkout started \\(run ${left.runId};`),
  );
  assert.match(next.out, /version \d+ active \(this run\)/);
  assert.equal((await c.client.workflow.getHandle(left.workflowId, left.runId).describe()).status.name, 'TERMINATED');
});
