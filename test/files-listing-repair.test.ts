/**
 * The file records of a restic listing source, verified and repaired (activities run in Temporal's
 * activity environment against PostgreSQL, as a worker runs them): the reconciliation's source side
 * is what each page listed; a file record changed or deleted in the catalog after its page is found
 * by its bucket, and `repairBucket` lists exactly the jobs that differ again with the source's
 * `filesCommand` and replaces their files.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, copyVersion, runActivity } from '../dev/harness/activity-env';
import { projectRoot } from '../lib/paths';

const FIXTURES = path.join(projectRoot(), 'test', 'fixtures', 'file-listings');
let fx: ActivityFixture;
let dir: string;
const ids: string[] = [];

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-listing-repair-'));
  const snapshots = ['0.14', '0.18', '0.19'].map((v) => {
    const s = (
      JSON.parse(fs.readFileSync(path.join(FIXTURES, `restic-${v}-snapshots.json`), 'utf8')) as { id: string }[]
    )[0];
    fs.copyFileSync(path.join(FIXTURES, `restic-${v}-ls.jsonl`), path.join(dir, `${s.id}.jsonl`));
    ids.push(s.id);
    return s;
  });
  const listing = path.join(dir, 'snapshots.json');
  fs.writeFileSync(listing, JSON.stringify(snapshots));
  fx = await activityFixture('lrepair', {
    jobs: 1,
    seed: 41,
    source: () => ({
      kind: 'restic-json',
      path: listing,
      // Each run is counted, one line per snapshot listed.
      filesCommand: ['sh', '-c', `echo "$0" >> "${dir}/runs"; exec cat "${dir}/$0.jsonl"`, '{id}'],
    }),
  });
});

after(async () => {
  await fx?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const runs = () => fs.readFileSync(path.join(dir, 'runs'), 'utf8').split('\n').filter(Boolean);

test('a replayed listing page changes nothing; a listed file record changed or deleted in the catalog is found by its bucket and listed again, exactly its job', async () => {
  const { acts, dbs } = fx;
  const versionId = await copyVersion(acts, { catalog: 'lrepair', files: true });
  assert.deepEqual(runs().sort(), [...ids].sort(), 'each snapshot listed once by its page');
  // A committed page run again by hand lists nothing and changes nothing.
  const count = async () =>
    (await dbs.catalogPool.query<{ n: number }>(`SELECT count(*)::int AS n FROM file_v${versionId}`)).rows[0].n;
  const replay = await runActivity(acts.copyPage, { catalog: 'lrepair', source: 'director', versionId, pageNo: 1 });
  assert.equal(replay.alreadyCommitted, true);
  assert.equal(runs().length, 3, 'the replay ran no files command');
  assert.equal(await count(), 60);
  const r1 = await runActivity(acts.reconcile, { catalog: 'lrepair', source: 'director', versionId, round: 1 });
  assert.equal(r1.ok, true, JSON.stringify(r1));
  assert.deepEqual(r1.files, { source: 60, catalog: 60, rejects: 0 });

  const table = `file_v${versionId}`;
  const before = await dbs.catalogPool.query<{ size: string }>(
    `SELECT size::text FROM ${table} WHERE job_id = $1 AND file_index = 19`,
    [ids[0]],
  );
  await dbs.catalogPool.query(`UPDATE ${table} SET size = 1 WHERE job_id = $1 AND file_index = 19`, [ids[0]]);
  await dbs.catalogPool.query(`DELETE FROM ${table} WHERE job_id = $1 AND file_index = 3`, [ids[1]]);
  const r2 = await runActivity(acts.reconcile, { catalog: 'lrepair', source: 'director', versionId, round: 2 });
  assert.equal(r2.ok, false);
  assert.deepEqual(r2.mismatched, ['2026-12-01']);
  assert.deepEqual(r2.files, { source: 60, catalog: 59, rejects: 0 });

  const fixed = await runActivity(acts.repairBucket, {
    catalog: 'lrepair',
    source: 'director',
    versionId,
    bucket: '2026-12-01',
  });
  assert.equal(fixed.ok, true);
  assert.deepEqual(
    runs().slice(3).sort(),
    [ids[0], ids[1]].sort(),
    'the two differing snapshots listed again, not the third',
  );
  const r3 = await runActivity(acts.reconcile, { catalog: 'lrepair', source: 'director', versionId, round: 3 });
  assert.equal(r3.ok, true, JSON.stringify(r3));
  const after = await dbs.catalogPool.query<{ size: string; n: number }>(
    `SELECT (SELECT size::text FROM ${table} WHERE job_id = $1 AND file_index = 19) AS size,
            (SELECT count(*)::int FROM ${table} WHERE job_id = $2) AS n`,
    [ids[0], ids[1]],
  );
  assert.deepEqual(after.rows[0], { size: before.rows[0].size, n: 20 });
});
