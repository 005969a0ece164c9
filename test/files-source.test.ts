/**
 * File records of real director catalogs through the real activities on real PostgreSQL (no
 * Temporal): a Bareos 2230 catalog in a SQL_ASCII database (as Bareos creates it) with generated
 * records and hand-written hard ones (names holding tabs, newlines, backslashes, quotes, unicode
 * and Latin-1 bytes, directory and deleted entries, delta sequences, sizes above 2^53, mtimes
 * before 1970, a dangling PathId, an LStat that does not decode); the Bacula 13 (File.Filename)
 * and Bacula 9 (Filename table) DDL; an unknown schema version. Every file record is compared
 * field by field with the source, decoded in Node independently of the product's SQL.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from 'pg';
import type { Pool } from 'pg';
import type { Activities } from '../activities';
import { generateBareosFiles } from '../dev/bareos-file-generator';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, copyVersion, runActivity } from '../dev/harness/activity-env';
import { catalogFileRecords, sourceFileRecords } from '../dev/harness/file-records';
import { encodeLStat } from '../dev/lstat';
import { projectRoot } from '../lib/paths';
import { createActivities } from '../activities';
import type { BareosSource } from '../lib/sources';
import { SourceRegistry } from '../lib/sources';
import { planFilePages } from '../lib/sources/bareos-files';

const run = <I, O>(fn: (i: I) => Promise<O>, input: I): Promise<O> => runActivity(fn, input);
const fixtureSql = (name: string): string =>
  fs.readFileSync(path.join(projectRoot(), 'test', 'fixtures', name), 'utf8');
/** Bytes as a SQL_ASCII text literal expression. */
const bytes = (hex: string): string => `convert_from('\\x${hex}'::bytea, 'SQL_ASCII')`;

let bareos: ActivityFixture;
let bacula: ActivityFixture;
let bacula9: ActivityFixture;
/** The job the hard records belong to. */
let hardJob: string;

async function onSource<T>(f: ActivityFixture, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: f.dbs.sourceUrl });
  await c.connect();
  try {
    await c.query('BEGIN');
    const r = await fn(c);
    await c.query('COMMIT');
    return r;
  } finally {
    await c.end();
  }
}

/** Hard records for job `jobId` of a Bareos-shaped `file` table (name column `name`). */
async function addHardRecords(c: Client, jobId: string): Promise<void> {
  const l = (o: Partial<Parameters<typeof encodeLStat>[0]>) =>
    `'${encodeLStat({ mode: 0o100644, uid: 1000, gid: 100, size: 12, mtime: 1_700_000_000, ...o })}'`;
  await c.query(`INSERT INTO path (pathid, path) VALUES
    (900001, E'/srv/tab\\there/'), (900002, ${bytes('2f7372762f4dfc6c6c65722f')}), (900003, '/srv/ünï/')`);
  const rows: [number, number, string, number, string, string, string][] = [
    // fileid, pathid, name, fileindex, deltaseq, lstat, md5
    [900101, 900001, `E'new\\nline'`, 1, '0', l({}), `'md5a'`],
    [900102, 900001, `E'back\\\\slash'`, 2, '0', l({ size: 2n ** 60n }), `'md5b'`],
    [900103, 900001, `E'quo''te"s\\ttab'`, 3, '0', l({ mtime: -86_400 * 365 * 5 }), `'md5c'`],
    [900104, 900002, bytes('636166e92e747874'), 4, '0', l({ mtime: 0 }), `'md5d'`],
    [900105, 900003, `'résumé ✓.txt'`, 5, '0', l({ mode: 0o100755, uid: 4_000_000_000 }), `'md5e'`],
    [900106, 900003, `''`, 6, '0', l({ mode: 0o40755, size: 4096 }), `'0'`],
    [900107, 900003, `'gone.txt'`, 0, '0', l({}), `'0'`],
    [900108, 900003, `'delta.bin'`, 7, '1', l({ size: 100 }), `'md5f'`],
    [900109, 900003, `'delta.bin'`, 8, '2', l({ size: 200 }), `'md5g'`],
    [900110, 999999, `'dangling-path'`, 9, '0', l({}), `'md5h'`],
    [900111, 900003, `'bad-lstat'`, 10, '0', `'AAA BBB'`, `'md5i'`],
  ];
  for (const [fid, pid, name, fi, ds, lstat, md5] of rows)
    await c.query(
      `INSERT INTO file (fileid, fileindex, jobid, pathid, deltaseq, markid, lstat, md5, name)
       VALUES (${fid}, ${fi}, ${jobId}, ${pid}, ${ds}, 0, ${lstat}, ${md5}, ${name})`,
    );
}

