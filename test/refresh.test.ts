/**
 * `start --refresh` on a director catalog (real worker processes, a private Temporal dev server,
 * PostgreSQL): the source is changed the ways real directors change it (new jobs, a status changed
 * by a reschedule, deleted jobs, a renumbered job, a renamed client, files purged), and the
 * refreshed catalog equals, in `active_jobs` and `active_files` (deleted included), a full rebuild
 * of the same source into another catalog; the refresh writes only the changed jobs (its own table
 * holds them alone). A refresh with nothing changed publishes nothing and records `refresh: up to
 * date`; a refresh after a rollback, or of a catalog without a version, runs a full rebuild and
 * says why; `--verify full` re-reads everything and repairs what detection cannot see (a catalog
 * row damaged in place); `--dry-run` counts exactly and changes nothing; a worker killed inside a refresh page
 * costs a retry of that page.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Pool } from 'pg';
import format from 'pg-format';
import { rollbackCatalog } from '../lib/catalog';
import { startRebuild, waitForResult } from '../client/index';
import { planRetryLine } from '../client/temporal-facts';
import { rebuildFixture, startAndWait } from '../dev/harness/fixture';
import { privateTemporal, runCliAsync } from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';
import { viewDifference } from '../dev/harness/views';
import { changeDirectorSource as changeSource } from '../dev/harness/director-changes';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
before(async () => {
  temporal = await privateTemporal();
});
after(async () => {
  await temporal?.stop();
});

const start = startAndWait;

/** The newest version of `catalog`: id, base and the rows of its own table. */
async function newestVersion(pool: Pool, catalog: string) {
  const { rows } = await pool.query<{ v: string; base: string | null }>(
    `SELECT version_id::text AS v, base_version_id::text AS base FROM version WHERE catalog_name = $1 ORDER BY version_id DESC LIMIT 1`,
    [catalog],
  );
  const own = await pool.query<{ n: number }>(format('SELECT count(*)::int AS n FROM %I', `job_v${rows[0].v}`));
  return { versionId: rows[0].v, base: rows[0].base, ownRows: own.rows[0].n };
}

