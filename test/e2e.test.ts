/**
 * End to end on a real Temporal dev server (private ports) and real PostgreSQL, with real worker
 * and CLI processes running in TZ=America/New_York: a generated 20,000-job Bareos source is
 * rebuilt and published; `active_jobs` equals the source field by field; a second rebuild keeps
 * readers on the first version until its atomic publish.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateBareosSource } from '../dev/bareos-generator';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import {
  compareCatalogToSource,
  privateTemporal,
  runCliAsync,
  runCliProcess,
  spawnWorker,
  testDatabases,
  testEnv,
  uniqueQueue,
  writeConfig,
} from '../dev/harness/harness';
import { serverTimezone } from '../dev/harness/fixture';
import { projectRoot } from '../lib/paths';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
let dbs: TestDatabases;
let env: NodeJS.ProcessEnv;
let worker: WorkerProcess | undefined;
let sourceTz: string;

before(async () => {
  temporal = await privateTemporal();
  dbs = await testDatabases('e2e');
  await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 20_000, seed: 11 });
  sourceTz = await serverTimezone(dbs.sourcePool);
  env = testEnv({
    address: temporal.address,
    configFile: writeConfig(dbs),
    taskQueue: uniqueQueue('e2e'),
    extra: { TZ: 'America/New_York' },
  });
  worker = await spawnWorker(env);
});

after(async () => {
  worker?.kill();
  await temporal?.stop();
  await dbs?.drop();
});

async function activeState(catalog: string): Promise<string[]> {
  const { rows } = await dbs.catalogPool.query<{ v: string; n: string; ids: string }>(
    `SELECT version_id::text AS v, count(*)::text AS n, md5(string_agg(job_id, ',' ORDER BY job_id)) AS ids
     FROM active_jobs WHERE catalog_name = $1 GROUP BY version_id`,
    [catalog],
  );
  return rows.map((r) => `${r.v}:${r.n}:${r.ids}`);
}

test('start --wait rebuilds 20,000 Bareos jobs; active_jobs equals the source field by field', async () => {
  const r = runCliProcess(['start', '--catalog', 'main', '--source', 'director', '--page-size', '500', '--wait'], env);
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout, /version \d+ published; 40 pages, 20000 rows, 0 rejects/);
  assert.match(r.stdout, /reconciliation: ok/);
  const cmp = await compareCatalogToSource(dbs.catalogPool, dbs.sourcePool, 'main', sourceTz);
  assert.equal(cmp.rows, 20_000);
  assert.equal(cmp.catalog, cmp.source, 'every field of every job equals the source');

  // Buckets are the source-local dates of the start time, whatever the worker's TZ.
  const src = await dbs.sourcePool.query<{ b: string | null; n: string }>(
    `SELECT starttime::date::text AS b, count(*)::text AS n FROM job GROUP BY 1`,
  );
  const cat = await dbs.catalogPool.query<{ b: string | null; n: string }>(
    `SELECT bucket::text AS b, count(*)::text AS n FROM active_jobs WHERE catalog_name = 'main' GROUP BY 1`,
  );
  const asMap = (rows: { b: string | null; n: string }[]) => new Map(rows.map((x) => [x.b ?? 'none', x.n]));
  assert.deepEqual(asMap(cat.rows), asMap(src.rows));

  // The ledger holds every planned page exactly once, committed.
  const ledger = await dbs.catalogPool.query<{ planned: number; committed: number; rows: string }>(
    `SELECT (SELECT count(*)::int FROM plan_page pp WHERE pp.version_id = v.version_id) AS planned,
            (SELECT count(*)::int FROM page p WHERE p.version_id = v.version_id AND committed_at IS NOT NULL) AS committed,
            (SELECT sum(rows)::text FROM page p WHERE p.version_id = v.version_id) AS rows
     FROM version v WHERE catalog_name = 'main' AND status = 'active'`,
  );
  assert.deepEqual(ledger.rows[0], { planned: 40, committed: 40, rows: '20000' });

  const status = runCliProcess(['status', '--catalog', 'main', '--json'], env);
  assert.equal(status.code, 0, status.stderr);
  const p = JSON.parse(status.stdout);
  assert.equal(p.phase, 'done');
  assert.equal(p.pagesDone, 40);
  assert.equal(p.checkpoint, 40);
  assert.equal(p.rowsUpserted, 20000);
  // The same bytes through a pipe whose reader waits a second before it reads (the CLI used to exit
  // before a pipe had taken all of its output).
  const bin = `${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(projectRoot(), 'bin/catalog-rebuild.js'))}`;
  const piped = spawnSync('bash', ['-c', `set -o pipefail; ${bin} status --catalog main --json | (sleep 1; cat)`], {
    env,
    encoding: 'utf8',
  });
  assert.equal(piped.status, 0, piped.stderr);
  // Complete JSON, the same report but for the seconds that passed between the two commands.
  const timeless = (text: string) => {
    const x = JSON.parse(text);
    delete x.database.latest.secondsSinceProgress;
    delete x.database.latest.secondsSinceCreated;
    return x;
  };
  assert.deepEqual(timeless(piped.stdout), timeless(status.stdout));
});

test('readers keep the previous complete version during a rebuild until the atomic publish', async () => {
  const before = await activeState('main');
  assert.equal(before.length, 1);
  // New jobs in the source make the next version distinguishable.
  await dbs.sourcePool.query(
    `INSERT INTO job (jobid, job, name, type, level, clientid, jobstatus, schedtime, starttime, endtime, realendtime, jobfiles, jobbytes)
     SELECT 900000 + g, 'Extra.' || g, 'Extra', 'B', 'I', 1, 'T', '2026-11-01 21:00', '2026-11-01 21:00', '2026-11-01 21:05', '2026-11-01 21:05', 1, 100
     FROM generate_series(1, 250) g`,
  );
  const start = runCliProcess(
    ['start', '--catalog', 'main', '--source', 'director', '--page-size', '200', '--concurrency', '2'],
    env,
  );
  assert.equal(start.code, 0, start.stderr);
  const seen = new Set<string>();
  let mixed = 0;
  let reads = 0;
  let done = false;
  const waiter = runCliAsync(['wait', '--catalog', 'main'], env);
  const readerLoop = (async () => {
    while (!done) {
      const s = await activeState('main');
      reads++;
      if (s.length !== 1) mixed++;
      for (const x of s) seen.add(x);
    }
  })();
  const w = await waiter;
  done = true;
  await readerLoop;
  assert.equal(w.code, 0, `${w.stdout}\n${w.stderr}`);
  const afterState = await activeState('main');
  assert.equal(mixed, 0, 'never a mix of versions');
  for (const s of seen) assert.ok(s === before[0] || s === afterState[0], `reader saw ${s}`);
  assert.ok(reads > 20, `reader loop ran ${reads} times during the rebuild`);
  assert.equal(seen.size, 2, 'readers saw the old version, then the new one');
  assert.notEqual(afterState[0], before[0]);
  assert.match(afterState[0], /:20250:/);
  const cmp = await compareCatalogToSource(dbs.catalogPool, dbs.sourcePool, 'main', sourceTz);
  assert.equal(cmp.catalog, cmp.source);
  // Retention 1: the previous version is retired with its rows; exactly one version is active.
  const versions = await dbs.catalogPool.query<{ status: string; n: number }>(
    `SELECT status, count(*)::int AS n FROM version WHERE catalog_name = 'main' GROUP BY status ORDER BY status`,
  );
  assert.deepEqual(versions.rows, [
    { status: 'active', n: 1 },
    { status: 'retired', n: 1 },
  ]);

  // Rollback re-activates the previous complete version; a catalog with nothing to go back to exits 1.
  const rb = runCliProcess(['rollback', '--catalog', 'main'], env);
  assert.equal(rb.code, 0, rb.stderr);
  assert.match(rb.stdout, /is active again/);
  assert.deepEqual(await activeState('main'), before);
  const none = runCliProcess(['rollback', '--catalog', 'never-built'], env);
  assert.equal(none.code, 1);
  const noStatus = runCliProcess(['status', '--catalog', 'never-built'], env);
  assert.equal(noStatus.code, 1, noStatus.stdout);
  assert.match(
    noStatus.stderr,
    /no rebuild of catalog never-built has been started .*start one with: catalog-rebuild start --catalog never-built/,
  );
});

test('start attaches to a running rebuild; different flags exit 1; usage errors exit 2', async () => {
  const a = runCliProcess(
    ['start', '--catalog', 'other', '--source', 'director', '--page-size', '100', '--concurrency', '1'],
    env,
  );
  assert.equal(a.code, 0, a.stderr);
  assert.match(a.stdout, /^started rebuild catalog-rebuild\/other/);
  const b = runCliProcess(
    ['start', '--catalog', 'other', '--source', 'director', '--page-size', '100', '--concurrency', '1'],
    env,
  );
  assert.equal(b.code, 0, b.stderr);
  assert.match(b.stdout, /^attached to running rebuild catalog-rebuild\/other/);
  const c = runCliProcess(['start', '--catalog', 'other', '--source', 'director', '--page-size', '300'], env);
  assert.equal(c.code, 1);
  assert.match(c.stderr, /different flags: pageSize: running 100, requested 300/);
  const w = runCliProcess(['wait', '--catalog', 'other'], env);
  assert.equal(w.code, 0, w.stderr);
  assert.equal(runCliProcess(['start', '--catalog', 'x'], env).code, 2, 'missing --source is a usage error');
  assert.equal(runCliProcess(['start', '--catalog', 'bad name!', '--source', 'director'], env).code, 2);
  assert.equal(runCliProcess(['start', '--catalog', 'x', '--source', 'director', '--page-size', '0'], env).code, 2);
  assert.equal(runCliProcess([], env).code, 2, 'no arguments prints help, exit 2');
  const unknown = runCliProcess(['start', '--catalog', 'y', '--source', 'nosuch', '--wait'], env);
  assert.equal(unknown.code, 2, 'start refuses a source no worker of the task queue serves');
  assert.match(
    unknown.stderr,
    new RegExp(`unknown source "nosuch"; the workers of task queue ${env.CATALOG_REBUILD_TASK_QUEUE} serve: director`),
  );
});
