/**
 * A sealed version's indexes (lib/catalog/partitions.ts `createReaderIndex`): the reader index and
 * the paging-key index, built on two sessions side by side, and the table analysed; run again, it
 * changes nothing. `settleAll` (lib/db.ts), which waits for both sessions, reports a failure only
 * once every step has ended.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { createReaderIndex, createVersionPartition } from '../lib/catalog';
import { settleAll } from '../lib/db';

let dbs: TestDatabases;

before(async () => {
  dbs = await testDatabases('vindexes');
});

after(async () => {
  await dbs?.drop();
});

test('the reader and paging-key indexes are built and valid, the table analysed; a second run changes nothing', async () => {
  const { rows } = await dbs.catalogPool.query<{ id: string }>(
    `INSERT INTO version (catalog_name, source_name, status, workflow_id, first_run_id, page_size)
     VALUES ('ix', 'src', 'verifying', 'catalog-rebuild/ix', 'run-ix', 100) RETURNING version_id::text AS id`,
  );
  const v = rows[0].id;
  const table = await createVersionPartition(dbs.catalogPool, v);
  await dbs.catalogPool.query(
    `INSERT INTO job (version_id, job_key, job_id, page_no, job, client, start_time)
     SELECT $1, k, k::text, 1, 'job' || k, 'client' || (k % 7), timestamptz '2026-01-01' + k * interval '1 hour'
     FROM generate_series(1, 5000) k`,
    [v],
  );
  const indexes = async () =>
    (
      await dbs.catalogPool.query<{ name: string; def: string; valid: boolean; oid: string }>(
        `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def, i.indisvalid AS valid, c.oid::text AS oid
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass ORDER BY 1`,
        [table],
      )
    ).rows;
  await createReaderIndex(dbs.catalogPool, v);
  const built = await indexes();
  assert.deepEqual(
    built.map((r) => [r.name, r.valid, r.def.replace(/^.* USING /, '')]),
    [
      [`${table}_client_start`, true, 'btree (client, start_time)'],
      [`${table}_job_key`, true, 'btree (job_key)'],
      [`${table}_pkey`, true, 'btree (version_id, job_id)'],
      [`${table}_superseded_by_idx`, true, 'btree (superseded_by) WHERE (superseded_by IS NOT NULL)'], // the parent's
    ],
  );
  const stats = await dbs.catalogPool.query<{ tuples: number; analysed: boolean }>(
    `SELECT c.reltuples::int AS tuples, s.last_analyze IS NOT NULL AS analysed
     FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname = $1`,
    [table],
  );
  assert.deepEqual(stats.rows[0], { tuples: 5000, analysed: true });
  await createReaderIndex(dbs.catalogPool, v);
  assert.deepEqual(await indexes(), built, 'the same indexes, not rebuilt');
});

test('settleAll throws the first failure only after every step has ended, and returns results in order', async () => {
  let slowEnded = false;
  const slow = new Promise<string>((resolve) =>
    setImmediate(() => {
      slowEnded = true;
      resolve('slow');
    }),
  );
  await assert.rejects(settleAll([Promise.reject(new Error('first')), slow]), (err: Error) => {
    assert.equal(err.message, 'first');
    assert.ok(slowEnded, 'the slow step had ended');
    return true;
  });
  assert.deepEqual(await settleAll([Promise.resolve(1), Promise.resolve('two')]), [1, 'two']);
});
