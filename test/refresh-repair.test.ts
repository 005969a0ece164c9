/**
 * A refresh's reconciliation repairs by key (activities/reconcile-refresh.ts), through the real
 * activities on real PostgreSQL and a generated Bareos source: the director deletes a job the
 * refresh did not touch and writes one into a gap of its job ids, after the refresh's pages were
 * copied. The round compares each key range's counts with the source at the watermark, compares
 * the keys of the ranges that disagree, removes the job the source no longer has and writes the one
 * it misses, in the round itself; the published refresh equals a full rebuild of the source as it
 * is then. And retention beyond a full version that refreshes build on: the dropped version's table
 * stays while a kept version reads it as a segment, and only the rows no kept version sees go. And
 * the reject threshold: a refresh whose page quarantines a record is not published, as a rebuild.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import format from 'pg-format';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, runActivity } from '../dev/harness/activity-env';
import { viewDifference } from '../dev/harness/views';

let fx: ActivityFixture;
before(async () => {
  fx = await activityFixture('refrepair', { jobs: 3000, seed: 67 });
});
after(async () => {
  await fx?.close();
});

/** Plans `catalog` (a refresh with `refresh`) and copies its pages and seals it; `between` runs before the reconciliation. */
async function build(catalog: string, o: { refresh?: boolean; run: string; between?: () => Promise<void> }) {
  const { acts } = fx;
  const plan = await runActivity(acts.planRebuild, {
    catalog,
    source: 'director',
    ...(o.refresh ? { refresh: true } : {}),
    workflowId: `catalog-rebuild/${catalog}`,
    firstRunId: o.run,
  });
  const versionId = plan.versionId;
  for (let p = 1; p <= plan.pagesTotal; p++)
    await runActivity(acts.copyPage, { catalog, source: 'director', versionId, pageNo: p });
  await runActivity(acts.sealVersion, { versionId });
  await runActivity(acts.indexVersion, { versionId });
  await o.between?.();
  const round = await runActivity(acts.reconcile, { catalog, source: 'director', versionId, round: 1 });
  assert.equal(round.ok, true, JSON.stringify(round));
  await runActivity(acts.publishVersion, { catalog, versionId, allowShrink: false });
  return { plan, versionId };
}

/** The source's job ids, ascending, as text. */
async function jobIds(): Promise<string[]> {
  const { rows } = await fx.dbs.sourcePool.query<{ id: string }>(`SELECT jobid::text AS id FROM job ORDER BY jobid`);
  return rows.map((r) => r.id);
}

test('a refresh whose source lost a job and gained one below the watermark after its pages: its reconciliation removes and writes them by key, and it equals a full rebuild', async () => {
  const src = fx.dbs.sourcePool;
  const ids = await jobIds();
  await build('refreshed', { run: '1' });
  // What the refresh plans for: one rescheduled job.
  await src.query(`UPDATE job SET jobstatus = 'A' WHERE jobid = $1`, [ids[100]]);
  // After its pages: a job it did not touch deleted, and one written into a gap of the ids below the
  // watermark (a copy of another job's row under the free id).
  const gone = ids[2000];
  const gap = (
    await src.query<{ id: string }>(
      `SELECT (min(jobid) + 1)::text AS id FROM job j WHERE NOT EXISTS (SELECT 1 FROM job k WHERE k.jobid = j.jobid + 1)`,
    )
  ).rows[0].id;
  assert.ok(BigInt(gap) < BigInt(ids[ids.length - 1]), `a gap below the newest job (${gap})`);
  const { plan, versionId } = await build('refreshed', {
    refresh: true,
    run: '2',
    between: async () => {
      await src.query(`DELETE FROM job WHERE jobid = $1`, [gone]);
      await src.query(
        `INSERT INTO job SELECT (jsonb_populate_record(NULL::job, to_jsonb(j) || jsonb_build_object('jobid', $2::bigint, 'job', j.job || '.gap'))).*
         FROM job j WHERE j.jobid = $1`,
        [ids[500], gap],
      );
    },
  });
  assert.deepEqual([plan.refresh?.newJobs, plan.refresh?.changedJobs, plan.refresh?.deletedJobs], [0, 1, 0]);
  const report = await fx.dbs.catalogPool.query<{ r: { repair?: { rewritten: number; removed: number } } }>(
    `SELECT report AS r FROM reconciliation WHERE version_id = $1 AND round = 1`,
    [versionId],
  );
  assert.deepEqual(
    [report.rows[0].r.repair?.rewritten, report.rows[0].r.repair?.removed],
    [1, 1],
    JSON.stringify(report.rows[0].r),
  );
  const present = await fx.dbs.catalogPool.query<{ job_id: string }>(
    `SELECT job_id FROM active_jobs WHERE catalog_name = 'refreshed' AND job_id = ANY ($1::text[]) ORDER BY job_id`,
    [[gone, gap]],
  );
  assert.deepEqual(
    present.rows.map((r) => r.job_id),
    [gap],
    'the deleted job is gone, the new one is there',
  );
  await build('full', { run: '3' });
  const d = await viewDifference(fx.dbs.catalogPool, 'active_jobs', 'refreshed', 'full');
  assert.deepEqual({ onlyA: d.onlyA, onlyB: d.onlyB }, { onlyA: 0, onlyB: 0 }, 'nothing lost or doubled');
});

