/**
 * A restic snapshot forgotten after the plan, on a real restic 0.14 repository
 * (test/fixtures/restic-0.14-repo, three snapshots) through the real activities on PostgreSQL (no
 * Temporal): the listing source runs `restic snapshots --json` at plan and `restic ls --json {id}`
 * in each page; `restic forget` of one snapshot between the plan and its page leaves that snapshot's
 * job and files out of the version, records it gone in the page transaction, and the version
 * reconciles and is published with `1 job gone from the source after the plan` reported. A replay
 * of that page changes nothing.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, runActivity } from '../dev/harness/activity-env';
import { formatReconciliation } from '../client/commands/outcome';
import { projectRoot } from '../lib/paths';
import { removeStaleSpools } from '../lib/sources';

const FIXTURES = path.join(projectRoot(), 'test', 'fixtures');
const PASSWORD = 'fixture-password';
const CATALOG = 'rgone';
/** The snapshots of the fixture, in listing (time) order. */
const SNAPSHOTS = (
  JSON.parse(fs.readFileSync(path.join(FIXTURES, 'restic-0.14-repo.snapshots.json'), 'utf8')) as {
    id: string;
    short_id: string;
  }[]
).map((s) => ({ id: s.id, shortId: s.short_id }));
/** The one forgotten after the plan: the first (the second's parent). */
const FORGOTTEN = SNAPSHOTS[0];
const hasRestic = spawnSync('restic', ['version'], { encoding: 'utf8' }).status === 0;
const skip = hasRestic ? false : 'restic is missing (Debian package restic; .ci/run installs it)';

let fx: ActivityFixture;
let dir: string;
let repo: string;
let spoolDir: string;
const tmpBefore = process.env.TMPDIR;
/** Listings the pages spooled and left in the temporary directory. */
const spools = () => fs.readdirSync(spoolDir).filter((f) => f.startsWith('catalog-rebuild-files-'));