test('a refresh equals a full rebuild of the changed source, writes only what changed, and is up to date when nothing changed', async (t) => {
  const fx = await rebuildFixture(t, { address: temporal.address, tag: 'refresh', jobs: 3000, seed: 41 });
  await fx.spawn();
  const pool = fx.dbs.catalogPool;
  const refreshed = `${fx.catalog}-r`;
  const full = `${fx.catalog}-f`;

  const first = await start(fx, refreshed, ['--refresh']);
  assert.equal(first.code, 0, first.text);
  assert.match(first.text, /refresh ran as a full rebuild: the catalog has no active version/);
  assert.match(first.stdout, /pages: \d+ \(300 jobs per page, fixed by --page-size\)/, 'the receipt of the full plan');
  assert.match(first.stdout, /^ {2}refresh planned as a full rebuild: the catalog has no active version/m, 'and why');

  const changed = await changeSource(fx.dbs.sourcePool);
  // A dry run says what the refresh will do and changes nothing.
  const versionsBefore = (await pool.query(`SELECT version_id FROM version`)).rowCount;
  const dry = await runCliAsync(
    ['start', '--catalog', refreshed, '--source', 'director', '--refresh', '--dry-run', '--json'],
    fx.env,
  );
  assert.equal(dry.code, 0, dry.stderr);
  const plan = JSON.parse(dry.stdout) as {
    dryRun: boolean;
    refresh: boolean;
    jobs: Record<string, number>;
    pages: number;
  };
  assert.equal(plan.dryRun, true);
  assert.equal(plan.refresh, true);
  // The fields scripts read (issue 22's list), each of its type.
  const fields = plan as unknown as Record<string, unknown>;
  for (const k of ['pages', 'rows', 'estimateSeconds']) assert.equal(typeof fields[k], 'number', k);
  for (const k of ['watermark', 'jobs', 'fileRecords']) assert.equal(typeof fields[k], 'object', k);
  assert.deepEqual(Object.keys(fields.fileRecords as object).sort(), ['copy', 'drop']);
  assert.equal((await pool.query(`SELECT version_id FROM version`)).rowCount, versionsBefore, 'no version made');
  const r = await start(fx, refreshed, ['--refresh']);
  assert.equal(r.code, 0, r.text);
  t.diagnostic(r.stdout.trim().split('\n').pop()!);
  // The refresh plan's own page size, not the --page-size 300 the start passed.
  assert.match(r.stdout, /pages: \d+ \(at most 2000 changed jobs per page, a refresh's fixed size\)/, r.stdout);
  const v2 = await newestVersion(pool, refreshed);
  assert.ok(v2.base, 'the second version is a refresh of the first');
  const m = /a refresh of version \d+: (\d+) new, (\d+) changed, (\d+) deleted jobs/.exec(r.text);
  assert.ok(m, r.text);
  const [news, changes, deletes] = m.slice(1).map(Number);
  assert.equal(news, changed.newJobs + 1, 'the new jobs and the renumbered one');
  assert.equal(deletes, changed.deleted + 1, 'the deleted jobs and the renumbered one under its old id');
  assert.ok(changes >= 3, `the rescheduled, the changed and the renamed client's jobs (${changes})`);
  assert.equal(v2.ownRows, news + changes, "the refresh's own table holds only the jobs it wrote");
  assert.deepEqual(plan.jobs, { new: news, changed: changes, gone: deletes }, 'the dry run counted exactly');
  // The receipt says what the refresh reads.
  assert.match(
    r.stdout,
    new RegExp(
      `^ {2}a refresh of version ${v2.base}: ${news} new, ${changes} changed and ${deletes} deleted jobs in \\d+ pages$`,
      'm',
    ),
  );
  assert.match(r.stdout, new RegExp(`^ {2}rows: ${news + changes} new and changed jobs read from the source$`, 'm'));

  // Without --refresh a dry run counts every job as new; it runs beside a rebuild of the catalog,
  // which it neither starts again nor attaches to (one page at a time, paced: still running after it).
  const { handle: running } = await startRebuild(
    fx.client,
    { catalog: full, source: 'director', pageSize: 300, concurrency: 1, pauseBetweenPagesMs: 1500 },
    { taskQueue: fx.taskQueue },
  );
  const runBefore = await running.describe();
  const dryFull = await runCliAsync(['start', '--catalog', full, '--source', 'director', '--dry-run'], fx.env);
  assert.equal(dryFull.code, 0, dryFull.stderr);
  const runAfter = await running.describe();
  assert.deepEqual(
    [runBefore.status.name, runAfter.status.name, runAfter.runId],
    ['RUNNING', 'RUNNING', runBefore.runId],
    'the rebuild ran on, the same run, through the dry run',
  );
  const total = 3000 + changed.newJobs - changed.deleted;
  assert.match(dryFull.stdout, new RegExp(`a full rebuild: ${total.toLocaleString('en-US')} jobs in \\d+ pages`));
  assert.equal((await waitForResult(running)).published, true, 'the paced rebuild published');
  const diff = await viewDifference(pool, 'active_jobs', refreshed, full);
  assert.deepEqual({ onlyA: diff.onlyA, onlyB: diff.onlyB }, { onlyA: 0, onlyB: 0 }, 'active_jobs equal');
  assert.equal(diff.rows, 3000 + changed.newJobs - changed.deleted);

  const again = await start(fx, refreshed, ['--refresh']);
  assert.equal(again.code, 0, again.text);
  assert.match(again.text, /refresh: up to date: nothing changed in the source since version \d+, which stays active/);
  assert.equal((await newestVersion(pool, refreshed)).versionId, v2.versionId, 'no version was made');
  const ev = await pool.query(`SELECT 1 FROM event WHERE catalog_name = $1 AND kind = 'refresh_up_to_date'`, [
    refreshed,
  ]);
  assert.equal(ev.rowCount, 1);

  // What detection cannot see: a catalog row damaged in place (the source did not change). A refresh
  // is up to date; --verify full re-reads everything, and the damage is gone.
  const damaged = await pool.query(
    `UPDATE job SET status = 'f' WHERE version_id = $1::bigint AND job_key = (SELECT min(job_key) FROM job WHERE version_id = $1::bigint AND superseded_by IS NULL)`,
    [v2.base],
  );
  assert.equal(damaged.rowCount, 1);
  const blind = await start(fx, refreshed, ['--refresh']);
  assert.match(blind.text, /refresh: up to date/, 'detection reads the source, not the catalog');
  assert.equal((await viewDifference(pool, 'active_jobs', refreshed, full)).onlyA, 1, 'the damaged row shows');
  const verified = await start(fx, refreshed, ['--refresh', '--verify', 'full']);
  assert.equal(verified.code, 0, verified.text);
  assert.match(verified.text, /refresh ran as a full rebuild: --verify full re-reads every job/);
  const healed = await viewDifference(pool, 'active_jobs', refreshed, full);
  assert.deepEqual({ onlyA: healed.onlyA, onlyB: healed.onlyB }, { onlyA: 0, onlyB: 0 }, 'equal after --verify full');
  assert.equal((await newestVersion(pool, refreshed)).base, null, 'a version of its own');

  // After a rollback, a refresh builds on the newest version only: it runs a full rebuild.
  await rollbackCatalog(pool, refreshed);
  const after = await start(fx, refreshed, ['--refresh']);
  assert.equal(after.code, 0, after.text);
  assert.match(after.text, /refresh ran as a full rebuild: the active version \d+ was rolled back to/);
  const final = await viewDifference(pool, 'active_jobs', refreshed, full);
  assert.deepEqual({ onlyA: final.onlyA, onlyB: final.onlyB }, { onlyA: 0, onlyB: 0 });
});

test("with --files: a refresh after the director purged a job's files publishes and reports the prune; active_files equals a full rebuild; files and find read every segment", async (t) => {
  const fx = await rebuildFixture(t, {
    address: temporal.address,
    tag: 'refreshf',
    jobs: 1500,
    seed: 43,
    files: 20_000,
  });
  await fx.spawn();
  const pool = fx.dbs.catalogPool;
  const src = fx.dbs.sourcePool;
  const refreshed = `${fx.catalog}-r`;
  const full = `${fx.catalog}-f`;
  const first = await start(fx, refreshed, ['--files']);
  assert.equal(first.code, 0, first.text);

  // The director purges the files of the job with the most, a job and its files are deleted, and a
  // job is rescheduled (its row changes, its files stay).
  const { rows } = await src.query<{ id: string; n: string }>(
    `SELECT jobid::text AS id, count(*)::text AS n FROM file GROUP BY jobid ORDER BY count(*) DESC, jobid LIMIT 3`,
  );
  const [purged, deletedJob, rescheduled] = rows;
  await src.query(`UPDATE job SET purgedfiles = 1 WHERE jobid = $1`, [purged.id]);
  await src.query(`DELETE FROM file WHERE jobid = $1`, [purged.id]);
  await src.query(`DELETE FROM file WHERE jobid = $1`, [deletedJob.id]);
  await src.query(`DELETE FROM job WHERE jobid = $1`, [deletedJob.id]);
  await src.query(`UPDATE job SET jobstatus = 'A' WHERE jobid = $1`, [rescheduled.id]);
  // A new job (the director's next job id) with file records of its own: a copy of the rescheduled job's.
  const added = await src.query<{ id: string }>(
    `INSERT INTO job SELECT (jsonb_populate_record(NULL::job, to_jsonb(j) || jsonb_build_object('jobid', m.id, 'job', j.job || '.new'))).*
     FROM job j, (SELECT max(jobid) + 1 AS id FROM job) m WHERE j.jobid = $1 RETURNING jobid::text AS id`,
    [rescheduled.id],
  );
  await src.query(
    `INSERT INTO file (fileindex, jobid, pathid, deltaseq, markid, fhinfo, fhnode, lstat, md5, name)
     SELECT fileindex, $2, pathid, deltaseq, markid, fhinfo, fhnode, lstat, md5, name FROM file WHERE jobid = $1`,
    [rescheduled.id, added.rows[0].id],
  );

  const r = await start(fx, refreshed, ['--files', '--refresh']);
  assert.equal(r.code, 0, r.text);
  assert.match(r.text, /a refresh of version \d+: 1 new, 2 changed, 1 deleted jobs/);
  // Only the new and changed jobs' file records were read and written: the rescheduled job's and the new job's.
  const v = await newestVersion(pool, refreshed);
  const ownFiles = await pool.query<{ n: string }>(
    format('SELECT count(*)::text AS n FROM %I', `file_v${v.versionId}`),
  );
  const rescheduledFiles = await src.query<{ n: string }>(`SELECT count(*)::text AS n FROM file WHERE jobid = $1`, [
    rescheduled.id,
  ]);
  assert.equal(Number(ownFiles.rows[0].n), 2 * Number(rescheduledFiles.rows[0].n), 'the file records it wrote itself');
  assert.match(r.text, new RegExp(`files of 1 job pruned by the director since version \\d+: ${purged.n} records`));
  const f = await start(fx, full, ['--files']);
  assert.equal(f.code, 0, f.text);
  for (const view of ['active_jobs', 'active_files'] as const) {
    const d = await viewDifference(pool, view, refreshed, full);
    assert.deepEqual({ onlyA: d.onlyA, onlyB: d.onlyB }, { onlyA: 0, onlyB: 0 }, `${view} equal`);
  }
  // files and find through the refresh's segments: the rescheduled job's files were written again,
  // another job's are still those of the first version.
  const other = (
    await pool.query<{ j: string }>(
      `SELECT job_id AS j FROM active_files WHERE catalog_name = $1 AND job_id <> ALL ($2::text[]) LIMIT 1`,
      [refreshed, [rescheduled.id, purged.id]],
    )
  ).rows[0].j;
  for (const job of [rescheduled.id, other]) {
    const [a, b] = await Promise.all([
      runCliAsync(['files', '--catalog', refreshed, '--job', job, '--json'], fx.env),
      runCliAsync(['files', '--catalog', full, '--job', job, '--json'], fx.env),
    ]);
    assert.equal(a.code, 0, a.stderr);
    assert.ok(JSON.parse(a.stdout).length > 0, `job ${job} has files`);
    assert.deepEqual(JSON.parse(a.stdout), JSON.parse(b.stdout), `files --job ${job}`);
  }
  const path = (
    await pool.query<{ p: string }>(
      `SELECT path || name AS p FROM active_files WHERE catalog_name = $1 AND job_id = $2 LIMIT 1`,
      [refreshed, rescheduled.id],
    )
  ).rows[0].p;
  const [fa, fb] = await Promise.all([
    runCliAsync(['find', '--catalog', refreshed, '--path', path, '--json'], fx.env),
    runCliAsync(['find', '--catalog', full, '--path', path, '--json'], fx.env),
  ]);
  assert.equal(fa.code, 0, fa.stderr);
  assert.deepEqual(JSON.parse(fa.stdout), JSON.parse(fb.stdout), `find --path ${path}`);
});

test('a worker SIGKILLed in the middle of a refresh page: the page is retried on another worker, and the refresh still equals a full rebuild', async (t) => {
  const fx = await rebuildFixture(t, { address: temporal.address, tag: 'refreshk', jobs: 2000, seed: 47 });
  const pool = fx.dbs.catalogPool;
  const first = await fx.spawn();
  const base = await start(fx, fx.catalog, []);
  assert.equal(base.code, 0, base.text);
  fx.fleet.kill(first);
  await first.exited;
  await changeSource(fx.dbs.sourcePool);

  // Worker A holds the first refresh page while its transaction is streaming, then dies there.
  const heldFile = path.join(fx.tmp, 'held');
  const a = await fx.spawn({
    CATALOG_REBUILD_FAULTS: JSON.stringify({
      holdWhileStreaming: { pageNo: 1, attempt: 1, heldFile, releaseFile: `${heldFile}.release` },
    }),
  });
  const handle = await fx.start({ refresh: true, heartbeatTimeoutMs: 3000 });
  await waitFor('page 1 held inside its transaction', () => fs.existsSync(heldFile), { timeoutMs: 60_000 });
  fx.fleet.kill(a);
  await fx.spawn();
  const r = await fx.result(handle);
  assert.equal(r.published, true);
  assert.ok(r.refresh, 'a refresh, not a full rebuild');
  assert.ok(r.retries >= 1, `the killed page was retried (${r.retries} retries)`);
  const attempts = await pool.query<{ a: number }>(
    `SELECT attempt AS a FROM page WHERE version_id = $1 AND page_no = 1`,
    [r.versionId],
  );
  assert.ok(attempts.rows[0].a >= 2, 'page 1 committed on a later attempt');

  const full = `${fx.catalog}-f`;
  const f = await start(fx, full, []);
  assert.equal(f.code, 0, f.text);
  const d = await viewDifference(pool, 'active_jobs', fx.catalog, full);
  assert.deepEqual({ onlyA: d.onlyA, onlyB: d.onlyB }, { onlyA: 0, onlyB: 0 }, 'nothing lost or doubled');
});

test('a dry run that cannot plan names why and exits 1; a rebuild whose plan is retried says why (start, status, check) and a cancel ends it at once; start --json of an up-to-date refresh prints one JSON object', async (t) => {
  const fx = await rebuildFixture(t, { address: temporal.address, tag: 'dryfail', jobs: 400, seed: 43 });
  // A second source whose database does not exist, served by the same worker.
  const configFile = fx.env.CATALOG_REBUILD_CONFIG!;
  const config = JSON.parse(fs.readFileSync(configFile, 'utf8')) as { sources: Record<string, object> };
  const missing = new URL(fx.dbs.sourceUrl);
  missing.pathname = `/${missing.pathname.slice(1)}_missing`;
  config.sources.missing = { kind: 'bareos', databaseUrl: missing.toString() };
  // And one on a port where nothing listens, with a password: a transient error, retried.
  config.sources.closed = { kind: 'bareos', databaseUrl: 'postgres://backup:pl4n-s3cret@127.0.0.1:1/bareos' };
  fs.writeFileSync(configFile, JSON.stringify(config));
  await fx.spawn();

  for (const json of [false, true]) {
    const dry = await runCliAsync(
      ['start', '--catalog', fx.catalog, '--source', 'missing', '--dry-run', ...(json ? ['--json'] : [])],
      fx.env,
      { timeoutMs: 120_000 },
    );
    assert.equal(dry.code, 1, `${dry.stdout}\n${dry.stderr}`);
    assert.equal(dry.stdout, '', 'nothing on stdout');
    assert.match(
      dry.stderr,
      new RegExp(
        `dry run of catalog ${fx.catalog} failed, nothing changed: .*${missing.pathname.slice(1)}.* does not exist`,
      ),
    );
  }
  const attempts = await fx.dbs.catalogPool.query(`SELECT 1 FROM version WHERE catalog_name = $1`, [fx.catalog]);
  assert.equal(attempts.rowCount, 0, 'no version');

  // A rebuild whose plan cannot reach its source: what start adds to its "not planned" line.
  const { handle } = await startRebuild(
    fx.client,
    { catalog: `${fx.catalog}-closed`, source: 'closed' },
    { taskQueue: fx.taskQueue },
  );
  const closed = `${fx.catalog}-closed`;
  try {
    const line = await waitFor('the plan to fail once', () => planRetryLine(handle), { timeoutMs: 60_000 });
    assert.match(line, /^its plan is retried \(attempt [2-9]\d*\): .*127\.0\.0\.1:1\/bareos .*ECONNREFUSED/);
    assert.doesNotMatch(line, /pl4n-s3cret|backup@/);
    // status and the backup check say so as well.
    const status = await runCliAsync(['status', '--catalog', closed], fx.env, { timeoutMs: 60_000 });
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^warning: its plan is retried \(attempt [2-9]\d*\): .*ECONNREFUSED/m);
    const check = await runCliAsync(['check', '--rebuild', '--catalog', closed], fx.env, { timeoutMs: 60_000 });
    assert.equal(check.code, 1, check.stdout);
    assert.match(
      check.stdout,
      /^REBUILD WARNING - its plan is retried \(attempt [2-9]\d*\): .*ECONNREFUSED.*; rebuild of /,
    );
    // A cancel ends it without waiting out the plan's remaining retries (about 2.5 minutes in all).
    const cancel = await runCliAsync(['cancel', '--catalog', closed], fx.env, { timeoutMs: 60_000 });
    assert.equal(cancel.code, 0, `${cancel.stdout}\n${cancel.stderr}`);
    await waitFor('the rebuild to end cancelled', async () => (await handle.describe()).status.name === 'CANCELLED', {
      timeoutMs: 60_000,
    });
    const versions = await fx.dbs.catalogPool.query(`SELECT 1 FROM version WHERE catalog_name = $1`, [closed]);
    assert.equal(versions.rowCount, 0, 'no version planned');
    const events = await runCliAsync(['events', '--catalog', closed], fx.env, { timeoutMs: 60_000 });
    assert.equal(events.code, 0, events.stderr);
    assert.match(events.stdout, /rebuild \S+ was cancelled before a version was planned: cancelled by signal/);
  } finally {
    await handle.terminate('test: the source cannot be reached').catch(() => undefined);
  }

  const first = await start(fx, fx.catalog, ['--refresh']);
  assert.equal(first.code, 0, first.text);
  const again = await runCliAsync(
    ['start', '--catalog', fx.catalog, '--source', 'director', '--refresh', '--json'],
    fx.env,
    { timeoutMs: 120_000 },
  );
  assert.equal(again.code, 0, again.stderr);
  const receipt = JSON.parse(again.stdout) as { catalog: string; planned: boolean; refresh: boolean };
  assert.deepEqual([receipt.catalog, receipt.planned, receipt.refresh], [fx.catalog, false, true]);
  assert.match(again.stderr, /refresh: up to date/);
});
