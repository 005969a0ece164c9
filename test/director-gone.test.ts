/**
 * Director jobs deleted from the source during a rebuild (design.md G10: a record that vanishes
 * after the plan is a delta, never a failed rebuild), through the real activities on PostgreSQL (no
 * Temporal), with file records: a job deleted with its files between the plan and its page, one
 * whose `File` rows stay behind, and one deleted after its page committed. Every page commits, the
 * version reconciles (the last one after its bucket's repair) and is published without them.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from 'pg';
import { generateBareosFiles } from '../dev/bareos-file-generator';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, runActivity } from '../dev/harness/activity-env';

const CATALOG = 'dgone';
let fx: ActivityFixture;

async function onSource<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: fx.dbs.sourceUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

before(async () => {
  fx = await activityFixture('dgone', { jobs: 150, seed: 61 });
  await onSource(async (c) => {
    await c.query('BEGIN');
    await generateBareosFiles(c, 3_000, 61);
    await c.query('COMMIT');
  });
});

after(async () => {
  await fx?.close();
});

test('director jobs deleted after the plan (before their page, with or without their File rows, and after it): every page commits, the version reconciles and is published without them', async () => {
  const { acts, dbs } = fx;
  const pool = dbs.catalogPool;
  const plan = await runActivity(acts.planRebuild, {
    catalog: CATALOG,
    source: 'director',
    files: true,
    pageSize: 30,
    workflowId: `wf-${CATALOG}`,
    firstRunId: 'r1',
  });
  const versionId = plan.versionId;
  assert.ok(plan.pagesTotal >= 4, `pages: ${plan.pagesTotal}`);
  const pages = (
    await pool.query<{ first: string; last: string }>(
      `SELECT first_key::text AS first, last_key::text AS last FROM plan_page WHERE version_id = $1 ORDER BY page_no`,
      [versionId],
    )
  ).rows;
  /** The first job of page `n` (from 1) that has file records in the source. */
  const jobWithFiles = (n: number) =>
    onSource(async (c) => {
      const { rows } = await c.query<{ id: string }>(
        `SELECT min(j.jobid)::text AS id FROM job j
         WHERE j.jobid BETWEEN $1 AND $2 AND EXISTS (SELECT 1 FROM file f WHERE f.jobid = j.jobid)`,
        [pages[n - 1].first, pages[n - 1].last],
      );
      assert.ok(rows[0].id, `page ${n} has a job with files`);
      return rows[0].id;
    });
  const afterItsPage = await jobWithFiles(1);
  const withFiles = await jobWithFiles(2);
  const filesLeft = await jobWithFiles(3);
  await onSource(async (c) => {
    // As `delete jobid` does: the job and its file records.
    await c.query(`DELETE FROM file WHERE jobid = $1`, [withFiles]);
    await c.query(`DELETE FROM job WHERE jobid = $1`, [withFiles]);
    // The job row alone: its File rows stay behind (orphans, never copied).
    await c.query(`DELETE FROM job WHERE jobid = $1`, [filesLeft]);
  });

  const first = await runActivity(acts.copyPage, { catalog: CATALOG, source: 'director', versionId, pageNo: 1 });
  await onSource(async (c) => {
    await c.query(`DELETE FROM file WHERE jobid = $1`, [afterItsPage]);
    await c.query(`DELETE FROM job WHERE jobid = $1`, [afterItsPage]);
  });
  const results = [first];
  for (let p = 2; p <= plan.pagesTotal; p++)
    results.push(await runActivity(acts.copyPage, { catalog: CATALOG, source: 'director', versionId, pageNo: p }));
  assert.equal(results.length, plan.pagesTotal, 'every page committed');
  await runActivity(acts.sealVersion, { versionId });

  const r1 = await runActivity(acts.reconcile, { catalog: CATALOG, source: 'director', versionId, round: 1 });
  // The job deleted after its page committed is still in the catalog: its bucket differs and is repaired.
  const bucket = (
    await pool.query<{ b: string | null }>(`SELECT bucket::text AS b FROM job_v${versionId} WHERE job_id = $1`, [
      afterItsPage,
    ])
  ).rows[0].b;
  assert.equal(r1.ok, false);
  assert.deepEqual(r1.mismatched, [bucket ?? 'none']);
  for (const b of r1.mismatched) {
    const fixed = await runActivity(acts.repairBucket, {
      catalog: CATALOG,
      source: 'director',
      versionId,
      bucket: b === 'none' ? null : b,
    });
    assert.equal(fixed.ok, true);
  }
  const r2 = await runActivity(acts.reconcile, { catalog: CATALOG, source: 'director', versionId, round: 2 });
  assert.equal(r2.ok, true, JSON.stringify(r2));
  assert.equal(r2.delta, 0);
  await runActivity(acts.publishVersion, { catalog: CATALOG, versionId, allowShrink: false });

  const source = await onSource(async (c) => {
    const jobs = await c.query<{ id: string }>(`SELECT jobid::text AS id FROM job ORDER BY jobid`);
    const files = await c.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM file f WHERE EXISTS (SELECT 1 FROM job j WHERE j.jobid = f.jobid)`,
    );
    return { jobs: jobs.rows.map((j) => j.id), files: files.rows[0].n };
  });
  assert.equal(source.jobs.length, 147);
  const active = await pool.query<{ id: string }>(
    `SELECT job_id AS id FROM active_jobs WHERE catalog_name = $1 ORDER BY job_id::bigint`,
    [CATALOG],
  );
  assert.deepEqual(
    active.rows.map((j) => j.id),
    source.jobs,
  );
  const files = await pool.query<{ n: number; gone: number }>(
    `SELECT count(*)::int AS n, count(*) FILTER (WHERE job_id = ANY($2::text[]))::int AS gone
     FROM active_files WHERE catalog_name = $1`,
    [CATALOG, [afterItsPage, withFiles, filesLeft]],
  );
  assert.deepEqual(files.rows[0], { n: source.files, gone: 0 });
});