/** `path + name` of every record of a fixture listing (`restic ls --json` of one snapshot), in order. */
function listedPaths(shortId: string): string[] {
  return fs
    .readFileSync(path.join(FIXTURES, `restic-0.14-repo.ls-${shortId}.jsonl`), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .slice(1)
    .map((l) => {
      const n = JSON.parse(l) as { path: string; type: string };
      return n.type === 'dir' ? `${n.path}/` : n.path;
    });
}

function restic(...args: string[]): string {
  const r = spawnSync('restic', ['-r', repo, '--no-cache', ...args], {
    encoding: 'utf8',
    env: { ...process.env, RESTIC_PASSWORD: PASSWORD },
  });
  assert.equal(r.status, 0, `restic ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

before(async () => {
  if (!hasRestic) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-restic-gone-'));
  repo = path.join(dir, 'repo');
  // The pages spool their listings here: the test sees each spool go.
  spoolDir = path.join(dir, 'tmp');
  fs.mkdirSync(spoolDir);
  process.env.TMPDIR = spoolDir;
  // A copy of the committed files (forget changes the repository); restic 0.14 creates the empty
  // folders git does not keep when it needs them.
  fs.cpSync(path.join(FIXTURES, 'restic-0.14-repo'), repo, { recursive: true });
  // The worker's environment, as an operator sets it for its restic commands (never in the configuration).
  process.env.RESTIC_PASSWORD = PASSWORD;
  fx = await activityFixture('rgone', {
    jobs: 1,
    seed: 53,
    source: () => ({
      kind: 'restic-json',
      command: ['restic', '-r', repo, '--no-cache', 'snapshots', '--json'],
      filesCommand: ['restic', '-r', repo, '--no-cache', 'ls', '--json', '{id}'],
      timezone: 'Europe/Berlin',
    }),
  });
});

after(async () => {
  await fx?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  delete process.env.RESTIC_PASSWORD;
  if (tmpBefore === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = tmpBefore;
});

test(
  'restic forget of a snapshot between the plan and its page: published without its job and files, reported as 1 job gone from the source after the plan; a replay of its page changes nothing',
  { skip },
  async () => {
    const { acts, dbs } = fx;
    const pool = dbs.catalogPool;
    const plan = await runActivity(acts.planRebuild, {
      catalog: CATALOG,
      source: 'restic',
      files: true,
      workflowId: `wf-${CATALOG}`,
      firstRunId: 'r1',
    });
    const versionId = plan.versionId;
    assert.equal(plan.sourceRows, '3');
    // restic 0.14 writes no summary: each snapshot weighs a whole page, so it is a page of its own.
    assert.equal(plan.pagesTotal, 3);
    restic('forget', FORGOTTEN.id);
    const left = (JSON.parse(restic('snapshots', '--json')) as { id: string }[]).map((x) => x.id);
    assert.deepEqual(
      left,
      SNAPSHOTS.slice(1).map((x) => x.id),
      'the repository no longer has the snapshot',
    );

    const pages = [];
    for (let p = 1; p <= plan.pagesTotal; p++)
      pages.push(await runActivity(acts.copyPage, { catalog: CATALOG, source: 'restic', versionId, pageNo: p }));
    assert.deepEqual(
      pages.map((r) => [r.rows, r.files, r.gone ?? 0]),
      [
        [0, 0, 1],
        [1, 16, 0],
        [1, 16, 0],
      ],
      'page 1 (the forgotten snapshot) wrote nothing and counted it gone; the others wrote their job and 16 records',
    );
    assert.deepEqual(spools(), [], 'each page removed the listing it spooled');
    const goneRows = await pool.query<{
      job_key: string;
      job_id: string;
      bucket: string;
      page_no: number;
      reason: string;
    }>(`SELECT job_key::text, job_id, bucket::text, page_no, reason FROM gone_job WHERE version_id = $1`, [versionId]);
    assert.equal(goneRows.rows.length, 1);
    assert.deepEqual(
      [goneRows.rows[0].job_key, goneRows.rows[0].job_id, goneRows.rows[0].bucket, goneRows.rows[0].page_no],
      ['1', FORGOTTEN.id, '2027-10-31', 1],
    );
    assert.match(
      goneRows.rows[0].reason,
      /^the snapshot is no longer in the repository: .*no matching ID found for prefix/,
    );
    const pageEvent = await pool.query<{ message: string }>(
      `SELECT message FROM event WHERE version_id = $1 AND kind = 'gone'`,
      [versionId],
    );
    assert.deepEqual(
      pageEvent.rows.map((r) => r.message.replace(/: the snapshot is no longer.*$/, '')),
      [
        `page 1: 1 job gone from the source after the plan, left out of the version (a follow-up delta): job ${FORGOTTEN.id.slice(0, 12)}…`,
      ],
    );

    // The replay of the page with the gone snapshot: the ledger says committed; nothing changes.
    const state = async () =>
      (
        await pool.query<{ jobs: number; files: number; gone: number; stats: number; events: number }>(
          `SELECT (SELECT count(*)::int FROM job_v${versionId}) AS jobs, (SELECT count(*)::int FROM file_v${versionId}) AS files,
                (SELECT count(*)::int FROM gone_job WHERE version_id = $1) AS gone,
                (SELECT count(*)::int FROM listing_file_stat WHERE version_id = $1) AS stats,
                (SELECT count(*)::int FROM event WHERE version_id = $1 AND kind = 'gone') AS events`,
          [versionId],
        )
      ).rows[0];
    const beforeReplay = await state();
    assert.deepEqual(beforeReplay, { jobs: 2, files: 32, gone: 1, stats: 2, events: 1 });
    const replay = await runActivity(acts.copyPage, { catalog: CATALOG, source: 'restic', versionId, pageNo: 1 });
    assert.deepEqual([replay.alreadyCommitted, replay.rows, replay.gone], [true, 0, 1]);
    assert.deepEqual(await state(), beforeReplay);

    await runActivity(acts.sealVersion, { versionId });
    const r = await runActivity(acts.reconcile, { catalog: CATALOG, source: 'restic', versionId, round: 1 });
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.deepEqual(
      [r.sourceRows, r.catalogRows, r.rejects, r.delta, r.gone, r.mismatched],
      [2, 2, 0, 0, 1, []],
      'the source side is the staged listing without the gone snapshot',
    );
    assert.deepEqual(r.files, { source: 32, catalog: 32, rejects: 0 });
    const line = formatReconciliation(r);
    assert.match(line, /; delta after watermark 0, 1 job gone from the source after the plan; /);
    const reconciled = await pool.query<{ message: string; details: { gone: number; goneJobs: { jobId: string }[] } }>(
      `SELECT message, details FROM event WHERE version_id = $1 AND kind = 'reconciled'`,
      [versionId],
    );
    assert.match(
      reconciled.rows[0].message,
      /buckets match \(2 jobs = 2 in the catalog \+ 0 quarantined; delta 0 jobs after the watermark, 1 job gone from the source after the plan\)/,
    );
    assert.deepEqual(
      [reconciled.rows[0].details.gone, reconciled.rows[0].details.goneJobs.map((g) => g.jobId)],
      [1, [FORGOTTEN.id]],
    );

    await runActivity(acts.publishVersion, { catalog: CATALOG, versionId, allowShrink: false });
    const published = await pool.query<{ message: string; details: { goneJobs: number } }>(
      `SELECT message, details FROM event WHERE version_id = $1 AND kind = 'published'`,
      [versionId],
    );
    assert.equal(
      published.rows[0].message,
      `version ${versionId} published; 1 job gone from the source after the plan, left out (a follow-up delta)`,
    );
    assert.equal(published.rows[0].details.goneJobs, 1);

    const jobs = await pool.query<{ job_id: string }>(
      `SELECT job_id FROM active_jobs WHERE catalog_name = $1 ORDER BY start_time`,
      [CATALOG],
    );
    assert.deepEqual(
      jobs.rows.map((j) => j.job_id),
      SNAPSHOTS.slice(1).map((s) => s.id),
    );
    for (const s of SNAPSHOTS) {
      const files = await pool.query<{ p: string }>(
        `SELECT path || name AS p FROM active_files WHERE catalog_name = $1 AND job_id = $2 ORDER BY file_index`,
        [CATALOG, s.id],
      );
      assert.deepEqual(
        files.rows.map((f) => f.p),
        s === FORGOTTEN ? [] : listedPaths(s.shortId),
        `files of snapshot ${s.shortId}`,
      );
    }
  },
);

test('a worker removes the spooled listings of dead workers and keeps those of running ones', { skip }, async () => {
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  const deadPid = Number(dead.stdout);
  assert.ok(deadPid > 0);
  const mine = `catalog-rebuild-files-${process.pid}-0b7a4f2e-1111-4c2e-9d3a-2f6e8a1b9c00.copy`;
  const orphan = `catalog-rebuild-files-${deadPid}-5c1e9a77-2222-4b1d-8e2f-7a6b3c4d5e00.copy`;
  const other = 'catalog-rebuild-files-notes.txt';
  for (const f of [mine, orphan, other]) fs.writeFileSync(path.join(spoolDir, f), 'x');
  assert.deepEqual(await removeStaleSpools(spoolDir), [orphan]);
  assert.deepEqual(spools().sort(), [mine, other].sort());
  for (const f of [mine, other]) fs.rmSync(path.join(spoolDir, f));
});
