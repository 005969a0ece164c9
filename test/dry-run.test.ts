/**
 * `start --dry-run`'s plan activity in process (MockActivityEnvironment, fresh databases with a
 * generated Bareos source that has no file records): its estimate comes from the page transactions
 * of the catalog's newest version of at least COPY_RATE_MIN_ROWS rows (a refresh of a few jobs, or
 * pages of no rows, do not count), and `--files` on a source without file records fails as the plan
 * of a real rebuild does.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { estimateCopySeconds } from '../activities/dry-run';
import { COPY_RATE_MIN_ROWS, readPageCopyRate } from '../lib/catalog';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, copyVersion, runActivity } from '../dev/harness/activity-env';

const JOBS = 12_000;
let fixture: ActivityFixture;

before(async () => {
  fixture = await activityFixture('dryrun', { jobs: JOBS, seed: 29 });
});

after(async () => {
  await fixture?.close();
});

/** The version's committed pages: rows over the sum of their transaction times, as SQL adds them up. */
async function pageRate(versionId: string): Promise<number> {
  const { rows } = await fixture.dbs.catalogPool.query<{ rows: number; s: number }>(
    `SELECT sum(rows)::int AS rows, sum(extract(epoch FROM committed_at - started_at))::float8 AS s
     FROM page WHERE version_id = $1 AND committed_at IS NOT NULL`,
    [versionId],
  );
  return rows[0].rows / rows[0].s;
}

test('estimate: seconds for the rows at the rate of one page in flight times the pages in flight', () => {
  assert.equal(estimateCopySeconds(0, 0, 4, 10_000), 0);
  assert.equal(estimateCopySeconds(100_000, 20, 4, 10_000), 3, '100,000 rows at 4 × 10,000 rows/s: 2.5 s, rounded up');
  assert.equal(estimateCopySeconds(100_000, 2, 4, 10_000), 5, 'no more pages in flight than pages');
  assert.equal(estimateCopySeconds(1, 1, 4, 1e-9) > 0, true);
});

test('the copy rate of the newest version large enough to measure; none before any, none with files', async () => {
  const catalog = 'rate';
  assert.equal(await readPageCopyRate(fixture.dbs.catalogPool, catalog, false), null, 'no version yet');
  const first = await copyVersion(fixture.acts, { catalog, pageSize: 3_000, workflowId: 'wf-rate-1' });
  const rate = await pageRate(first);
  assert.ok(Number.isFinite(rate) && rate > 0, `rate ${rate}`);
  assert.equal(await readPageCopyRate(fixture.dbs.catalogPool, catalog, false), rate);
  assert.equal(await readPageCopyRate(fixture.dbs.catalogPool, catalog, true), null, 'no version with file records');

  // A newer version whose pages copied no rows (a refresh that only deleted jobs) or too few to
  // measure by: the rate stays the first version's, and the estimate a finite number.
  const second = await copyVersion(fixture.acts, { catalog, pageSize: 3_000, workflowId: 'wf-rate-2' });
  await fixture.dbs.catalogPool.query(`UPDATE page SET rows = 0 WHERE version_id = $1`, [second]);
  assert.equal(await readPageCopyRate(fixture.dbs.catalogPool, catalog, false), rate);
  const dry = await runActivity(fixture.acts.dryRunPlan, { catalog, source: 'director' });
  assert.equal(dry.rows, JOBS);
  assert.equal(dry.jobs.new, JOBS, 'without --refresh every job is new');
  assert.equal(dry.estimateSeconds, estimateCopySeconds(JOBS, dry.pages, 4, rate));

  await fixture.dbs.catalogPool.query(`UPDATE page SET rows = $2 WHERE version_id = $1`, [
    second,
    Math.ceil(COPY_RATE_MIN_ROWS / 4),
  ]);
  assert.equal(await readPageCopyRate(fixture.dbs.catalogPool, catalog, false), await pageRate(second));

  // A catalog whose only version copied no rows: the default rate, still a number.
  const empty = 'rate-empty';
  const only = await copyVersion(fixture.acts, { catalog: empty, pageSize: 3_000, workflowId: 'wf-rate-3' });
  await fixture.dbs.catalogPool.query(`UPDATE page SET rows = 0 WHERE version_id = $1`, [only]);
  assert.equal(await readPageCopyRate(fixture.dbs.catalogPool, empty, false), null);
  const fallback = await runActivity(fixture.acts.dryRunPlan, { catalog: empty, source: 'director' });
  assert.ok(Number.isInteger(fallback.estimateSeconds) && fallback.estimateSeconds > 0, `${fallback.estimateSeconds}`);
});

test('--files on a source without file records: the dry run fails as the plan of the rebuild does', async () => {
  const plan = await runActivity(fixture.acts.planRebuild, {
    catalog: 'nofiles',
    source: 'director',
    files: true,
    workflowId: 'wf-nofiles',
    firstRunId: 'r1',
  }).then(
    () => null,
    (err: Error) => err.message,
  );
  assert.ok(plan, 'the rebuild cannot plan --files on this source');
  await assert.rejects(runActivity(fixture.acts.dryRunPlan, { catalog: 'nofiles', source: 'director', files: true }), {
    message: plan,
  });
});
