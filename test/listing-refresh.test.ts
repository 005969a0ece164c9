/**
 * `start --refresh` on listing sources, through the real activities on PostgreSQL (no Temporal): on
 * a real restic 0.14 repository (test/fixtures/restic-0.14-repo) changed by restic itself (`forget`,
 * `tag`, which rewrites a snapshot under a new id, and a new `backup`), with file records; and on a
 * listing file whose records change in place; on a borg 1.1 repository's `borg list --json` after a
 * prune and a new archive. The refresh compares the listing with the active
 * version (its stable job keys and row hashes), writes only what changed, and publishes
 * `active_jobs` and `active_files` equal to a full rebuild of the same listing; the dry run counts it
 * exactly and changes nothing; a listing that did not change is `refresh: up to date`.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import format from 'pg-format';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, runActivity } from '../dev/harness/activity-env';
import { viewDifference } from '../dev/harness/views';
import type { SourceConfig } from '../lib/config';
import { projectRoot } from '../lib/paths';
import { refreshPages } from '../lib/refresh';

const FIXTURES = path.join(projectRoot(), 'test', 'fixtures');
const PASSWORD = 'fixture-password';
const SNAPSHOTS = (
  JSON.parse(fs.readFileSync(path.join(FIXTURES, 'restic-0.14-repo.snapshots.json'), 'utf8')) as { id: string }[]
).map((s) => s.id);
const hasRestic = spawnSync('restic', ['version'], { encoding: 'utf8' }).status === 0;
const skip = hasRestic ? false : 'restic is missing (Debian package restic; .ci/run installs it)';

let fx: ActivityFixture;
let dir: string;
let repo: string;
let listingFile: string;
/** What every source name resolves to now. */
let config: SourceConfig;

