/**
 * `start --dry-run`'s plan activity in process (MockActivityEnvironment, fresh databases with a
 * generated Bareos source that has no file records): its estimate comes from the page transactions
 * of the catalog's newest version of at least COPY_RATE_MIN_ROWS rows (a refresh of a few jobs, or
 * pages of no rows, do not count); with `--files` its pages are the plan's (weighed by each job's
 * file records) and the estimate counts the file records; on a source without file records, or
 * without the table of them, it fails as the plan of a real rebuild does; so does a source database
 * without the job table, or whose login may not read it, refused by name.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import format from 'pg-format';
import { BareosSource } from '../lib/sources';
import { estimateCopySeconds } from '../activities/dry-run';
import { COPY_RATE_MIN_ROWS, readPageCopyRate } from '../lib/catalog';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, copyVersion, runActivity } from '../dev/harness/activity-env';
import { PAGE_SIZING } from '../lib/page-sizing';

const JOBS = 12_000;
let fixture: ActivityFixture;

before(async () => {
  fixture = await activityFixture('dryrun', { jobs: JOBS, seed: 29 });
});

after(async () => {
  await fixture?.close();
});

/** The version's committed pages: their planned rows over the sum of their transaction times, as SQL adds them up. */
async function pageRate(versionId: string): Promise<number> {
  const { rows } = await fixture.dbs.catalogPool.query<{ rows: number; s: number }>(
    `SELECT sum(pp.planned_rows)::int AS rows, sum(extract(epoch FROM p.committed_at - p.started_at))::float8 AS s
     FROM page p JOIN plan_page pp USING (version_id, page_no) WHERE p.version_id = $1 AND p.committed_at IS NOT NULL`,
    [versionId],
  );
  return rows[0].rows / rows[0].s;
}

test('estimate: seconds for the rows at the rate of one page in flight times the pages in flight', () => {
  assert.equal(estimateCopySeconds(0, 0, 4, 10_000), 0);
  assert.equal(
    estimateCopySeconds(100_000, 20, 4, 10_000),
    3,
    '100,000 rows at 4 × 10,000 rows/s: 2.5 s, and 5 round trips of 0.1 s a slot, rounded up',
  );
  assert.equal(estimateCopySeconds(100_000, 2, 4, 10_000), 6, 'no more pages in flight than pages: 5 s + 0.1 s');
  assert.equal(estimateCopySeconds(500, 73, 1, 1e6), 8, '73 small pages one at a time: their round trips');
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

test('a source database without the job table: the plan and the dry run refuse it by name, before any read', async (t) => {
  // A databaseUrl naming the wrong database, or a catalog half restored.
  await fixture.dbs.sourcePool.query(`ALTER TABLE job RENAME TO job_away`);
  t.after(() => fixture.dbs.sourcePool.query(`ALTER TABLE job_away RENAME TO job`));
  const refused = await runActivity(fixture.acts.planRebuild, {
    catalog: 'nojobs',
    source: 'director',
    workflowId: 'wf-nojobs',
    firstRunId: 'r1',
  }).then(
    () => assert.fail('no job table'),
    (err: Error & { type?: string; nonRetryable?: boolean }) => err,
  );
  assert.equal(refused.type, 'SOURCE_DATA_INVALID');
  assert.equal(refused.nonRetryable, true);
  assert.match(
    refused.message,
    /^source "director" database [^ ]+ \(sources\.director\.databaseUrl\) has no job table: a bareos source's databaseUrl must name the director's catalog database/,
  );
  await assert.rejects(runActivity(fixture.acts.dryRunPlan, { catalog: 'nojobs', source: 'director' }), {
    message: refused.message,
  });
  const versions = await fixture.dbs.catalogPool.query(`SELECT 1 FROM version WHERE catalog_name = 'nojobs'`);
  assert.equal(versions.rowCount, 0, 'nothing planned');
});

test('a source login that may not read the job table is refused by name, before any read', async () => {
  const role = `crt_noread_${randomBytes(4).toString('hex')}`;
  const db = fixture.dbs.sourcePool;
  await db.query(format('CREATE ROLE %I LOGIN PASSWORD %L', role, randomBytes(12).toString('hex')));
  const url = new URL(fixture.dbs.sourceUrl);
  url.username = role;
  url.password = '';
  const source = new BareosSource('noread', { kind: 'bareos', databaseUrl: url.toString() });
  try {
    await db.query(format('GRANT SELECT ON client, pool, fileset TO %I', role));
    await assert.rejects(source.checkCatalogTables(), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'SOURCE_DATA_INVALID');
      assert.match(
        err.message,
        /^source "noread" database [^ ]+ \(sources\.noread\.databaseUrl\): its login may not read the job table \(no SELECT privilege\): grant it SELECT/,
      );
      assert.doesNotMatch(err.message, new RegExp(role), 'no login name in the message');
      return true;
    });
    await db.query(format('GRANT SELECT ON job TO %I', role));
    await source.checkCatalogTables();
  } finally {
    await source.close();
    await db.query(format('DROP OWNED BY %I', role));
    await db.query(format('DROP ROLE %I', role));
  }
});

test('--files: no File table fails as the plan does; the pages of the plan, the file records to copy, an estimate that counts them', async (t) => {
  const files = await activityFixture('dryfiles', { jobs: 300, seed: 31, files: 250_000 });
  t.after(() => files.close());
  const input = { catalog: 'withfiles', source: 'director', files: true };

  // Without its File table (a schema half restored): refused before anything is planned.
  await files.dbs.sourcePool.query(`ALTER TABLE file RENAME TO file_away`);
  const refused = await runActivity(files.acts.planRebuild, {
    ...input,
    workflowId: 'wf-nofile',
    firstRunId: 'r1',
  }).then(
    () => assert.fail('no File table'),
    (err: Error) => err.message,
  );
  assert.match(refused, /the source catalog \(Version \d+\) has no file table: --files needs/);
  await assert.rejects(runActivity(files.acts.dryRunPlan, input), { message: refused });
  await files.dbs.sourcePool.query(`ALTER TABLE file_away RENAME TO file`);

  const dry = await runActivity(files.acts.dryRunPlan, input);
  const count = await files.dbs.sourcePool.query<{ n: number }>(`SELECT count(*)::int AS n FROM file`);
  assert.equal(dry.fileRecords.copy, count.rows[0].n);
  const plan = await runActivity(files.acts.planRebuild, { ...input, workflowId: 'wf-withfiles', firstRunId: 'r1' });
  assert.equal(dry.pages, plan.pagesTotal, "the dry run's pages are the plan's");
  // No version to measure by: the default rate of one page in flight, over jobs and file records.
  const weight = dry.rows + dry.fileRecords.copy;
  assert.ok(weight > PAGE_SIZING.maxRows && dry.pages > 1, `more rows than one page holds (${dry.pages} pages)`);
  assert.equal(dry.estimateSeconds, estimateCopySeconds(weight, dry.pages, 4, 12_500));
});
