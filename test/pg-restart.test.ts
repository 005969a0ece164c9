/**
 * Restarting PostgreSQL in the middle of a rebuild (a private cluster on a free port, never the
 * machine's): page transactions cut by the fast shutdown (57P01) and refused connections are retried,
 * and the rebuild completes with the catalog equal to the source.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDatabase } from '../dev/env/postgres';
import { createPool } from '../lib/db';
import { generateBareosSource } from '../dev/bareos-generator';
import { getProgress, startRebuild, waitForResult } from '../client';
import type { WorkerProcess } from '../dev/harness/harness';
import {
  compareCatalogToSource,
  privateTemporal,
  spawnWorker,
  temporalClient,
  testEnv,
  uniqueQueue,
  writeConfig,
} from '../dev/harness/harness';
import type { PrivatePostgres } from '../dev/harness/private-postgres';
import { freePgPort, postgresBinDir, startPrivatePostgres } from '../dev/harness/private-postgres';
import { serverTimezone } from '../dev/harness/fixture';
import { pageTransactions } from '../dev/harness/faults';
import { waitFor, within } from '../dev/harness/wait';
import { stuckRebuildReport } from '../dev/harness/observe';

const bin = postgresBinDir();
let pg: PrivatePostgres | undefined;
let temporal: Awaited<ReturnType<typeof privateTemporal>> | undefined;
const workers: WorkerProcess[] = [];

before(async () => {
  if (!bin) return;
  pg = startPrivatePostgres(bin, await freePgPort());
  temporal = await privateTemporal();
});

after(async () => {
  for (const w of workers) w.kill();
  await temporal?.stop();
  pg?.stop();
});

test(
  'a PostgreSQL restart mid-rebuild is survived: the rebuild completes and equals the source',
  { skip: bin ? false : 'no PostgreSQL server binaries (initdb) installed' },
  async () => {
    const catalogUrl = await createDatabase(pg!.adminUrl, 'catalog');
    const sourceUrl = await createDatabase(pg!.adminUrl, 'source');
    await generateBareosSource({ databaseUrl: sourceUrl, jobs: 20_000, seed: 17 });
    const env = testEnv({
      address: temporal!.address,
      configFile: writeConfig({ catalogUrl, sourceUrl }),
      taskQueue: uniqueQueue('pgrestart'),
    });
    workers.push(await spawnWorker(env));
    const { client, close } = await temporalClient(temporal!.address);
    try {
      const { handle } = await startRebuild(
        client,
        { catalog: 'pg', source: 'director', pageSize: 250, concurrency: 2, pauseBetweenPagesMs: 40 },
        { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
      );
      const { pagesDone: atRestart } = await waitFor(
        '20 pages done',
        async () => {
          const p = await getProgress(handle);
          return p.pagesDone >= 20 && p;
        },
        { intervalMs: 100 },
      );
      pg!.restart();
      // Restart again while pages are in flight, so a transaction is cut between statements.
      const watch = createPool(catalogUrl, { applicationName: 'test', max: 1 });
      try {
        await waitFor(
          'a page transaction open after the restart',
          async () => (await pageTransactions(watch)).length > 0,
          {
            intervalMs: 20,
          },
        );
      } finally {
        await watch.end();
      }
      pg!.restart();
      // The worker must live through the restarts: its death fails the test at once, with its output.
      const died = workers[0].exited.then((code) => {
        throw new Error(`the worker exited (${code}) during the restarts:\n${workers[0].output().slice(-4_000)}`);
      });
      const result = await within(Promise.race([waitForResult(handle), died]), 180_000);
      if (result === 'timeout') {
        assert.fail(
          `the rebuild did not finish within 180 s of the restart:\n${await stuckRebuildReport(handle, workers)}`,
        );
      }
      assert.equal(result.published, true);
      assert.equal(result.rowsUpserted, 20_000);
      assert.ok(atRestart < result.pagesTotal, 'the restart happened during the copy phase');
      const catalogPool = createPool(catalogUrl, { applicationName: 'test', max: 2 });
      const sourcePool = createPool(sourceUrl, { applicationName: 'test', max: 2 });
      try {
        const tz = await serverTimezone(sourcePool);
        const cmp = await compareCatalogToSource(catalogPool, sourcePool, 'pg', tz);
        assert.equal(cmp.rows, 20_000);
        assert.equal(cmp.catalog, cmp.source);
        const ledger = await catalogPool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM page p JOIN version v USING (version_id) WHERE v.status = 'active' AND p.committed_at IS NOT NULL`,
        );
        assert.equal(ledger.rows[0].n, result.pagesTotal);
      } finally {
        await catalogPool.end();
        await sourcePool.end();
      }
      assert.equal(workers[0].child.exitCode, null, 'the worker kept running through the restart');
    } finally {
      await close();
    }
  },
);