function restic(...args: string[]): string {
  const r = spawnSync('restic', ['-r', repo, '--no-cache', ...args], {
    encoding: 'utf8',
    env: { ...process.env, RESTIC_PASSWORD: PASSWORD, TZ: 'Europe/Berlin' },
  });
  assert.equal(r.status, 0, `restic ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-listing-refresh-'));
  repo = path.join(dir, 'repo');
  listingFile = path.join(dir, 'snapshots.json');
  if (hasRestic) fs.cpSync(path.join(FIXTURES, 'restic-0.14-repo'), repo, { recursive: true });
  process.env.RESTIC_PASSWORD = PASSWORD;
  fx = await activityFixture('lrefresh', { jobs: 1, seed: 61, source: () => config });
});

after(async () => {
  await fx?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  delete process.env.RESTIC_PASSWORD;
});

/**
 * Plans `catalog` (a refresh with `refresh`), copies its pages, seals, reconciles (one round, which
 * must pass) and publishes it, as the workflow does. @returns the plan.
 */
async function rebuild(catalog: string, o: { refresh?: boolean; files?: boolean; run: string; pageSize?: number }) {
  const { acts } = fx;
  const plan = await runActivity(acts.planRebuild, {
    catalog,
    source: 'listing',
    ...(o.refresh ? { refresh: true } : {}),
    ...(o.files ? { files: true } : {}),
    ...(o.pageSize ? { pageSize: o.pageSize } : {}),
    workflowId: `wf-${catalog}-${o.run}`,
    firstRunId: 'r1',
  });
  if (plan.upToDate) return plan;
  const versionId = plan.versionId;
  for (let p = 1; p <= plan.pagesTotal; p++)
    await runActivity(acts.copyPage, { catalog, source: 'listing', versionId, pageNo: p });
  await runActivity(acts.sealVersion, { versionId });
  // The reader index and the per-day job counts the shrink guard compares, as the workflow builds them.
  await runActivity(acts.indexVersion, { versionId });
  const r = await runActivity(acts.reconcile, { catalog, source: 'listing', versionId, round: 1 });
  assert.equal(r.ok, true, JSON.stringify(r));
  await runActivity(acts.publishVersion, { catalog, versionId, allowShrink: false });
  return plan;
}

/** Rows of a version's own tables (what it wrote itself). */
async function ownRows(versionId: string, files: boolean) {
  const pool = fx.dbs.catalogPool;
  const n = async (t: string) =>
    (await pool.query<{ n: number }>(format('SELECT count(*)::int AS n FROM %I', t))).rows[0].n;
  return { jobs: await n(`job_v${versionId}`), files: files ? await n(`file_v${versionId}`) : 0 };
}

async function assertEqualViews(a: string, b: string, files: boolean) {
  const pool = fx.dbs.catalogPool;
  for (const view of files ? (['active_jobs', 'active_files'] as const) : (['active_jobs'] as const)) {
    const d = await viewDifference(pool, view, a, b);
    assert.deepEqual({ onlyA: d.onlyA, onlyB: d.onlyB }, { onlyA: 0, onlyB: 0 }, `${view} of ${a} and ${b} equal`);
    assert.ok(d.rows > 0, `${view} has rows`);
  }
}

test(
  'a restic repository changed by forget, tag and backup: the refresh with files writes only the changed snapshots and equals a full rebuild; then it is up to date',
  { skip },
  async () => {
    config = {
      kind: 'restic-json',
      command: ['restic', '-r', repo, '--no-cache', 'snapshots', '--json'],
      filesCommand: ['restic', '-r', repo, '--no-cache', 'ls', '--json', '{id}'],
      timezone: 'Europe/Berlin',
    };
    const pool = fx.dbs.catalogPool;
    const first = await rebuild('rr', { refresh: true, files: true, run: '1' });
    assert.match(first.fullRebuildBecause ?? '', /the catalog has no active version/);

    restic('forget', SNAPSHOTS[0]);
    restic('tag', '--add', 'audited', SNAPSHOTS[2]); // restic saves the snapshot anew, under a new id
    const data = path.join(dir, 'data');
    fs.mkdirSync(path.join(data, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(data, 'etc', 'hosts'), '127.0.0.1 localhost\n');
    restic('backup', '--host', 'fixture-c', '--time', '2027-11-02 10:00:00', data);

    const versions = async () => (await pool.query(`SELECT 1 FROM version WHERE catalog_name = 'rr'`)).rowCount;
    const before = await versions();
    const dry = await runActivity(fx.acts.dryRunPlan, { catalog: 'rr', source: 'listing', refresh: true, files: true });
    assert.equal(dry.refresh, true, JSON.stringify(dry));
    assert.deepEqual(
      dry.jobs,
      { new: 2, changed: 0, gone: 2 },
      'the new backup and the retagged snapshot; two ids gone',
    );
    assert.equal(dry.fileRecords.drop, 32, 'the file records of the forgotten and of the retagged snapshot');
    assert.equal(await versions(), before, 'the dry run made no version');

    const second = await rebuild('rr', { refresh: true, files: true, run: '2' });
    assert.equal(second.fullRebuildBecause, undefined);
    assert.deepEqual([second.refresh?.newJobs, second.refresh?.changedJobs, second.refresh?.deletedJobs], [2, 0, 2]);
    assert.equal(dry.pages, second.pagesTotal, 'the dry run counts the pages the refresh plans');
    const own = await ownRows(second.versionId, true);
    assert.equal(own.jobs, 2, 'the refresh wrote the two new snapshots alone');
    assert.ok(own.files >= 16 + 2, `and their file records alone (${own.files})`);

    await rebuild('rf', { files: true, run: '1' });
    await assertEqualViews('rr', 'rf', true);
    const jobs = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM active_jobs WHERE catalog_name = 'rr'`,
    );
    assert.equal(jobs.rows[0].n, 3);

    const third = await rebuild('rr', { refresh: true, files: true, run: '3' });
    assert.equal(third.upToDate, true, JSON.stringify(third));
    const ev = await pool.query<{ message: string }>(
      `SELECT message FROM event WHERE catalog_name = 'rr' AND kind = 'refresh_up_to_date'`,
    );
    assert.equal(ev.rows.length, 1);
    assert.match(ev.rows[0].message, /refresh: up to date: nothing changed in source listing since version \d+/);
  },
);

