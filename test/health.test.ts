/**
 * The worker's health check answers 200 while it polls and the catalog database answers, and goes
 * away when the worker shuts down on SIGTERM.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { freePort } from '../dev/env/dev-server';
import type { TestDatabases } from '../dev/harness/harness';
import { privateTemporal, spawnWorker, testDatabases, testEnv, uniqueQueue, writeConfig } from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
let dbs: TestDatabases;

before(async () => {
  temporal = await privateTemporal();
  dbs = await testDatabases('health');
});

after(async () => {
  await temporal?.stop();
  await dbs?.drop();
});

test('GET /healthz is 200 with state RUNNING and database ok; the worker exits 0 on SIGTERM', async () => {
  const port = await freePort();
  const env = testEnv({
    address: temporal.address,
    configFile: writeConfig(dbs),
    taskQueue: uniqueQueue('health'),
    extra: { CATALOG_REBUILD_HEALTH_ADDRESS: `127.0.0.1:${port}` },
  });
  const worker = await spawnWorker(env);
  try {
    const res = await waitFor(
      'the health check to answer 200',
      async () => {
        const r = await fetch(`http://127.0.0.1:${port}/healthz`);
        return r.status === 200 && r;
      },
      { timeoutMs: 5_000, intervalMs: 100, rethrow: true },
    );
    assert.equal(res.status, 200);
    const body = (await res.json()) as { state: string; database: string; pid: number };
    assert.deepEqual(
      { state: body.state, database: body.database, pid: body.pid },
      { state: 'RUNNING', database: 'ok', pid: worker.pid },
    );
    assert.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
    worker.kill('SIGTERM');
    assert.equal(await worker.exited, 0);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`));
  } finally {
    worker.kill();
  }
});
