/**
 * A full rebuild's first reconciliation round from the pages' stored bucket figures (migration
 * 016, lib/catalog/bucket-figures.ts), with the real activities in MockActivityEnvironment on
 * fresh databases: the figures equal what the version's table holds, a row lost from the table
 * and a job changed in the source after its page are found, and the rounds that must hash the
 * table do.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Activities } from '../activities';
import { checkFiguresAgainstTable, storedBucketStats, TABLE_DIFFERS } from '../lib/catalog';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, copyVersion, runActivity } from '../dev/harness/activity-env';
import type { ReconcileSummary } from '../workflows/definitions';

const JOBS = 6_000;
let fixture: ActivityFixture;
let acts: Activities;

before(async () => {
  fixture = await activityFixture('rpages', {
    jobs: JOBS,
    seed: 23,
    // The quarantine case's one record must not fail the round on the reject threshold.
    source: (dbs) => ({ kind: 'bareos', databaseUrl: dbs.sourceUrl, maxRejects: 5 }),
  });
  acts = fixture.acts;
});

after(async () => {
  await fixture?.close();
});

const reconcile = (catalog: string, versionId: string, round: number) =>
  runActivity(acts.reconcile as (i: unknown) => Promise<ReconcileSummary>, {
    catalog,
    source: 'director',
    versionId,
    round,
    sampleSize: 200,
  });

/** The round's stored report: where its catalog side came from and which digest it compared. */
async function reportOf(versionId: string, round: number): Promise<{ catalogSide: string; rowHash: string }> {
  const { rows } = await fixture.dbs.catalogPool.query<{ c: string; h: string }>(
    `SELECT report->>'catalogSide' AS c, report->>'rowHash' AS h FROM reconciliation WHERE version_id = $1 AND round = $2`,
    [versionId, round],
  );
  return { catalogSide: rows[0].c, rowHash: rows[0].h };
}

/** Per bucket, the version's table added up in SQL: what the pages' figures must equal. */
async function tableFigures(versionId: string) {
  const { rows } = await fixture.dbs.catalogPool.query<{
    bucket: string | null;
    count: number;
    fingerprint: string;
    bytes: string;
    min_key: string;
    max_key: string;
  }>(
    `SELECT bucket::text, count(*)::int AS count,
            ((sum(row_hash) % 18446744073709551616 + 18446744073709551616) % 18446744073709551616)::text AS fingerprint,
            coalesce(sum(bytes), 0)::text AS bytes, min(job_key)::text AS min_key, max(job_key)::text AS max_key
     FROM job WHERE version_id = $1 GROUP BY 1 ORDER BY 1 NULLS FIRST`,
    [versionId],
  );
  return rows.map((r) => ({
    bucket: r.bucket,
    count: r.count,
    fingerprint: r.fingerprint,
    bytes: r.bytes,
    minKey: r.min_key,
    maxKey: r.max_key,
  }));
}

