/**
 * Quarantine with a director catalog, through the real activities (MockActivityEnvironment) on real
 * PostgreSQL: rows a page cannot write (negative jobbytes, an over-long job id) are quarantined and
 * reconciliation checks source = catalog + rejects per bucket; when the source changes after the
 * copy (a good row turns bad, a bad row is fixed), the mismatched buckets are repaired: the new bad
 * row leaves the catalog for the reject table, the fixed row leaves the reject table for the
 * catalog, and the next round passes. The threshold then decides the publish.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Activities } from '../activities';
import type { TestDatabases } from '../dev/harness/harness';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, runActivity } from '../dev/harness/activity-env';
import type { PlanResult, ReconcileSummary } from '../workflows/definitions';

let dbs: TestDatabases;
let maxRejects = 0;
let acts: Activities;
let fixture: ActivityFixture;

before(async () => {
  // The source's settings are read at each lookup: a test changes maxRejects.
  fixture = await activityFixture('quarantine', {
    jobs: 1_200,
    seed: 9,
    source: (d) => ({ kind: 'bareos', databaseUrl: d.sourceUrl, timezone: 'UTC', maxRejects }),
  });
  ({ dbs, acts } = fixture);
});

after(async () => {
  await fixture?.close();
});

const run = <I, O>(fn: (i: I) => Promise<O>, input: I): Promise<O> => runActivity(fn, input);

async function bucketOf(jobid: number): Promise<string> {
  const { rows } = await dbs.sourcePool.query<{ b: string }>(
    `SELECT starttime::date::text AS b FROM job WHERE jobid = $1`,
    [jobid],
  );
  return rows[0].b;
}

test('rejects are counted per page and per bucket; repairs move records between the catalog and the reject table; the threshold decides', async () => {
  // Two bad rows before the plan.
  const ids = (
    await dbs.sourcePool.query<{ jobid: number }>(
      `SELECT jobid FROM job WHERE starttime IS NOT NULL ORDER BY jobid LIMIT 4 OFFSET 100`,
    )
  ).rows.map((r) => r.jobid);
  await dbs.sourcePool.query(`UPDATE job SET jobbytes = -5 WHERE jobid = $1`, [ids[0]]);
  await dbs.sourcePool.query(`UPDATE job SET readbytes = -1 WHERE jobid = $1`, [ids[1]]);
  const plan: PlanResult = await run(acts.planRebuild, {
    catalog: 'q',
    source: 'director',
    pageSize: 250,
    workflowId: 'wf-q',
    firstRunId: 'r1',
  });
  let rejects = 0;
  let rows = 0;
  for (let p = 1; p <= plan.pagesTotal; p++) {
    const r = await run(acts.copyPage, { catalog: 'q', source: 'director', versionId: plan.versionId, pageNo: p });
    rejects += r.rejects;
    rows += r.rows;
  }
  assert.equal(rejects, 2, 'page results count the rejects');
  assert.equal(rows, 1_198);
  const q = await dbs.catalogPool.query<{ job_key: string; reason: string; bucket: string }>(
    `SELECT job_key::text, reason, bucket::text FROM reject WHERE version_id = $1 ORDER BY job_key`,
    [plan.versionId],
  );
  assert.deepEqual(
    q.rows.map((r) => r.job_key),
    [String(ids[0]), String(ids[1])],
  );
  assert.match(q.rows[0].reason, /^bytes: must be a non-negative whole number.*\("-5"\)/);
  assert.match(q.rows[1].reason, /^read_bytes: must be a non-negative whole number/);
  assert.equal(q.rows[0].bucket, await bucketOf(ids[0]));

  await run(acts.sealVersion, { versionId: plan.versionId });
  // The source changes after the copy: one good row turns bad, one bad row is fixed.
  await dbs.sourcePool.query(`UPDATE job SET jobbytes = -7 WHERE jobid = $1`, [ids[2]]);
  await dbs.sourcePool.query(`UPDATE job SET readbytes = 10 WHERE jobid = $1`, [ids[1]]);
  const r1: ReconcileSummary = await run(acts.reconcile, {
    catalog: 'q',
    source: 'director',
    versionId: plan.versionId,
    round: 1,
  });
  assert.equal(r1.ok, false);
  const changed = [...new Set([await bucketOf(ids[2]), await bucketOf(ids[1])])].sort();
  assert.deepEqual(
    [...r1.mismatched].sort(),
    changed,
    'the buckets of both changed rows differ (count or fingerprint)',
  );
  for (const bucket of r1.mismatched) {
    const rep = await run(acts.repairBucket, { catalog: 'q', source: 'director', versionId: plan.versionId, bucket });
    assert.equal(rep.ok, true, `bucket ${bucket} verified`);
  }
  const after = await dbs.catalogPool.query<{ job_key: string }>(
    `SELECT job_key::text FROM reject WHERE version_id = $1 ORDER BY job_key`,
    [plan.versionId],
  );
  assert.deepEqual(
    after.rows.map((r) => r.job_key),
    [String(ids[0]), String(ids[2])].sort((a, b) => Number(a) - Number(b)),
  );
  const inCatalog = await dbs.catalogPool.query<{ job_id: string }>(
    `SELECT job_id FROM job WHERE version_id = $1 AND job_id = ANY($2::text[])`,
    [plan.versionId, ids.slice(0, 3).map(String)],
  );
  assert.deepEqual(
    inCatalog.rows.map((r) => r.job_id),
    [String(ids[1])],
    'the fixed row is in the catalog, the bad ones are not',
  );

  // Buckets match now (source 1,200 = catalog 1,198 + 2 rejects), but the default threshold is 0.
  await assert.rejects(
    run(acts.reconcile, { catalog: 'q', source: 'director', versionId: plan.versionId, round: 2 }),
    /2 source records of director are quarantined, more than the threshold of 0: record \d+: bytes: must be a non-negative whole number/,
  );
  const report = await dbs.catalogPool.query<{ report: Record<string, any> }>(
    `SELECT report FROM reconciliation WHERE version_id = $1 AND round = 2`,
    [plan.versionId],
  );
  assert.equal(report.rows[0].report.sourceRows, 1_200);
  assert.equal(report.rows[0].report.catalogRows, 1_198);
  assert.equal(report.rows[0].report.rejects, 2);
  assert.equal(report.rows[0].report.sourceEqualsCatalogPlusRejects, true);
  assert.deepEqual(report.rows[0].report.mismatched, []);
  const sourceBytes = await dbs.sourcePool.query<{ s: string }>(`SELECT sum(jobbytes)::text AS s FROM job`);
  assert.deepEqual(
    report.rows[0].report.bytes,
    { source: sourceBytes.rows[0].s, catalogPlusRejects: sourceBytes.rows[0].s },
    'byte totals (negative quarantined values included on both sides)',
  );
  maxRejects = 2;
  const r3: ReconcileSummary = await run(acts.reconcile, {
    catalog: 'q',
    source: 'director',
    versionId: plan.versionId,
    round: 3,
  });
  assert.equal(r3.ok, true);
  assert.equal(r3.rejects, 2);
});