/** A backup job of the generated source with file records (the hard records join it). */
async function jobWithFiles(c: Client): Promise<string> {
  const { rows } = await c.query<{ id: string }>(`SELECT min(jobid)::text AS id FROM file`);
  return rows[0].id;
}

/**
 * A source with 200 generated jobs whose generated file records are moved into the file tables of
 * `ddl` (a Bacula fixture) by `fill` (statements over the generated `gen_file`; `path` is copied).
 */
async function baculaFixture(tag: string, seed: number, ddl: string, fill: string[]): Promise<ActivityFixture> {
  const f = await activityFixture(tag, { jobs: 200, seed });
  await onSource(f, async (c) => {
    await generateBareosFiles(c, 2_000, seed);
    await c.query(`ALTER TABLE file RENAME TO gen_file; ALTER TABLE path RENAME TO gen_path; DROP TABLE version`);
    await c.query(
      `ALTER INDEX path_name_idx RENAME TO gen_path_name_idx; ALTER INDEX file_jpfid_idx RENAME TO gen_jpfid`,
    );
    await c.query(fixtureSql(ddl));
    await c.query(`INSERT INTO path (pathid, path) SELECT pathid, path FROM gen_path`);
    for (const sql of fill) await c.query(sql);
    await c.query(`DROP TABLE gen_file, gen_path`);
  });
  return f;
}

before(async () => {
  bareos = await activityFixture('filesbareos', { jobs: 400, seed: 31, sqlAscii: true });
  hardJob = await onSource(bareos, async (c) => {
    await generateBareosFiles(c, 4_000, 31);
    const id = await jobWithFiles(c);
    await addHardRecords(c, id);
    return id;
  });
  // Bacula 13 and Bacula 9: their own DDL, filled from generated records.
  bacula = await baculaFixture('filesbacula', 32, 'bacula-file-schema.sql', [
    `INSERT INTO file (fileid, fileindex, jobid, pathid, filename, deltaseq, markid, lstat, md5)
     SELECT fileid, fileindex, jobid, pathid, name, deltaseq, markid, lstat, md5 FROM gen_file`,
  ]);
  bacula9 = await baculaFixture('filesbacula9', 33, 'bacula9-file-schema.sql', [
    `INSERT INTO filename (name) SELECT DISTINCT name FROM gen_file ORDER BY 1`,
    `INSERT INTO file (fileid, fileindex, jobid, pathid, filenameid, deltaseq, markid, lstat, md5)
     SELECT f.fileid, f.fileindex, f.jobid, f.pathid, n.filenameid, f.deltaseq, f.markid, f.lstat, f.md5
     FROM gen_file f JOIN filename n ON n.name = f.name`,
  ]);
});

after(async () => {
  await bareos?.close();
  await bacula?.close();
  await bacula9?.close();
});

/** Plans with files, copies every page, seals; returns the version id. */
const rebuildFiles = (acts: Activities, catalog: string, pageSize?: number): Promise<string> =>
  copyVersion(acts, { catalog, files: true, pageSize });

