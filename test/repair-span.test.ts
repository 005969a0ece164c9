/**
 * A bucket's repair reads both sides by job-id range over the bucket's id span recorded by the
 * reconciliation round (the union of its source and catalog spans): through the real activities
 * (MockActivityEnvironment) on real PostgreSQL, no Temporal. A bucket whose jobs were damaged in the
 * catalog is repaired from its recorded span; a span narrowed in the report leaves the jobs outside
 * it untouched (so the span is what the repair reads).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Activities } from '../activities';
import type { TestDatabases } from '../dev/harness/harness';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, runActivity } from '../dev/harness/activity-env';
import type { KeySpan } from '../lib/sources/types';

let dbs: TestDatabases;
let acts: Activities;
let fixture: ActivityFixture;

before(async () => {
  fixture = await activityFixture('repairspan', {
    jobs: 400,
    seed: 4,
    source: (d) => ({ kind: 'bareos', databaseUrl: d.sourceUrl, timezone: 'UTC' }),
  });
  ({ dbs, acts } = fixture);
});

after(async () => {
  await fixture?.close();
});

const run = <I, O>(fn: (i: I) => Promise<O>, input: I): Promise<O> => runActivity(fn, input);

test('a damaged bucket is repaired by job-id range over its recorded span', async () => {
  const plan = await run(acts.planRebuild, {
    catalog: 'rs',
    source: 'director',
    pageSize: 200,
    workflowId: 'wf-rs',
    firstRunId: 'r1',
  });
  for (let p = 1; p <= plan.pagesTotal; p++)
    await run(acts.copyPage, { catalog: 'rs', source: 'director', versionId: plan.versionId, pageNo: p });
  await run(acts.sealVersion, { versionId: plan.versionId });
  // The busiest dated bucket, and its jobs in key order.
  const { rows: b } = await dbs.sourcePool.query<{ bucket: string; ids: string[] }>(
    `SELECT starttime::date::text AS bucket, array_agg(jobid::text ORDER BY jobid) AS ids FROM job
     WHERE starttime IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`,
  );
  const { bucket, ids } = b[0];
  assert.ok(ids.length >= 3, 'a bucket with at least three jobs');
  const table = `job_v${plan.versionId}`;
  // Damage: the bucket's first job gone from the catalog, its last job's status changed.
  await dbs.catalogPool.query(`DELETE FROM ${table} WHERE job_key = $1`, [ids[0]]);
  await dbs.catalogPool.query(`UPDATE ${table} SET status = 'X' WHERE job_key = $1`, [ids[ids.length - 1]]);

  const r1 = await run(acts.reconcile, { catalog: 'rs', source: 'director', versionId: plan.versionId, round: 1 });
  assert.deepEqual(r1.mismatched, [bucket]);
  const rep = await dbs.catalogPool.query<{ span: KeySpan }>(
    `SELECT report->'bucketSpans'->$2::text AS span FROM reconciliation WHERE version_id = $1 AND round = 1`,
    [plan.versionId, bucket],
  );
  assert.deepEqual(rep.rows[0].span, { min: ids[0], max: ids[ids.length - 1] }, 'span = union of both sides');

  // Narrow the recorded span to the last job only: the repair fixes it and leaves the first missing.
  await dbs.catalogPool.query(
    `UPDATE reconciliation SET report = jsonb_set(report, ARRAY['bucketSpans', $2::text], $3::jsonb)
     WHERE version_id = $1 AND round = 1`,
    [plan.versionId, bucket, JSON.stringify({ min: ids[ids.length - 1], max: ids[ids.length - 1] })],
  );
  const narrow = await run(acts.repairBucket, { catalog: 'rs', source: 'director', versionId: plan.versionId, bucket });
  assert.equal(narrow.upserted, 1, 'only the job in the span was read and written');
  const missing = await dbs.catalogPool.query(`SELECT 1 FROM ${table} WHERE job_key = $1`, [ids[0]]);
  assert.equal(missing.rowCount, 0, 'the job outside the span was not read');

  const r2 = await run(acts.reconcile, { catalog: 'rs', source: 'director', versionId: plan.versionId, round: 2 });
  assert.deepEqual(r2.mismatched, [bucket], 'still missing its first job');
  const fixed = await run(acts.repairBucket, { catalog: 'rs', source: 'director', versionId: plan.versionId, bucket });
  assert.equal(fixed.ok, true);
  const r3 = await run(acts.reconcile, { catalog: 'rs', source: 'director', versionId: plan.versionId, round: 3 });
  assert.equal(r3.ok, true, 'the bucket equals the source');
  assert.equal(r3.catalogRows, 400);
});