test('a listing whose records change in place, are forgotten, added and quarantined: the refresh equals a full rebuild', async () => {
  config = { kind: 'restic-json', path: listingFile, maxRejects: 5 };
  const snap = (id: string, day: number, host = 'web-1') => ({
    id,
    time: `2024-06-${String(day).padStart(2, '0')}T01:00:00Z`,
    paths: ['/srv'],
    hostname: host,
  });
  fs.writeFileSync(
    listingFile,
    JSON.stringify([snap('a1', 1), snap('b2', 2), snap('c3', 3), snap('d4', 4), snap('e5', 5)]),
  );
  const first = await rebuild('lr', { run: '1', pageSize: 2 });
  assert.equal(first.pagesTotal, 3);
  // a1 forgotten, c3 now listed under another host, f6 new, and a record the page quarantines.
  fs.writeFileSync(
    listingFile,
    JSON.stringify([
      snap('b2', 2),
      snap('c3', 3, 'web-2'),
      snap('d4', 4),
      snap('e5', 5),
      snap('f6', 6),
      { ...snap('g7', 7), time: 'yesterday' },
    ]),
  );
  const dry = await runActivity(fx.acts.dryRunPlan, { catalog: 'lr', source: 'listing', refresh: true });
  assert.deepEqual(dry.jobs, { new: 2, changed: 1, gone: 1 }, JSON.stringify(dry));
  const second = await rebuild('lr', { refresh: true, run: '2' });
  assert.deepEqual([second.refresh?.newJobs, second.refresh?.changedJobs, second.refresh?.deletedJobs], [2, 1, 1]);
  // A replay of the refresh's page after its commit (a worker lost the answer) changes nothing.
  const replay = await runActivity(fx.acts.copyPage, {
    catalog: 'lr',
    source: 'listing',
    versionId: second.versionId,
    pageNo: 1,
  });
  assert.equal(replay.alreadyCommitted, true);
  assert.equal((await ownRows(second.versionId, false)).jobs, 2, 'f6 and c3 written; the quarantined record not');
  const rejects = await fx.dbs.catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM reject WHERE version_id = $1`,
    [second.versionId],
  );
  assert.equal(rejects.rows[0].n, 1, 'the refresh quarantined the bad record as a rebuild does');
  await rebuild('lf', { run: '1', pageSize: 2 });
  await assertEqualViews('lr', 'lf', false);
  const hosts = await fx.dbs.catalogPool.query<{ job_id: string; client: string }>(
    `SELECT job_id, client FROM active_jobs WHERE catalog_name = 'lr' ORDER BY job_id`,
  );
  assert.deepEqual(
    hosts.rows.map((r) => `${r.job_id}@${r.client}`),
    ['b2@web-1', 'c3@web-2', 'd4@web-1', 'e5@web-1', 'f6@web-1'],
  );
});

test('a refresh of an empty version, or after the listing settings changed, is a full rebuild that says why', async () => {
  config = { kind: 'restic-json', path: listingFile };
  fs.writeFileSync(listingFile, '[]');
  const empty = await rebuild('le', { run: '1' });
  assert.equal(empty.pagesTotal, 0);
  const stillEmpty = await rebuild('le', { refresh: true, run: '1b' });
  assert.equal(stillEmpty.upToDate, true, 'an empty listing over an empty version is up to date');
  const snap = (id: string, day: number) => ({ id, time: `2024-07-0${day}T01:00:00Z`, paths: ['/srv'], hostname: 'h' });
  fs.writeFileSync(listingFile, JSON.stringify([snap('x1', 1), snap('x2', 2)]));
  const afterEmpty = await rebuild('le', { refresh: true, run: '2' });
  assert.match(afterEmpty.fullRebuildBecause ?? '', /the active version \d+ has no jobs/);
  assert.equal((await rebuild('le', { refresh: true, run: '3' })).upToDate, true, 'the same listing: up to date');
  // The same bytes under another client setting would give other rows: not up to date, a full rebuild.
  config = { kind: 'restic-json', path: listingFile, client: 'fleet-a' };
  const moved = await rebuild('le', { refresh: true, run: '4' });
  assert.match(
    moved.fullRebuildBecause ?? '',
    /the listing's row mapping changed: .*\(restic-json, parser version 1, client setting "fleet-a"; mapping \d+ → \d+\)/,
  );
});

test('a listing that lists none of its snapshots any more: the shrink guard refuses the catalog as a whole', async () => {
  config = { kind: 'restic-json', path: listingFile };
  // One snapshot a day: no day can lose the shrink guard's 5 jobs.
  const snap = (id: string, day: number) => ({ id, time: `2024-08-0${day}T01:00:00Z`, paths: ['/srv'], hostname: 'h' });
  fs.writeFileSync(listingFile, JSON.stringify([1, 2, 3, 4, 5, 6, 7, 8, 9].map((d) => snap(`s${d}`, d))));
  await rebuild('lg', { run: '1' });
  fs.writeFileSync(listingFile, '[]');
  await assert.rejects(rebuild('lg', { refresh: true, run: '2' }), {
    message:
      /shrink guard: the catalog as a whole \(9 → 0 jobs on the days it still covers\) lost more than 10% and at least 5 jobs/,
  });
  const { rows } = await fx.dbs.catalogPool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM active_jobs WHERE catalog_name = 'lg'`,
  );
  assert.equal(rows[0].n, 9, 'the active version stays');
});