test('round 1 reads the catalog side from the pages: the figures equal the table, the source agrees, the bucket counts follow', async () => {
  const versionId = await copyVersion(acts, { catalog: 'pages', pageSize: 700 });
  const stored = await storedBucketStats(fixture.dbs.catalogPool, versionId);
  assert.ok(stored, 'every page stored its figures');
  const table = await tableFigures(versionId);
  assert.ok(table.length > 20, `the source spans many buckets (${table.length})`);
  assert.deepEqual(stored.buckets, table);
  assert.equal(stored.unknownCodeJobs, 0);
  const summary = await reconcile('pages', versionId, 1);
  assert.equal(summary.ok, true, JSON.stringify(summary));
  assert.equal(summary.catalogRows, JOBS);
  assert.deepEqual(await reportOf(versionId, 1), { catalogSide: 'pages', rowHash: 'row' });
  // The shrink guard's jobs per bucket, summed from the same figures.
  await runActivity(acts.indexVersion, { versionId });
  const counts = await fixture.dbs.catalogPool.query<{ b: string; n: number }>(
    `SELECT bucket::text AS b, jobs::int AS n FROM version_bucket WHERE version_id = $1 ORDER BY 1`,
    [versionId],
  );
  assert.deepEqual(
    counts.rows.map((r) => [r.b, r.n]),
    table.filter((t) => t.bucket !== null).map((t) => [t.bucket, t.count]),
  );
  // The next refresh's cells of job keys, summed from the pages' figures: the table's.
  const cellsOf = (sql: string) =>
    fixture.dbs.catalogPool
      .query<{ c: string; n: string; s: string }>(sql, [versionId])
      .then((r) => r.rows.map((x) => [x.c, x.n, x.s]));
  const cells = await cellsOf(
    `SELECT cell::text AS c, jobs::text AS n, key_sum::text AS s FROM version_cell WHERE version_id = $1 ORDER BY cell`,
  );
  assert.ok(cells.length > 10, `${cells.length} cells`);
  assert.deepEqual(
    cells,
    await cellsOf(
      `SELECT (job_key / 64)::text AS c, count(*)::text AS n, sum(job_key)::text AS s FROM job
       WHERE version_id = $1 GROUP BY job_key / 64 ORDER BY job_key / 64`,
    ),
  );
  const pagesWithout = await fixture.dbs.catalogPool.query(
    `SELECT 1 FROM page WHERE version_id = $1 AND NOT cell_figures`,
    [versionId],
  );
  assert.equal(pagesWithout.rowCount, 0, 'every page stored its cells');
  // A row lost outside a page transaction, and one replaced by another (its stored row hash
  // differs): the table's figures per bucket name both buckets.
  const victim = table[Math.floor(table.length / 2)];
  const replaced = table[Math.floor(table.length / 4)];
  const del = await fixture.dbs.catalogPool.query(`DELETE FROM job WHERE version_id = $1 AND job_key = $2::bigint`, [
    versionId,
    victim.maxKey,
  ]);
  assert.equal(del.rowCount, 1);
  const upd = await fixture.dbs.catalogPool.query(
    `UPDATE job SET row_hash = row_hash # 1 WHERE version_id = $1 AND job_key = $2::bigint`,
    [versionId, replaced.minKey],
  );
  assert.equal(upd.rowCount, 1);
  const damaged = await reconcile('pages', versionId, 1);
  assert.equal(damaged.ok, false);
  assert.deepEqual(damaged.mismatched, [replaced.bucket, victim.bucket].sort());
  assert.equal(damaged.catalogRows, JOBS - 1);
  assert.equal((await reportOf(versionId, 1)).catalogSide, 'pages');
});

test('a job changed in the source after its page is named by round 1, and round 2 scans the table', async () => {
  const versionId = await copyVersion(acts, { catalog: 'changed', pageSize: 1000 });
  const src = fixture.dbs.sourcePool;
  // A director's change after the copy that the job's row shows: its pool renamed for one job.
  const { rows } = await src.query<{ id: string; bucket: string }>(
    `SELECT jobid::text AS id, starttime::date::text AS bucket FROM job WHERE starttime IS NOT NULL ORDER BY jobid OFFSET 2500 LIMIT 1`,
  );
  const job = rows[0];
  await src.query(`INSERT INTO pool (poolid, name) VALUES (9001, 'Moved-Pool')`);
  const before = await src.query<{ poolid: number }>(`SELECT poolid FROM job WHERE jobid = $1`, [job.id]);
  await src.query(`UPDATE job SET poolid = 9001 WHERE jobid = $1`, [job.id]);
  try {
    const first = await reconcile('changed', versionId, 1);
    assert.equal(first.ok, false);
    assert.deepEqual(first.mismatched, [job.bucket]);
    assert.deepEqual(await reportOf(versionId, 1), { catalogSide: 'pages', rowHash: 'row' });
    // Unrepaired, a later round scans the table; its digest does not cover the pool, its sample may.
    await reconcile('changed', versionId, 2);
    assert.equal((await reportOf(versionId, 2)).catalogSide, 'scan');
  } finally {
    await src.query(`UPDATE job SET poolid = $2 WHERE jobid = $1`, [job.id, before.rows[0].poolid]);
    await src.query(`DELETE FROM pool WHERE poolid = 9001`);
  }
});

