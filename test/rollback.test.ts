/**
 * `rollback` has one meaning: one step back each time, to the newest retained version older than
 * the active one (never a toggle to the version it just replaced); `--to-version N` re-activates
 * exactly that retained version (the way back). What it cannot do it refuses with exit 1, naming the
 * reason and the retained versions, and changes nothing; a malformed `--to-version` is a usage error
 * (exit 2). Runs the CLI against a migrated catalog database holding four versions of one catalog
 * (v1 dropped, v2 and v3 retired with rows, v4 active) and a failed one.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { runCliProcess, testDatabases, writeConfig } from '../dev/harness/harness';
import { createVersionPartition } from '../lib/catalog';

let dbs: TestDatabases;
let env: NodeJS.ProcessEnv;
const CATALOG = 'rb';
const ids: Record<string, string> = {};

/** Adds a version of CATALOG with `status`; with `rows`, a partition holding that many jobs. */
async function addVersion(name: string, status: string, rows: number): Promise<void> {
  const { rows: r } = await dbs.catalogPool.query<{ id: string }>(
    `INSERT INTO version (catalog_name, source_name, status, workflow_id, first_run_id, page_size, published_at)
     VALUES ($1, 'director', $2, 'catalog-rebuild/rb', $3, 100, now()) RETURNING version_id::text AS id`,
    [CATALOG, status, name],
  );
  ids[name] = r[0].id;
  if (rows) {
    await createVersionPartition(dbs.catalogPool, r[0].id);
    await dbs.catalogPool.query(
      `INSERT INTO job (version_id, job_key, job_id, page_no) SELECT $1, g, g::text, 1 FROM generate_series(1, $2) g`,
      [r[0].id, rows],
    );
  }
}

/** The active version and every version's status, by name. */
async function state(): Promise<{ active: string; statuses: Record<string, string> }> {
  const a = await dbs.catalogPool.query<{ v: string }>(
    `SELECT version_id::text AS v FROM active WHERE catalog_name = $1`,
    [CATALOG],
  );
  const v = await dbs.catalogPool.query<{ v: string; status: string }>(
    `SELECT version_id::text AS v, status FROM version WHERE catalog_name = $1`,
    [CATALOG],
  );
  const name = (id: string) => Object.keys(ids).find((k) => ids[k] === id)!;
  return {
    active: name(a.rows[0].v),
    statuses: Object.fromEntries(v.rows.map((x) => [name(x.v), x.status])),
  };
}

const rollback = (...args: string[]) => runCliProcess(['rollback', '--catalog', CATALOG, ...args], env, 60_000);

before(async () => {
  dbs = await testDatabases('rollback');
  env = { ...process.env, CATALOG_REBUILD_CONFIG: writeConfig(dbs), CATALOG_DATABASE_URL: '' };
  await addVersion('v1', 'dropped', 0);
  await addVersion('v2', 'retired', 2);
  await addVersion('v3', 'retired', 3);
  await addVersion('failed', 'failed', 0);
  await addVersion('v4', 'active', 4);
  await dbs.catalogPool.query(`INSERT INTO active (catalog_name, version_id) VALUES ($1, $2)`, [CATALOG, ids.v4]);
});

after(async () => {
  await dbs?.drop();
});

test('rollback goes one step back each time, --to-version returns, and what it cannot do exits 1 changing nothing', async () => {
  const first = rollback();
  assert.equal(first.code, 0, first.stderr);
  assert.deepEqual(first.stdout.trimEnd().split('\n'), [
    `catalog ${CATALOG}: version ${ids.v3} is active again; version ${ids.v4} retired`,
    `  back to version ${ids.v4}: catalog-rebuild rollback --catalog ${CATALOG} --to-version ${ids.v4}`,
  ]);
  assert.equal((await state()).active, 'v3');

  const second = rollback();
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, new RegExp(`version ${ids.v2} is active again; version ${ids.v3} retired`));
  assert.deepEqual(await state(), {
    active: 'v2',
    statuses: { v1: 'dropped', v2: 'active', v3: 'retired', failed: 'failed', v4: 'retired' },
  });

  const third = rollback();
  assert.equal(third.code, 1, third.stdout);
  assert.equal(
    third.stderr.trim(),
    `catalog-rebuild: catalog ${CATALOG} has no retained version older than its active version ${ids.v2} (retention dropped the older ones): nothing to roll back to; newer retained versions: ${ids.v4}, ${ids.v3} (rollback --to-version N re-activates one)`,
  );
  assert.equal((await state()).active, 'v2', 'a refused rollback changes nothing');

  for (const [which, why] of [
    ['v1', `is dropped \\(its rows are gone\\)`],
    ['failed', 'is failed'],
  ] as const) {
    const r = rollback('--to-version', ids[which]);
    assert.equal(r.code, 1, r.stdout);
    assert.match(
      r.stderr,
      new RegExp(
        `version ${ids[which]} of catalog ${CATALOG} ${why}: only a retired version that still holds its rows can be re-activated; retained versions: ${ids.v4}, ${ids.v3}$`,
        'm',
      ),
    );
  }
  const unknown = rollback('--to-version', '999999');
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /version 999999 of catalog rb does not exist/);
  const same = rollback('--to-version', ids.v2);
  assert.equal(same.code, 1);
  assert.match(same.stderr, new RegExp(`version ${ids.v2} is already the active version of catalog ${CATALOG}`));
  const usage = rollback('--to-version', 'latest');
  assert.equal(usage.code, 2, usage.stderr);
  assert.equal((await state()).active, 'v2');

  const back = rollback('--to-version', ids.v4);
  assert.equal(back.code, 0, back.stderr);
  assert.match(back.stdout, new RegExp(`version ${ids.v4} is active again; version ${ids.v2} retired`));
  assert.deepEqual(await state(), {
    active: 'v4',
    statuses: { v1: 'dropped', v2: 'retired', v3: 'retired', failed: 'failed', v4: 'active' },
  });
  const events = await dbs.catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM event WHERE catalog_name = $1 AND kind = 'rolled_back'`,
    [CATALOG],
  );
  assert.equal(events.rows[0].n, 3, 'one rolled_back event per rollback done, none for a refused one');
});