test('refresh pages: at most `size` keys; weighed, a page ends before its target and a heavy job is a page of its own', () => {
  const keys = ['1', '2', '3', '4', '5'];
  assert.deepEqual(
    refreshPages(keys, 2).map((p) => [p.keys, p.weight]),
    [
      [['1', '2'], 2],
      [['3', '4'], 2],
      [['5'], 1],
    ],
  );
  const files: Record<string, number> = { '1': 3, '2': 4, '3': 20, '4': 1, '5': 1 };
  assert.deepEqual(
    refreshPages(keys, 100, (k) => 1 + files[k], 10).map((p) => [p.firstKey, p.lastKey, p.weight]),
    [
      ['1', '2', 9],
      ['3', '3', 21],
      ['4', '5', 4],
    ],
  );
});

test(
  'a refresh whose pages quarantined more file records than maxFileRejects is not published, as a full rebuild would not be',
  { skip },
  async () => {
    const listed = ['restic', '-r', repo, '--no-cache'];
    config = {
      kind: 'restic-json',
      command: [...listed, 'snapshots', '--json'],
      filesCommand: [...listed, 'ls', '--json', '{id}'],
      timezone: 'Europe/Berlin',
      maxFileRejects: 1,
    };
    await rebuild('rq', { refresh: true, files: true, run: '1' });
    const data = path.join(dir, 'data-q');
    fs.mkdirSync(data, { recursive: true });
    fs.writeFileSync(path.join(data, 'a.txt'), 'a\n');
    fs.writeFileSync(path.join(data, 'b.txt'), 'b\n');
    restic('backup', '--host', 'fixture-q', '--time', '2027-11-05 10:00:00', data);
    // The same source now lists files with times it cannot read: every record of the new snapshot is quarantined.
    const ls = `restic -r '${repo}' --no-cache ls --json "$0" | sed 's/"mtime":"/"mtime":"garbage/'`;
    config = { ...config, filesCommand: ['sh', '-c', ls, '{id}'] };
    const { acts } = fx;
    const plan = await runActivity(acts.planRebuild, {
      catalog: 'rq',
      source: 'listing',
      refresh: true,
      files: true,
      workflowId: 'wf-rq-2',
      firstRunId: 'r1',
    });
    assert.equal(plan.refresh?.newJobs, 1);
    const versionId = plan.versionId;
    for (let p = 1; p <= plan.pagesTotal; p++)
      await runActivity(acts.copyPage, { catalog: 'rq', source: 'listing', versionId, pageNo: p });
    await runActivity(acts.sealVersion, { versionId });
    await assert.rejects(
      runActivity(acts.reconcile, { catalog: 'rq', source: 'listing', versionId, round: 1 }),
      new RegExp(
        `version ${versionId} quarantined \\d+ file records of source listing, more than maxFileRejects \\(1\\)`,
      ),
    );
  },
);

test('a borg repository pruned and backed up again (borg 1.1 `borg list --json`): the refresh writes the new archive alone, drops the pruned one, and equals a full rebuild', async () => {
  const listing = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'borg11_vorta_list_stdout.json'), 'utf8')) as {
    archives: { name: string }[];
  };
  const write = (archives: unknown[]) => fs.writeFileSync(listingFile, JSON.stringify({ ...listing, archives }));
  config = { kind: 'borg-json', path: listingFile, timezone: 'Europe/Berlin', client: 'nyx2.local' };
  // The repository before its newest run: the five older archives.
  write(listing.archives.slice(0, 5));
  await rebuild('lb', { run: '1' });
  // `borg prune` removed the oldest archive, and the next run made the newest.
  write(listing.archives.slice(1));
  const dry = await runActivity(fx.acts.dryRunPlan, { catalog: 'lb', source: 'listing', refresh: true });
  assert.equal(dry.refresh, true, JSON.stringify(dry));
  assert.deepEqual(dry.jobs, { new: 1, changed: 0, gone: 1 }, JSON.stringify(dry));
  const second = await rebuild('lb', { refresh: true, run: '2' });
  assert.deepEqual([second.refresh?.newJobs, second.refresh?.changedJobs, second.refresh?.deletedJobs], [1, 0, 1]);
  assert.equal((await ownRows(second.versionId, false)).jobs, 1, 'the newest archive alone was written');
  await rebuild('lbf', { run: '1' });
  await assertEqualViews('lb', 'lbf', false);
  const names = await fx.dbs.catalogPool.query<{ job: string }>(
    `SELECT job FROM active_jobs WHERE catalog_name = 'lb' ORDER BY start_time`,
  );
  assert.deepEqual(
    names.rows.map((r) => r.job),
    listing.archives.slice(1).map((a) => a.name),
    'the archives the repository lists now',
  );
});
