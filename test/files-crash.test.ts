/**
 * A file-level rebuild (`start --files`) under a real fault: real worker processes on a private
 * Temporal dev server and fresh databases. The source's first job holds 110,000 file records (more
 * than a page's target of 100,000 rows: a page of its own, streamed); its worker is SIGKILLed inside
 * that page's transaction, after the job's files were written and before the commit. The retry on
 * another worker writes the job again; besides it, at most the one other page in flight on the killed
 * worker is re-run; the published `active_files`
 * equals the source field by field and `active_jobs` equals the source.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { Client } from 'pg';
import { generateBareosFiles } from '../dev/bareos-file-generator';
import { rebuildFixture } from '../dev/harness/fixture';
import { events, killInsidePageTransaction, ledger } from '../dev/harness/faults';
import { catalogFileRecords, sourceFileRecords } from '../dev/harness/file-records';
import { compareCatalogToSource, privateTemporal } from '../dev/harness/harness';
import { serverTimezone } from '../dev/harness/fixture';
import { waitFor } from '../dev/harness/wait';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;

before(async () => {
  temporal = await privateTemporal();
});

after(async () => {
  await temporal?.stop();
  if (temporal) fs.rmSync(temporal.dir, { recursive: true, force: true });
});

/** Files of the source's first job: more than one page's target (PAGE_SIZING.maxRows). */
const BIG_JOB_FILES = 110_000;

test('SIGKILL inside the page of a job with 110,000 files: its pages alone are written again; active_files equals the source', async (t) => {
  const ctx = await rebuildFixture(t, { address: temporal.address, tag: 'filekill', jobs: 2_000, seed: 41 });
  const src = new Client({ connectionString: ctx.dbs.sourceUrl });
  await src.connect();
  const bigJob = await (async () => {
    try {
      await src.query('BEGIN');
      await generateBareosFiles(src, 60_000, 41);
      const { rows } = await src.query<{ id: string }>(`SELECT min(jobid)::text AS id FROM job`);
      await src.query(
        `INSERT INTO file (fileid, fileindex, jobid, pathid, deltaseq, markid, lstat, md5, name)
         SELECT (SELECT max(fileid) FROM file) + k, k, $1::int, 1 + k % 50, 0, 0,
                'gB B IGk B Po Bk A M BAA B BlU/EA BlU/EA BlU/EA A A B', 'md5', 'big-' || k
         FROM generate_series(1, $2::int) AS k`,
        [rows[0].id, BIG_JOB_FILES],
      );
      await src.query(
        `UPDATE job SET type = 'B', purgedfiles = 0, jobfiles = (SELECT count(*) FROM file WHERE jobid = $1) WHERE jobid = $1`,
        [rows[0].id],
      );
      await src.query('COMMIT');
      return rows[0].id;
    } finally {
      await src.end();
    }
  })();

  // Attempt 1 of page 1 (the big job: the first job is the first page) sleeps inside its transaction
  // after its rows and files are written, on whichever worker takes it.
  const slow = { CATALOG_REBUILD_FAULTS: JSON.stringify({ slowPage: { pageNo: 1, ms: 8_000 } }) };
  await Promise.all([ctx.spawn(slow), ctx.spawn(slow)]);
  const handle = await ctx.start({ files: true, concurrency: 2, heartbeatTimeoutMs: 5_000 });
  const versionId = await waitFor('the plan', async () => (await ctx.progress(handle)).versionId, {
    timeoutMs: 60_000,
    intervalMs: 50,
  });
  const plan = await ctx.dbs.catalogPool.query<{ page_no: number; first_key: string; planned_rows: number }>(
    `SELECT page_no, first_key::text, planned_rows FROM plan_page WHERE version_id = $1 ORDER BY page_no`,
    [versionId],
  );
  assert.equal(plan.rows[0].first_key, bigJob);
  assert.equal(plan.rows[0].planned_rows, 1 + BIG_JOB_FILES, 'the big job is a page of its own, weighed by JobFiles');
  assert.ok(plan.rows.length > 1);

  const killed = await killInsidePageTransaction(
    ctx.dbs.catalogPool,
    ctx.fleet,
    () => ctx.fleet.live(),
    60_000,
    (s) => s.app.endsWith(`:page:${versionId}:1`),
  );
  await ctx.spawn(); // the replacement
  const result = await ctx.result(handle, 240_000);
  assert.equal(result.published, true, JSON.stringify(result));

  const pages = await ledger(ctx.dbs.catalogPool, versionId);
  assert.equal(pages.length, plan.rows.length, 'one ledger row per planned page');
  assert.ok(pages[0].attempt >= 2, 'page 1 was written again by a later attempt');
  // The killed worker loses at most one unit per slot: page 1 and at most one other page in flight with it.
  const others = pages.filter((p) => p.pageNo !== 1 && p.attempt !== 1).map((p) => p.pageNo);
  assert.ok(others.length <= 1, `pages re-run besides page 1: ${others.join(', ')}`);
  const retries = await events(ctx.dbs.catalogPool, versionId, 'page_retry');
  assert.ok(
    retries.some((e) => (e.details as { pageNo?: number }).pageNo === 1),
    `page_retry of page 1 (killed ${killed.worker.identity}): ${JSON.stringify(retries)}`,
  );

  const expected = await sourceFileRecords(ctx.dbs.sourcePool);
  const actual = await catalogFileRecords(ctx.dbs.catalogPool, { catalog: ctx.catalog });
  assert.equal(actual.size, expected.size);
  assert.ok(expected.size >= 60_000 + BIG_JOB_FILES);
  let differing = 0;
  for (const [id, want] of expected) if (actual.get(id) !== want) differing++;
  assert.equal(differing, 0, 'every file record equals the source field by field');
  const jobs = await compareCatalogToSource(
    ctx.dbs.catalogPool,
    ctx.dbs.sourcePool,
    ctx.catalog,
    await serverTimezone(ctx.dbs.sourcePool),
  );
  assert.equal(jobs.catalog, jobs.source, 'every job equals the source');
});
