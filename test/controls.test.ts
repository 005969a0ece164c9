/**
 * Operator controls against real workers and real PostgreSQL: pause holds the ledger still and
 * resume completes; Temporal cancellation abandons the version and commits nothing after the abandon;
 * a pause sent while runs continue as new is carried into the next run.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { getProgress, pause, resume, startRebuild, waitForResult } from '../client';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import {
  compareCatalogToSource,
  privateTemporal,
  spawnWorker,
  temporalClient,
  testDatabases,
  testEnv,
  uniqueQueue,
  writeConfig,
} from '../dev/harness/harness';
import { serverTimezone } from '../dev/harness/fixture';
import { heldWindow, openPageSessions } from '../dev/harness/observe';
import { waitFor } from '../dev/harness/wait';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
let dbs: TestDatabases;
let env: NodeJS.ProcessEnv;
let worker: WorkerProcess;
let client: Awaited<ReturnType<typeof temporalClient>>;
let sourceTz: string;

before(async () => {
  temporal = await privateTemporal();
  dbs = await testDatabases('controls');
  await dbs.generateSource({ jobs: 8_000, seed: 31 });
  sourceTz = await serverTimezone(dbs.sourcePool);
  env = testEnv({ address: temporal.address, configFile: writeConfig(dbs), taskQueue: uniqueQueue('controls') });
  worker = await spawnWorker(env);
  client = await temporalClient(temporal.address);
});

after(async () => {
  await client?.close();
  worker?.kill();
  await temporal?.stop();
  await dbs?.drop();
});

async function ledger(catalog: string): Promise<{ n: number; last: Date | null }> {
  const { rows } = await dbs.catalogPool.query<{ n: number; last: Date | null }>(
    `SELECT count(p.committed_at)::int AS n, max(p.committed_at) AS last FROM page p JOIN version v USING (version_id)
     WHERE v.catalog_name = $1 AND v.version_id = (SELECT max(version_id) FROM version WHERE catalog_name = $1)`,
    [catalog],
  );
  return rows[0];
}

test('pause: no page commits while paused (ledger); resume completes; catalog = source', async () => {
  const { handle } = await startRebuild(
    client.client,
    { catalog: 'p', source: 'director', pageSize: 250, concurrency: 2, pauseBetweenPagesMs: 50 },
    { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
  );
  await waitFor('10 pages done', async () => (await getProgress(handle)).pagesDone >= 10);
  await pause(handle);
  await waitFor('paused with no page in flight', async () => {
    const p = await getProgress(handle);
    return p.paused && p.inFlight === 0;
  });
  const pausedAt = new Date();
  const before = await ledger('p');
  // Instead of watching for a while: no attempt runs, no page transaction is open, and the window
  // ran again (a setThrottle update) while paused.
  await heldWindow(handle, { catalogPool: dbs.catalogPool });
  const during = await ledger('p');
  assert.equal(during.n, before.n, 'no page committed while paused');
  assert.ok(before.last! <= pausedAt);
  assert.ok(before.n < 32);
  await resume(handle);
  const r = await waitForResult(handle);
  assert.equal(r.published, true);
  const after = await ledger('p');
  assert.equal(after.n, 32);
  const cmp = await compareCatalogToSource(dbs.catalogPool, dbs.sourcePool, 'p', sourceTz);
  assert.equal(cmp.catalog, cmp.source);
});

test('Temporal cancellation: version abandoned, active version unchanged, nothing committed after the abandon', async () => {
  const active = await dbs.catalogPool.query<{ version_id: string }>(
    `SELECT version_id::text FROM active WHERE catalog_name = 'p'`,
  );
  const { handle } = await startRebuild(
    client.client,
    { catalog: 'p', source: 'director', pageSize: 100, concurrency: 2, pauseBetweenPagesMs: 50 },
    { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
  );
  await waitFor('5 pages done', async () => (await getProgress(handle)).pagesDone >= 5);
  await handle.cancel();
  await assert.rejects(handle.result());
  const desc = await handle.describe();
  assert.equal(desc.status.name, 'CANCELLED');
  const v = await dbs.catalogPool.query<{ version_id: string; status: string; finished_at: Date }>(
    `SELECT version_id::text, status, finished_at FROM version WHERE catalog_name = 'p' ORDER BY version_id DESC LIMIT 1`,
  );
  assert.equal(v.rows[0].status, 'abandoned');
  const kinds = await dbs.catalogPool.query<{ kind: string; message: string }>(
    `SELECT kind, message FROM event WHERE version_id = $1 AND kind IN ('cancel_requested', 'abandoned') ORDER BY event_id`,
    [v.rows[0].version_id],
  );
  assert.deepEqual(
    kinds.rows.map((e) => e.kind),
    ['cancel_requested', 'abandoned'],
    'the Temporal request is recorded, before the abandon',
  );
  assert.match(kinds.rows[0].message, /cancel requested through Temporal/);
  // Once every page transaction of the version has ended (an attempt still in flight at the cancel included).
  await waitFor('no page transaction of the abandoned version', async () => {
    return (await openPageSessions(dbs.catalogPool, v.rows[0].version_id)) === 0;
  });
  const late = await dbs.catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM page WHERE version_id = $1 AND committed_at > (SELECT min(created_at) FROM event WHERE version_id = $1 AND kind = 'abandoned')`,
    [v.rows[0].version_id],
  );
  assert.equal(late.rows[0].n, 0, 'no page committed after the abandon');
  const still = await dbs.catalogPool.query<{ version_id: string }>(
    `SELECT version_id::text FROM active WHERE catalog_name = 'p'`,
  );
  assert.deepEqual(still.rows, active.rows, 'the active version is untouched');
});

test('a pause sent while the rebuild continues as new every few pages is carried into the next run', async () => {
  const { handle } = await startRebuild(
    client.client,
    { catalog: 'can', source: 'director', pageSize: 400, concurrency: 2, maxPagesPerRun: 3 },
    { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
  );
  await waitFor('4 pages done', async () => (await getProgress(handle)).pagesDone >= 4, { intervalMs: 20 });
  await pause(handle);
  const p = await waitFor('paused with no page in flight', async () => {
    const q = await getProgress(handle);
    return q.paused && q.inFlight === 0 && q;
  });
  assert.equal(p.paused, true);
  const runAtPause = p.run;
  const held = await ledger('can');
  await heldWindow(handle, { catalogPool: dbs.catalogPool });
  const again = await getProgress(handle);
  assert.equal(again.paused, true, 'the paused state survives continue-as-new');
  assert.equal((await ledger('can')).n, held.n, 'no page committed while paused');
  assert.ok(again.run >= runAtPause);
  await resume(handle);
  const r = await waitForResult(handle);
  assert.equal(r.published, true);
  assert.ok(r.runs >= 5, `continued as new (${r.runs} runs)`);
  assert.equal((await ledger('can')).n, 20);
});
