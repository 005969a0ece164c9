/**
 * Runbook step 2 Verify: replaying a committed page by hand leaves record counts and content
 * unchanged. The real copyPage activity runs in MockActivityEnvironment against real PostgreSQL.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Activities } from '../activities';
import type { TestDatabases } from '../dev/harness/harness';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture } from '../dev/harness/activity-env';
import type { CopyPageResult, PlanResult } from '../workflows/definitions';

let dbs: TestDatabases;
let acts: Activities;
let fixture: ActivityFixture;
let versionId: string;
const events: unknown[] = [];

before(async () => {
  fixture = await activityFixture('replay', { jobs: 3_000, seed: 5 });
  ({ dbs, acts } = fixture);
  const plan: PlanResult = await new MockActivityEnvironment().run(acts.planRebuild, {
    catalog: 'c',
    source: 'director',
    pageSize: 1000,
    workflowId: 'wf',
    firstRunId: 'run1',
  });
  versionId = plan.versionId;
  assert.equal(plan.pagesTotal, 3);
  // Step 1 Verify: the plan is stored before any page runs; the ledger is empty (checkpoint 0).
  const planned = await dbs.catalogPool.query(`SELECT count(*)::int AS n FROM plan_page WHERE version_id = $1`, [
    versionId,
  ]);
  const ledger = await dbs.catalogPool.query(`SELECT count(*)::int AS n FROM page WHERE version_id = $1`, [versionId]);
  assert.equal(planned.rows[0].n, 3);
  assert.equal(ledger.rows[0].n, 0);
  // planRebuild is idempotent per (workflow id, first run id).
  const again: PlanResult = await new MockActivityEnvironment().run(acts.planRebuild, {
    catalog: 'c',
    source: 'director',
    pageSize: 1000,
    workflowId: 'wf',
    firstRunId: 'run1',
  });
  assert.equal(again.versionId, versionId);
});

after(async () => {
  await fixture?.close();
});

async function copy(pageNo: number, attempt = 1): Promise<CopyPageResult> {
  const env = new MockActivityEnvironment({ attempt, heartbeatTimeoutMs: 2_000 });
  env.on('heartbeat', (d: unknown) => events.push(d));
  return env.run(acts.copyPage as (i: Parameters<Activities['copyPage']>[0]) => Promise<CopyPageResult>, {
    catalog: 'c',
    source: 'director',
    versionId,
    pageNo,
  });
}

/** Row versions (xmin) and content checksum of page 2's rows: an unchanged xmin means nothing was rewritten. */
async function pageState(): Promise<{ n: number; xmins: string; content: string }> {
  const { rows } = await dbs.catalogPool.query(
    `SELECT count(*)::int AS n, md5(string_agg(xmin::text, ',' ORDER BY job_key)) AS xmins,
            md5(string_agg(t::text, E'\\n' ORDER BY job_key)) AS content
     FROM job t WHERE version_id = $1 AND page_no = 2`,
    [versionId],
  );
  return rows[0];
}

test('a committed page replayed with its ledger row present returns the recorded result and writes nothing', async () => {
  const first = await copy(2);
  assert.equal(first.alreadyCommitted, false);
  assert.equal(first.rows, 1000);
  assert.ok(events.length >= 1, 'the page heartbeats');
  const state = await pageState();
  const replay = await copy(2, 2);
  assert.equal(replay.alreadyCommitted, true);
  assert.equal(replay.rows, first.rows);
  assert.equal(replay.checksum, first.checksum);
  assert.equal(replay.attempt, 1, 'the ledger names the attempt that committed');
  assert.deepEqual(await pageState(), state, 'no row rewritten');
});

test('with the ledger row deleted, the replay rewrites the page and the content is unchanged', async () => {
  const state = await pageState();
  const before = await dbs.catalogPool.query(`SELECT checksum FROM page WHERE version_id = $1 AND page_no = 2`, [
    versionId,
  ]);
  await dbs.catalogPool.query(`DELETE FROM page WHERE version_id = $1 AND page_no = 2`, [versionId]);
  const replay = await copy(2, 3);
  assert.equal(replay.alreadyCommitted, false);
  assert.equal(replay.checksum, before.rows[0].checksum, 'same page checksum');
  const after = await pageState();
  assert.equal(after.n, state.n, 'same row count');
  assert.equal(after.content, state.content, 'same content');
  assert.equal(after.xmins, state.xmins, 'identical rows are not rewritten (no dead tuples)');
  const total = await dbs.catalogPool.query(`SELECT count(*)::int AS n FROM job WHERE version_id = $1`, [versionId]);
  assert.equal(total.rows[0].n, 1000, 'no duplicates');
});

test('a changed source row is replaced in full on replay', async () => {
  const { rows } = await dbs.catalogPool.query<{ job_id: string }>(
    `SELECT job_id FROM job WHERE version_id = $1 AND page_no = 2 ORDER BY job_key LIMIT 1`,
    [versionId],
  );
  const id = rows[0].job_id;
  await dbs.sourcePool.query(`UPDATE job SET jobstatus = 'E', jobfiles = 4242, comment = 'changed' WHERE jobid = $1`, [
    id,
  ]);
  await dbs.catalogPool.query(`DELETE FROM page WHERE version_id = $1 AND page_no = 2`, [versionId]);
  await copy(2, 4);
  const r = await dbs.catalogPool.query(
    `SELECT status, files::text, comment FROM job WHERE version_id = $1 AND job_id = $2`,
    [versionId, id],
  );
  assert.deepEqual(r.rows[0], { status: 'E', files: '4242', comment: 'changed' });
});

test('a page of a version that is no longer building is refused, non-retryable, nothing written', async () => {
  await dbs.catalogPool.query(`UPDATE version SET status = 'abandoned' WHERE version_id = $1`, [versionId]);
  await assert.rejects(copy(3), (err: Error & { type?: string; nonRetryable?: boolean }) => {
    assert.equal(err.type, 'VERSION_FENCED');
    assert.equal(err.nonRetryable, true);
    return true;
  });
  const n = await dbs.catalogPool.query(`SELECT count(*)::int AS n FROM job WHERE version_id = $1 AND page_no = 3`, [
    versionId,
  ]);
  assert.equal(n.rows[0].n, 0);
  const l = await dbs.catalogPool.query(`SELECT count(*)::int AS n FROM page WHERE version_id = $1 AND page_no = 3`, [
    versionId,
  ]);
  assert.equal(l.rows[0].n, 0);
});
