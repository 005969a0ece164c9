/**
 * Job keys of listing sources stay the same across listings (migration 015, lib/catalog/listing-keys.ts):
 * a snapshot keeps its `job_key` in every version, so forgetting an old snapshot renumbers nothing;
 * a snapshot first seen gets a key above every key the source has; a record without an id, or
 * quarantined (its id may repeat a good record's), is keyed apart; a dry run records no key. The real activities (plan, page copies, seal) against PostgreSQL,
 * without Temporal; the key pages are unit-tested.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import format from 'pg-format';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, copyVersion, runActivity } from '../dev/harness/activity-env';
import { partitionName } from '../lib/catalog/partitions';
import { keyPages } from '../lib/sources';
import { listingFilePages } from '../lib/sources/staged-files';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-listing-keys-'));
const listingFile = path.join(dir, 'snapshots.json');
let fixture: ActivityFixture;

/** A restic snapshot record with id `id` (null: none), taken on day `day` of June 2024. */
const snapshot = (id: string | null, day: number) =>
  ({
    time: `2024-06-${String(day).padStart(2, '0')}T01:00:00Z`,
    paths: ['/srv'],
    hostname: 'web-1',
    ...(id ? { id } : {}),
  }) as const;

before(async () => {
  fixture = await activityFixture('lkeys', {
    jobs: 1,
    seed: 3,
    source: () => ({ kind: 'restic-json', path: listingFile }),
  });
});

after(async () => {
  await fixture?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The job keys of a version's rows, by job id. */
async function keysOf(versionId: string): Promise<Record<string, string>> {
  const { rows } = await fixture.dbs.catalogPool.query<{ job_id: string; job_key: string }>(
    format('SELECT job_id, job_key::text AS job_key FROM %I ORDER BY job_key', partitionName(versionId)),
  );
  return Object.fromEntries(rows.map((r) => [r.job_id, r.job_key]));
}

test('a snapshot keeps its job key across listings; forgetting one renumbers nothing; a dry run records no key', async () => {
  fs.writeFileSync(
    listingFile,
    JSON.stringify([
      snapshot('aaaa', 1),
      snapshot(null, 2),
      snapshot('bbbb', 3),
      snapshot('cccc', 4),
      // Quarantined (its time is not one), with the id of a good record: keyed apart, like one without an id.
      { ...snapshot('bbbb', 5), time: 'not-a-time' },
    ]),
  );
  const first = await copyVersion(fixture.acts, { catalog: 'keys', pageSize: 2, workflowId: 'wf-keys-1' });
  // Position order on a source's first listing; the quarantined records have keys of their own (2, 5).
  assert.deepEqual(await keysOf(first), { aaaa: '1', bbbb: '3', cccc: '4' });

  // restic forget aaaa; a new snapshot dddd.
  fs.writeFileSync(listingFile, JSON.stringify([snapshot('bbbb', 3), snapshot('cccc', 4), snapshot('dddd', 5)]));
  const recorded = async () =>
    (await fixture.dbs.catalogPool.query<{ n: number }>(`SELECT count(*)::int AS n FROM listing_job_key`)).rows[0].n;
  const before = await recorded();
  const dry = await runActivity(fixture.acts.dryRunPlan, { catalog: 'keys', source: 'director' });
  assert.equal(dry.watermark.jobKey, '6', 'the dry run computes the new key');
  assert.equal(await recorded(), before, 'and records none');

  const second = await copyVersion(fixture.acts, { catalog: 'keys', pageSize: 2, workflowId: 'wf-keys-2' });
  const secondKeys = await keysOf(second);
  assert.deepEqual(secondKeys, { bbbb: '3', cccc: '4', dddd: '6' });
  const { rows: pages } = await fixture.dbs.catalogPool.query<{ first_key: string; last_key: string }>(
    `SELECT first_key::text, last_key::text FROM plan_page WHERE version_id = $1 ORDER BY page_no`,
    [second],
  );
  assert.deepEqual(
    pages.map((p) => [p.first_key, p.last_key]),
    [
      ['3', '5'],
      ['6', '6'],
    ],
    'pages of 2 keys that exist (3, 4 | 6), stored as ranges that tile the key space',
  );

  // The same listing again (the unpublished version before it is superseded): the same keys.
  const third = await copyVersion(fixture.acts, { catalog: 'keys', pageSize: 2, workflowId: 'wf-keys-3' });
  assert.deepEqual(await keysOf(third), secondKeys);
});

test('key pages: consecutive keys of the sorted keys at or below the watermark; file pages follow the keys', () => {
  const keys = ['3', '4', '9', '10', '12'];
  assert.deepEqual(keyPages(keys, '12', 2), [
    { firstKey: '3', lastKey: '4', rows: 2 },
    { firstKey: '9', lastKey: '10', rows: 2 },
    { firstKey: '12', lastKey: '12', rows: 1 },
  ]);
  assert.deepEqual(keyPages(keys, '9', 2), [
    { firstKey: '3', lastKey: '4', rows: 2 },
    { firstKey: '9', lastKey: '9', rows: 1 },
  ]);
  // A job weighs 1 + its files; one without a count weighs the whole target and is a page of its own.
  assert.deepEqual(listingFilePages(['5', '5', null, '1', '1'], 12, keys), [
    { firstKey: '3', lastKey: '4', rows: 2, weight: 12 },
    { firstKey: '9', lastKey: '9', rows: 1, weight: 13 },
    { firstKey: '10', lastKey: '12', rows: 2, weight: 4 },
  ]);
});
