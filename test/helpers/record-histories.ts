/**
 * Records histories of real rebuilds into test/histories/ for the replay test:
 * a normal rebuild, one with a worker killed mid-page (retries), one with continue-as-new.
 * Run: `npm run build && node dist/test/helpers/record-histories.js` (after deliberate workflow changes
 * guarded by patched(), record new histories and keep the old ones).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { generateBareosSource } from '../../dev/bareos-generator';
import { projectRoot } from '../../lib/paths';
import { startRebuild, waitForResult, getProgress } from '../../client';
import { privateTemporal, spawnWorker, temporalClient, testDatabases, testEnv, uniqueQueue, writeConfig } from '../../dev/harness/harness';

async function main(): Promise<void> {
  const temporal = await privateTemporal();
  const dbs = await testDatabases('hist');
  const workers: { kill(): void }[] = [];
  try {
    await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 6_000, seed: 21 });
    const taskQueue = uniqueQueue('hist');
    const env = testEnv({ address: temporal.address, configFile: writeConfig(dbs), taskQueue });
    workers.push(await spawnWorker(env));
    const { client, close } = await temporalClient(temporal.address);
    const out = path.join(projectRoot(), 'test', 'histories');
    fs.mkdirSync(out, { recursive: true });
    const index: Record<string, string> = {};
    const save = async (name: string, workflowId: string, runId?: string) => {
      const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
      index[name] = workflowId;
      fs.writeFileSync(path.join(out, 'index.json'), JSON.stringify(index, null, 2) + '\n');
      fs.writeFileSync(path.join(out, `${name}.json`), historyToJSON(history));
      console.log(`recorded ${name}: ${history.events?.length} events`);
    };

    let r = await startRebuild(client, { catalog: 'normal', source: 'director', pageSize: 500 }, { taskQueue });
    await waitForResult(r.handle);
    await save('rebuild-normal', r.handle.workflowId);

    // Worker 2 holds page 6 in a slow statement; it is killed there and the page is retried on worker 3.
    for (const w of workers.splice(0)) w.kill();
    workers.push(await spawnWorker({ ...env, CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 6, ms: 30_000 } }) }));
    r = await startRebuild(client, { catalog: 'kill', source: 'director', pageSize: 200, concurrency: 2, heartbeatTimeoutMs: 3000 }, { taskQueue });
    for (;;) {
      const { rows } = await dbs.catalogPool.query(`SELECT 1 FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND state = 'active'`);
      if (rows.length) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    for (const w of workers.splice(0)) w.kill();
    workers.push(await spawnWorker(env));
    const killed = await waitForResult(r.handle);
    if (killed.retries < 1) throw new Error('expected a retried page in the kill scenario');
    await save('rebuild-worker-killed', r.handle.workflowId);

    r = await startRebuild(client, { catalog: 'can', source: 'director', pageSize: 500, maxPagesPerRun: 4 }, { taskQueue });
    const can = await waitForResult(r.handle);
    // The first run continued as new; the last one published.
    const firstRunId = (r.handle as unknown as { firstExecutionRunId: string }).firstExecutionRunId;
    await save('rebuild-continue-as-new-first-run', r.handle.workflowId, firstRunId);
    console.log(`continue-as-new scenario: ${can.runs} runs`);
    await save('rebuild-continue-as-new-last-run', r.handle.workflowId);
    await close();
  } finally {
    for (const w of workers) w.kill();
    await temporal.stop();
    await dbs.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
