/**
 * The reconciliation's count of job names that occur more than once in a version
 * (lib/catalog/reconcile.ts `duplicateJobNameCount`): counted by the names' hashes first, then by
 * the names of the hashes that repeat, on a version table in a database cloned from the migrated
 * template.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { createVersionPartition, duplicateJobNameCount } from '../lib/catalog';

let dbs: TestDatabases;

/** A version of catalog `c` whose jobs have the names `names` (null: no name). */
async function versionWithNames(c: string, names: (string | null)[]): Promise<string> {
  const { rows } = await dbs.catalogPool.query<{ id: string }>(
    `INSERT INTO version (catalog_name, source_name, status, workflow_id, first_run_id, page_size)
     VALUES ($1, 'src', 'building', 'catalog-rebuild/' || $1, $1 || now()::text, 100) RETURNING version_id::text AS id`,
    [c],
  );
  const v = rows[0].id;
  await createVersionPartition(dbs.catalogPool, v);
  await dbs.catalogPool.query(
    `INSERT INTO job (version_id, job_key, job_id, page_no, job)
     SELECT $1, k, k::text, 1, name FROM unnest($2::text[]) WITH ORDINALITY AS t(name, k)`,
    [v, names],
  );
  return v;
}

/** Runs the count on a client of its own, as the reconciliation does. */
async function count(versionId: string): Promise<number> {
  const c = await dbs.catalogPool.connect();
  try {
    return await duplicateJobNameCount(c, versionId);
  } finally {
    c.release();
  }
}

const unique = Array.from({ length: 5000 }, (_, i) => `BackupClient${i % 40}.2026-12-0${(i % 9) + 1}_23.05.00_${i}`);

before(async () => {
  dbs = await testDatabases('dupnames');
});

after(async () => {
  await dbs?.drop();
});

test('distinct job names count no duplicate; jobs without a name count for none', async () => {
  assert.equal(await count(await versionWithNames('distinct', [...unique, null, null, null])), 0);
});

test('each name that occurs more than once counts once, however often it occurs', async () => {
  const names = [...unique, unique[7], unique[7], unique[4999], 'RestoreFiles.2026-12-04', 'RestoreFiles.2026-12-04'];
  assert.equal(await count(await versionWithNames('repeats', names)), 3);
});

test('names that differ only in case or trailing space are different names', async () => {
  const names = [...unique, 'Job.A', 'job.a', 'Job.A ', 'Job.B', 'Job.B'];
  assert.equal(await count(await versionWithNames('near', names)), 1);
});

test('the count leaves the session as it found it: no transaction open, its settings back', async () => {
  const c = await dbs.catalogPool.connect();
  try {
    const v = await versionWithNames('session', [...unique, 'x', 'x']);
    const settings = `SELECT current_setting('work_mem') AS wm, current_setting('enable_hashagg') AS ha,
                             now() = statement_timestamp() AS own_transaction`;
    const before = (await c.query(settings)).rows[0];
    assert.equal(await duplicateJobNameCount(c, v), 1);
    assert.deepEqual((await c.query(settings)).rows[0], before);
    assert.equal(before.own_transaction, true);
  } finally {
    c.release();
  }
});