test('retention drops a full version that refreshes still build on: its table stays while a kept version reads it, only the rows no kept version sees are deleted, and the active version equals a full rebuild', async () => {
  const src = fx.dbs.sourcePool;
  const pool = fx.dbs.catalogPool;
  const ids = await jobIds();
  const v1 = (await build('kept', { run: '1' })).versionId;
  const retire = () => runActivity(fx.acts.retireVersions, { catalog: 'kept', retention: 1 });
  await src.query(`UPDATE job SET joberrors = joberrors + 1 WHERE jobid = $1`, [ids[10]]);
  const v2 = (await build('kept', { refresh: true, run: '2' })).versionId;
  assert.deepEqual(await retire(), [], 'version 1 is the one retired version kept');
  await src.query(`UPDATE job SET joberrors = joberrors + 1 WHERE jobid = $1`, [ids[20]]);
  const v3 = (await build('kept', { refresh: true, run: '3' })).versionId;
  assert.deepEqual(await retire(), [v1], 'beyond retention: version 1 dropped');
  const status = await pool.query<{ v: string; status: string; segments: string[] }>(
    `SELECT version_id::text AS v, status, segment_ids::text[] AS segments FROM version WHERE catalog_name = 'kept' ORDER BY version_id`,
  );
  assert.deepEqual(
    status.rows.map((r) => [r.v, r.status]),
    [
      [v1, 'dropped'],
      [v2, 'retired'],
      [v3, 'active'],
    ],
  );
  assert.ok(status.rows[2].segments.includes(v1), `version ${v3} reads the table of version ${v1}`);
  const table = await pool.query(`SELECT 1 FROM pg_class WHERE relname = $1`, [`job_v${v1}`]);
  assert.equal(table.rowCount, 1, 'the dropped version keeps its table while kept versions read it');
  // The row of job ids[10] as version 1 had it: superseded by version 2, seen by no kept version.
  const old = await pool.query<{ n: number }>(
    format('SELECT count(*)::int AS n FROM %I WHERE job_id = $1', `job_v${v1}`),
    [ids[10]],
  );
  assert.equal(old.rows[0].n, 0, 'what only version 1 saw is deleted');
  await build('kept-full', { run: '4' });
  const d = await viewDifference(pool, 'active_jobs', 'kept', 'kept-full');
  assert.deepEqual({ onlyA: d.onlyA, onlyB: d.onlyB }, { onlyA: 0, onlyB: 0 }, 'nothing lost or doubled');
});