test('start --verify full and a version with quarantined records scan the table in round 1', async () => {
  const full = await copyVersion(acts, { catalog: 'full', pageSize: 1000, verify: 'full' });
  assert.equal((await reconcile('full', full, 1)).ok, true);
  assert.equal((await reportOf(full, 1)).catalogSide, 'scan');
  const src = fixture.dbs.sourcePool;
  const { rows } = await src.query<{ id: string; files: string }>(
    `SELECT jobid::text AS id, jobfiles::text AS files FROM job ORDER BY jobid OFFSET 10 LIMIT 1`,
  );
  await src.query(`UPDATE job SET jobfiles = -1 WHERE jobid = $1`, [rows[0].id]);
  try {
    const quarantined = await copyVersion(acts, { catalog: 'quarantined', pageSize: 1000 });
    const summary = await reconcile('quarantined', quarantined, 1);
    assert.equal(summary.rejects, 1);
    assert.equal(summary.catalogRows + summary.rejects, summary.sourceRows);
    assert.deepEqual(summary.mismatched, []);
    assert.equal((await reportOf(quarantined, 1)).catalogSide, 'scan');
  } finally {
    await src.query(`UPDATE job SET jobfiles = $2 WHERE jobid = $1`, [rows[0].id, rows[0].files]);
  }
});

test('the table checks the figures: a bucket with another count, one only in the table, one gone from it, one replaced', () => {
  const fig = (bucket: string | null, count: number, minKey: string, maxKey: string) => ({
    bucket,
    count,
    fingerprint: `d${count}`,
    bytes: String(count * 10),
    minKey,
    maxKey,
  });
  const stored = {
    buckets: [
      fig(null, 2, '1', '9'),
      fig('2024-01-01', 5, '10', '20'),
      fig('2024-01-02', 3, '21', '30'),
      fig('2024-01-04', 3, '50', '60'),
      fig('2024-01-05', 3, '70', '80'),
    ],
    unknownCodeJobs: 1,
  };
  const checked = checkFiguresAgainstTable(stored, [
    { bucket: null, count: 2, fingerprint: 'd2', minKey: '1', maxKey: '9' },
    { bucket: '2024-01-01', count: 4, fingerprint: 'd4', minKey: '5', maxKey: '20' },
    { bucket: '2024-01-03', count: 1, fingerprint: 'd1', minKey: '40', maxKey: '40' },
    // The same count, another row: another sum of row hashes; then another key span.
    { bucket: '2024-01-04', count: 3, fingerprint: 'other', minKey: '50', maxKey: '60' },
    { bucket: '2024-01-05', count: 3, fingerprint: 'd3', minKey: '70', maxKey: '81' },
  ]);
  assert.deepEqual(checked, {
    buckets: [
      fig(null, 2, '1', '9'),
      { bucket: '2024-01-01', count: 4, fingerprint: TABLE_DIFFERS, bytes: '50', minKey: '5', maxKey: '20' },
      { bucket: '2024-01-03', count: 1, fingerprint: TABLE_DIFFERS, bytes: '0', minKey: '40', maxKey: '40' },
      { bucket: '2024-01-04', count: 3, fingerprint: TABLE_DIFFERS, bytes: '30', minKey: '50', maxKey: '60' },
      { bucket: '2024-01-05', count: 3, fingerprint: TABLE_DIFFERS, bytes: '30', minKey: '70', maxKey: '81' },
    ],
    unknownCodeJobs: 1,
  });
});
