/**
 * Reconciliation's field-by-field sample finds a difference outside the fingerprint (a changed
 * comment) and sends that job's bucket to repair; after the repair the version reconciles.
 * Real activities in MockActivityEnvironment against real PostgreSQL.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Activities } from '../activities';
import type { TestDatabases } from '../dev/harness/harness';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, runActivity } from '../dev/harness/activity-env';
import type { PlanResult, ReconcileSummary } from '../workflows/definitions';

let dbs: TestDatabases;
let acts: Activities;
let fixture: ActivityFixture;

before(async () => {
  fixture = await activityFixture('sample', { jobs: 2_000, seed: 9 });
  ({ dbs, acts } = fixture);
});

after(async () => {
  await fixture?.close();
});

const run = <T>(fn: (...a: never[]) => Promise<T>, arg: unknown): Promise<T> =>
  runActivity(fn as (a: unknown) => Promise<T>, arg, { heartbeatTimeoutMs: 5_000 });

test('a changed comment is found by the sample, its bucket repaired, and the next round passes', async () => {
  const plan = await run<PlanResult>(acts.planRebuild, {
    catalog: 's',
    source: 'director',
    pageSize: 500,
    workflowId: 'wf-s',
    firstRunId: 'r1',
  });
  for (let p = 1; p <= plan.pagesTotal; p++)
    await run(acts.copyPage, { catalog: 's', source: 'director', versionId: plan.versionId, pageNo: p });
  await run(acts.sealVersion, { versionId: plan.versionId });
  const clean = await run<ReconcileSummary>(acts.reconcile, {
    catalog: 's',
    source: 'director',
    versionId: plan.versionId,
    round: 1,
    sampleSize: 5_000,
  });
  assert.equal(clean.ok, true);
  assert.equal(clean.sampled, 2_000);

  const { rows } = await dbs.sourcePool.query<{ jobid: string; b: string }>(
    `SELECT jobid::text, starttime::date::text AS b FROM job WHERE starttime IS NOT NULL ORDER BY jobid LIMIT 1 OFFSET 700`,
  );
  await dbs.sourcePool.query(`UPDATE job SET comment = 'edited after copy' WHERE jobid = $1`, [rows[0].jobid]);
  const r2 = await run<ReconcileSummary>(acts.reconcile, {
    catalog: 's',
    source: 'director',
    versionId: plan.versionId,
    round: 2,
    sampleSize: 5_000,
  });
  assert.equal(r2.ok, false);
  assert.equal(r2.sampleMismatches, 1);
  assert.deepEqual(r2.mismatched, [rows[0].b], 'the bucket of the differing job goes to repair');

  await run(acts.repairBucket, { catalog: 's', source: 'director', versionId: plan.versionId, bucket: rows[0].b });
  const r3 = await run<ReconcileSummary>(acts.reconcile, {
    catalog: 's',
    source: 'director',
    versionId: plan.versionId,
    round: 3,
    sampleSize: 5_000,
  });
  assert.equal(r3.ok, true);
  const c = await dbs.catalogPool.query(`SELECT comment FROM job WHERE version_id = $1 AND job_id = $2`, [
    plan.versionId,
    rows[0].jobid,
  ]);
  assert.equal(c.rows[0].comment, 'edited after copy');
});