test('a refresh that meets a record its page quarantines is held to maxRejects as a rebuild is: not published, the active version unchanged', async () => {
  const src = fx.dbs.sourcePool;
  const pool = fx.dbs.catalogPool;
  const v1 = (await build('held', { run: '1' })).versionId;
  const { rows } = await src.query<{ id: string; bytes: string }>(
    `SELECT jobid::text AS id, jobbytes::text AS bytes FROM job ORDER BY jobid OFFSET 1234 LIMIT 1`,
  );
  await src.query(`UPDATE job SET jobbytes = -5 WHERE jobid = $1`, [rows[0].id]);
  try {
    const plan = await runActivity(fx.acts.planRebuild, {
      catalog: 'held',
      source: 'director',
      refresh: true,
      workflowId: 'catalog-rebuild/held',
      firstRunId: '2',
    });
    assert.deepEqual([plan.refresh?.changedJobs, plan.fullRebuildBecause], [1, undefined], 'a refresh');
    for (let p = 1; p <= plan.pagesTotal; p++)
      await runActivity(fx.acts.copyPage, {
        catalog: 'held',
        source: 'director',
        versionId: plan.versionId,
        pageNo: p,
      });
    await runActivity(fx.acts.sealVersion, { versionId: plan.versionId });
    await assert.rejects(
      runActivity(fx.acts.reconcile, { catalog: 'held', source: 'director', versionId: plan.versionId, round: 1 }),
      new RegExp(
        `1 source records of director are quarantined, more than the threshold of 0: .*Version ${plan.versionId} is not published`,
      ),
    );
    const rejects = await pool.query<{ job_id: string }>(`SELECT job_id FROM reject WHERE version_id = $1`, [
      plan.versionId,
    ]);
    assert.deepEqual(rejects.rows, [{ job_id: rows[0].id }], 'the record quarantined with its reason');
    const active = await pool.query<{ v: string }>(
      `SELECT version_id::text AS v FROM active WHERE catalog_name = 'held'`,
    );
    assert.deepEqual(active.rows, [{ v: v1 }], 'the active version is unchanged');
  } finally {
    await src.query(`UPDATE job SET jobbytes = $2::numeric WHERE jobid = $1`, [rows[0].id, rows[0].bytes]);
  }
});

test('a job gone and another come in one cell of 64 keys after the refresh pages were copied: the counts agree, the key sums do not, and the reconciliation repairs both', async () => {
  const src = fx.dbs.sourcePool;
  const ids = await jobIds();
  await build('swap', { run: '1' });
  await src.query(`UPDATE job SET jobstatus = 'A' WHERE jobid = $1`, [ids[300]]);
  // A free id whose neighbour below is a job of the same cell: that job goes, a new one takes the id.
  const { rows } = await src.query<{ gone: string; come: string }>(
    `SELECT j.jobid::text AS gone, (j.jobid + 1)::text AS come FROM job j
     WHERE NOT EXISTS (SELECT 1 FROM job k WHERE k.jobid = j.jobid + 1) AND (j.jobid + 1) % 64 <> 0
       AND j.jobid < (SELECT max(jobid) FROM job) ORDER BY j.jobid LIMIT 1`,
  );
  const { gone, come } = rows[0];
  const { versionId } = await build('swap', {
    refresh: true,
    run: '2',
    between: async () => {
      await src.query(
        `INSERT INTO job SELECT (jsonb_populate_record(NULL::job, to_jsonb(j) || jsonb_build_object('jobid', $2::bigint, 'job', j.job || '.swap'))).*
         FROM job j WHERE j.jobid = $1`,
        [gone, come],
      );
      await src.query(`DELETE FROM job WHERE jobid = $1`, [gone]);
    },
  });
  const report = await fx.dbs.catalogPool.query<{ r: { repair: { rewritten: number; removed: number } } }>(
    `SELECT report AS r FROM reconciliation WHERE version_id = $1 AND round = 1`,
    [versionId],
  );
  assert.deepEqual([report.rows[0].r.repair.rewritten, report.rows[0].r.repair.removed], [1, 1]);
  const present = await fx.dbs.catalogPool.query<{ job_id: string }>(
    `SELECT job_id FROM active_jobs WHERE catalog_name = 'swap' AND job_id = ANY ($1::text[])`,
    [[gone, come]],
  );
  assert.deepEqual(
    present.rows.map((r) => r.job_id),
    [come],
  );
  await build('swap-full', { run: '3' });
  const d = await viewDifference(fx.dbs.catalogPool, 'active_jobs', 'swap', 'swap-full');
  assert.deepEqual({ onlyA: d.onlyA, onlyB: d.onlyB }, { onlyA: 0, onlyB: 0 }, 'nothing lost or doubled');
  // The next refresh finds no job new or gone: the cells were stored again after the repair. (The
  // job the repair wrote row by row has no stored row hash: that refresh reads it once more.)
  const next = await runActivity(fx.acts.dryRunPlan, { catalog: 'swap', source: 'director', refresh: true });
  assert.deepEqual([next.jobs.new, next.jobs.gone], [0, 0], JSON.stringify(next));
});