test('Bareos 2230 in SQL_ASCII: every file record equals the source field by field; hard records decoded or quarantined alone', async () => {
  const { acts, dbs } = bareos;
  const versionId = await rebuildFiles(acts, 'fbareos', 60);
  const expected = await sourceFileRecords(bareos.dbs.sourcePool);
  const actual = await catalogFileRecords(bareos.dbs.catalogPool, { versionId });
  assert.equal(actual.size, expected.size);
  for (const [id, want] of expected) assert.equal(actual.get(id), want, `file record ${id}`);
  // The hard records, as a reader sees them.
  const hard = await dbs.catalogPool.query<{ file_id: string; path: string; name: string; size: string; mtime: Date }>(
    `SELECT file_id::text, path, name, size::text, mtime FROM file WHERE version_id = $1 AND file_id > 900000 ORDER BY 1`,
    [versionId],
  );
  const byId = new Map(hard.rows.map((r) => [r.file_id, r]));
  assert.equal(byId.get('900101')?.name, 'new\nline');
  assert.equal(byId.get('900102')?.size, (2n ** 60n).toString());
  assert.equal(byId.get('900103')?.mtime.toISOString(), '1965-01-02T00:00:00.000Z');
  assert.equal(byId.get('900104')?.path, '/srv/Müller/');
  assert.equal(byId.get('900104')?.name, 'café.txt');
  assert.equal(byId.get('900104')?.mtime.toISOString(), '1970-01-01T00:00:00.000Z');
  assert.equal(byId.get('900106')?.name, '');
  // The dangling PathId and the LStat that does not decode are quarantined alone, named by FileId.
  const rejects = await dbs.catalogPool.query<{ record_key: string; job_id: string; reason: string; raw: string }>(
    `SELECT record_key::text, job_id, reason, raw FROM reject WHERE version_id = $1 AND record_key IS NOT NULL ORDER BY 1`,
    [versionId],
  );
  assert.deepEqual(
    rejects.rows.map((r) => [r.record_key, r.job_id]),
    [
      ['900110', hardJob],
      ['900111', hardJob],
    ],
  );
  assert.match(rejects.rows[0].reason, /PathId 999999 has no Path row/);
  assert.match(rejects.rows[0].raw, /dangling-path/);
  assert.match(rejects.rows[1].reason, /^lstat: 2 fields/);
  // The job of the quarantined records is written with all its other files.
  const jobRow = await dbs.catalogPool.query(`SELECT 1 FROM job WHERE version_id = $1 AND job_id = $2`, [
    versionId,
    hardJob,
  ]);
  assert.equal(jobRow.rowCount, 1);

  const r1 = await run(acts.reconcile, { catalog: 'fbareos', source: 'director', versionId, round: 1 });
  assert.equal(r1.ok, true, JSON.stringify(r1));
  const srcFiles = await dbs.sourcePool.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM file f JOIN job j USING (jobid)`,
  );
  assert.deepEqual(r1.files, { source: Number(srcFiles.rows[0].n), catalog: expected.size, rejects: 2 });

  // A replayed page changes nothing.
  const before = await dbs.catalogPool.query(`SELECT count(*)::int AS n FROM file WHERE version_id = $1`, [versionId]);
  const replay = await run(acts.copyPage, { catalog: 'fbareos', source: 'director', versionId, pageNo: 1 });
  assert.ok(replay.rows > 0);
  const again = await dbs.catalogPool.query(`SELECT count(*)::int AS n FROM file WHERE version_id = $1`, [versionId]);
  assert.equal(again.rows[0].n, before.rows[0].n);
});

test('a file record changed after its page was copied is repaired by its bucket, exactly', async () => {
  const { acts, dbs } = bareos;
  const versionId = await rebuildFiles(acts, 'frepair', 80);
  const { rows } = await dbs.sourcePool.query<{ fileid: string; jobid: string }>(
    `SELECT fileid::text, jobid::text FROM file WHERE fileid = (SELECT min(fileid) + 5 FROM file)`,
  );
  const changed = encodeLStat({ mode: 0o100600, uid: 7, gid: 7, size: 4242, mtime: 1_600_000_000 });
  await dbs.sourcePool.query(`UPDATE file SET lstat = $1 WHERE fileid = $2`, [changed, rows[0].fileid]);
  const r1 = await run(acts.reconcile, { catalog: 'frepair', source: 'director', versionId, round: 1 });
  assert.equal(r1.ok, false);
  assert.equal(r1.mismatched.length, 1, JSON.stringify(r1.mismatched));
  const bucket = r1.mismatched[0] === 'none' ? null : r1.mismatched[0];
  const fixed = await run(acts.repairBucket, { catalog: 'frepair', source: 'director', versionId, bucket });
  assert.equal(fixed.ok, true);
  const r2 = await run(acts.reconcile, { catalog: 'frepair', source: 'director', versionId, round: 2 });
  assert.equal(r2.ok, true, JSON.stringify(r2.mismatched));
  const after = await dbs.catalogPool.query<{ size: string; mode: number }>(
    `SELECT size::text, mode FROM file WHERE version_id = $1 AND file_id = $2`,
    [versionId, rows[0].fileid],
  );
  assert.deepEqual(after.rows[0], { size: '4242', mode: 0o100600 });
  const expected = await sourceFileRecords(bareos.dbs.sourcePool);
  const actual = await catalogFileRecords(bareos.dbs.catalogPool, { versionId });
  assert.deepEqual([...actual.entries()].sort(), [...expected.entries()].sort());
});

test('plan with files: pages weigh 1 + JobFiles (backups not pruned) up to the target; a heavier job is a page of its own', async () => {
  const source = bareos.sources.get('director') as BareosSource;
  const { rows } = await bareos.dbs.sourcePool.query<{ id: string; w: string }>(
    `SELECT jobid::text AS id,
            (1 + CASE WHEN type IN ('B', 'C', 'A') AND coalesce(purgedfiles, 0) = 0 THEN greatest(jobfiles, 0) ELSE 0 END)::text AS w
     FROM job ORDER BY jobid`,
  );
  const maxKey = rows[rows.length - 1].id;
  const target = 300;
  const pages = await source.planFilePages(maxKey, target, undefined);
  const weight = new Map(rows.map((r) => [r.id, Number(r.w)]));
  const ids = rows.map((r) => r.id);
  assert.ok(pages.length > 1);
  let i = 0;
  for (const p of pages) {
    assert.equal(p.firstKey, ids[i]);
    let w = 0;
    let n = 0;
    while (i < ids.length && BigInt(ids[i]) <= BigInt(p.lastKey)) ((w += weight.get(ids[i++])!), n++);
    assert.equal(p.rows, n);
    assert.equal(p.weight, w);
    if (n > 1) assert.ok(w <= target, `page ${p.firstKey}..${p.lastKey} weighs ${w}`);
    if (w > target) assert.equal(n, 1);
  }
  assert.equal(i, ids.length, 'the pages cover every job');
  assert.ok(
    pages.some((p) => p.rows === 1 && p.weight! >= target),
    'a heavy job stands alone',
  );
  // Bounded statements give the same pages.
  const pool = (source as unknown as { pool: Pool }).pool;
  assert.deepEqual(await planFilePages(pool, maxKey, target, undefined, 7), pages);
});

test('an unknown catalog schema version fails the plan fast, naming it', async () => {
  await bacula9.dbs.sourcePool.query(`UPDATE version SET versionid = 2004`);
  try {
    await assert.rejects(
      run(bacula9.acts.planRebuild, {
        catalog: 'fold',
        source: 'director',
        files: true,
        workflowId: 'wf-fold',
        firstRunId: 'r1',
      }),
      (err: Error & { type?: string; nonRetryable?: boolean }) => {
        assert.match(err.message, /schema version 2004/);
        assert.equal(err.nonRetryable, true);
        return true;
      },
    );
  } finally {
    await bacula9.dbs.sourcePool.query(`UPDATE version SET versionid = 16`);
  }
});

test('Bacula 13 (File.Filename) and Bacula 9 (Filename table): every file record equals the source', async () => {
  for (const [f, nameSql, joins, catalog] of [
    [bacula, 'f.filename', '', 'fbacula'],
    [bacula9, 'n.name', 'LEFT JOIN filename n ON n.filenameid = f.filenameid', 'fbacula9'],
  ] as const) {
    const versionId = await rebuildFiles(f.acts, catalog);
    const expected = await sourceFileRecords(f.dbs.sourcePool, { name: nameSql, joins });
    assert.ok(expected.size > 1_000);
    const actual = await catalogFileRecords(f.dbs.catalogPool, { versionId });
    assert.deepEqual([...actual.entries()].sort(), [...expected.entries()].sort());
    const r = await run(f.acts.reconcile, { catalog, source: 'director', versionId, round: 1 });
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.equal(r.files?.catalog, expected.size);
  }
});

/** Seals, indexes and reconciles a copied version, then publishes it. */
async function verifyAndPublish(acts: Activities, catalog: string, versionId: string, allowShrink = false) {
  await run(acts.indexVersion, { versionId });
  const r = await run(acts.reconcile, { catalog, source: 'director', versionId, round: 1 });
  assert.equal(r.ok, true, JSON.stringify(r));
  return run(acts.publishVersion, { catalog, versionId, allowShrink });
}

test('shrink guard per job: without --files refused; files the director purged (PurgedFiles = 1) published and reported; files lost with PurgedFiles = 0 refused naming the job unless --allow-shrink; orphan File rows are information', async () => {
  const { acts, dbs } = bareos;
  const v1 = await rebuildFiles(acts, 'fshrink');
  await verifyAndPublish(acts, 'fshrink', v1);
  const readers = await dbs.catalogPool.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM active_files WHERE catalog_name = 'fshrink'`,
  );
  assert.equal(Number(readers.rows[0].n), (await sourceFileRecords(dbs.sourcePool)).size);

  // Without --files.
  const noFiles = await copyVersion(acts, { catalog: 'fshrink', workflowId: 'wf-fshrink-nofiles' });
  await assert.rejects(verifyAndPublish(acts, 'fshrink', noFiles), /has file records and this rebuild has none/);

  // The two jobs with the most file records: the director purges one, the other loses files without it.
  const { rows: big } = await dbs.sourcePool.query<{ id: string; n: number }>(
    `SELECT jobid::text AS id, count(*)::int AS n FROM file WHERE jobid <> $1::bigint GROUP BY jobid ORDER BY 2 DESC, 1 LIMIT 2`,
    [hardJob],
  );
  const [purged, lostJob] = big;
  await dbs.sourcePool.query(`UPDATE job SET purgedfiles = 1 WHERE jobid = $1::bigint`, [purged.id]);
  await dbs.sourcePool.query(`DELETE FROM file WHERE jobid = $1::bigint`, [purged.id]);
  const v2 = await copyVersion(acts, { catalog: 'fshrink', files: true, workflowId: 'wf-fshrink-purged' });
  await verifyAndPublish(acts, 'fshrink', v2);
  const published = await dbs.catalogPool.query<{ message: string; details: { prunedFiles: unknown } }>(
    `SELECT message, details FROM event WHERE version_id = $1 AND kind = 'published'`,
    [v2],
  );
  assert.match(
    published.rows[0].message,
    new RegExp(
      `; files of 1 job pruned by the director since version ${v1}: ${purged.n.toLocaleString('en-US')} records$`,
    ),
  );
  assert.deepEqual(published.rows[0].details.prunedFiles, { jobs: 1, records: purged.n, since: v1 });

  // Files lost while PurgedFiles stays 0 (a catalog restored from an old dump), and a File row of no job.
  const removed = await dbs.sourcePool.query(`DELETE FROM file WHERE jobid = $1::bigint AND fileid % 4 <> 0`, [
    lostJob.id,
  ]);
  await dbs.sourcePool.query(
    `INSERT INTO file (fileid, fileindex, jobid, pathid, lstat, md5, name)
     SELECT 990001, 1, min(g), 1, 'A', '0', 'orphan' FROM generate_series(1, (SELECT max(jobid) FROM job)) AS g
     WHERE NOT EXISTS (SELECT 1 FROM job WHERE jobid = g)`,
  );
  const lost = await copyVersion(acts, { catalog: 'fshrink', files: true, workflowId: 'wf-fshrink-lost' });
  await assert.rejects(
    verifyAndPublish(acts, 'fshrink', lost),
    new RegExp(
      `shrink guard: 1 job lost ${removed.rowCount} file records against the active version ${v2} although the director did not purge them \\(PurgedFiles = 0\\): job ${lostJob.id} \\(${lostJob.n} → ${lostJob.n - removed.rowCount!}\\)`,
    ),
  );
  const report = await dbs.catalogPool.query<{ files: { orphanFiles: number; jobFilesMismatch: { jobs: number } } }>(
    `SELECT report->'files' AS files FROM reconciliation WHERE version_id = $1 AND round = 1`,
    [lost],
  );
  assert.equal(report.rows[0].files.orphanFiles, 1);
  assert.ok(report.rows[0].files.jobFilesMismatch.jobs > 0, 'jobs whose JobFiles no longer match are listed');
  await run(acts.publishVersion, { catalog: 'fshrink', versionId: lost, allowShrink: true });
  const active = await dbs.catalogPool.query<{ v: string }>(
    `SELECT version_id::text AS v FROM active WHERE catalog_name = 'fshrink'`,
  );
  assert.equal(active.rows[0].v, lost);
});

test("a fresh worker's first pages with files, as many at once as its source connections, do not wait for a connection", async () => {
  // The file-record schema is read on the page's own session: a page holding one of the source's
  // maxConcurrentReads connections never waits for another (it waited out the 10 s connect timeout).
  const sources = new SourceRegistry(() => ({
    kind: 'bareos',
    databaseUrl: bareos.dbs.sourceUrl,
    maxConcurrentReads: 2,
  }));
  const acts = createActivities({ pool: bareos.dbs.catalogPool, sources, identity: 'test@host', buildId: 'test' });
  try {
    const plan = await run(acts.planRebuild, {
      catalog: 'fpool',
      source: 'director',
      files: true,
      pageSize: 100,
      workflowId: 'wf-fpool',
      firstRunId: 'r1',
    });
    assert.ok(plan.pagesTotal >= 2);
    // A new registry: nothing cached, as in a worker started after another was killed.
    await sources.close();
    const pages = await Promise.all(
      [1, 2].map((pageNo) =>
        run(acts.copyPage, { catalog: 'fpool', source: 'director', versionId: plan.versionId, pageNo }),
      ),
    );
    assert.ok(pages.every((p) => p.rows > 0));
  } finally {
    await sources.close();
  }
});
