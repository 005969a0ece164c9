/**
 * Breaker findings (failing on purpose until fixed), through the real activities on real PostgreSQL:
 * - a SQL_ASCII source whose bucket holds a Latin-1 client name cannot be repaired: the repair's
 *   span read (`readBucketInSpan`) selects the raw text, which the server refuses to send as UTF-8
 *   (22021), so the bucket is "unreadable" and the rebuild fails;
 * - a non-UTF-8 status byte in a SQL_ASCII source makes its bucket's fingerprint differ forever
 *   (the source fingerprint hashes the raw `jobstatus`, the catalog the decoded one);
 * - a negative job id (the plan walks keys from the lowest bigint) makes its page fail on every
 *   attempt with "not a job id: -5" instead of quarantining the record.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Activities } from '../activities';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, copyVersion, runActivity } from '../dev/harness/activity-env';

const JOBS = 2_000;
let ascii: ActivityFixture;
let utf8: ActivityFixture;

const bytes = (hex: string): string => `convert_from('\\x${hex}'::bytea, 'SQL_ASCII')`;
const run = <I, O>(fn: (i: I) => Promise<O>, input: I): Promise<O> => runActivity(fn, input);

before(async () => {
  ascii = await activityFixture('brklegacy', { jobs: JOBS, seed: 5, sqlAscii: true });
  utf8 = await activityFixture('brkneg', { jobs: 500, seed: 6 });
});

after(async () => {
  await ascii?.close();
  await utf8?.close();
});

const copyAll = (acts: Activities, catalog: string, pageSize: number): Promise<string> =>
  copyVersion(acts, { catalog, pageSize });

test('SQL_ASCII source: a bucket holding a Latin-1 client name is repaired after a job of it changed', async () => {
  const { acts, dbs } = ascii;
  const src = dbs.sourcePool;
  // 'Müller-fd' in Latin-1; the busiest bucket of client 1.
  await src.query(`UPDATE client SET name = ${bytes('4dfc6c6c65722d6664')} WHERE clientid = 1`);
  const { rows } = await src.query<{ id: string }>(
    `SELECT max(jobid)::text AS id FROM job WHERE clientid = 1 AND starttime IS NOT NULL`,
  );
  const versionId = await copyAll(acts, 'legrep', 1000);
  // The director finishes a job after its page was copied (a live catalog): its bucket now differs.
  await src.query(`UPDATE job SET jobstatus = 'E', jobfiles = jobfiles + 1 WHERE jobid = $1`, [rows[0].id]);
  const r1 = await run(acts.reconcile, { catalog: 'legrep', source: 'director', versionId, round: 1 });
  assert.equal(r1.mismatched.length, 1, JSON.stringify(r1.mismatched));
  // Fails today: "bucket … is unreadable: invalid byte sequence for encoding "UTF8": 0xfc 0x6c 0x6c (SQLSTATE 22021)".
  const fixed = await run(acts.repairBucket, {
    catalog: 'legrep',
    source: 'director',
    versionId,
    bucket: r1.mismatched[0],
  });
  assert.equal(fixed.ok, true);
  const r2 = await run(acts.reconcile, { catalog: 'legrep', source: 'director', versionId, round: 2 });
  assert.equal(r2.ok, true, JSON.stringify(r2.mismatched));
});

test('SQL_ASCII source: a status byte that is not UTF-8 (0x80) reconciles (same decoded value on both sides)', async () => {
  const { acts, dbs } = ascii;
  await dbs.sourcePool.query(
    `UPDATE job SET jobstatus = ${bytes('80')} WHERE jobid = (SELECT min(jobid) + 17 FROM job)`,
  );
  const versionId = await copyAll(acts, 'legstatus', 1000);
  const r1 = await run(acts.reconcile, { catalog: 'legstatus', source: 'director', versionId, round: 1 });
  // Fails today: the bucket's fingerprint differs (source hashes the raw byte, catalog its decoded U+0080).
  assert.deepEqual(r1.mismatched, []);
});

test('a job with a negative job id is quarantined (or copied), its page does not fail on every attempt', async () => {
  const { acts, dbs } = utf8;
  await dbs.sourcePool.query(
    `INSERT INTO job (jobid, job, name, type, level, clientid, jobstatus, starttime)
     VALUES (-5, 'neg', 'neg', 'B', 'F', 1, 'T', '2026-01-01 00:00')`,
  );
  const plan = await run(acts.planRebuild, {
    catalog: 'neg',
    source: 'director',
    pageSize: 100,
    workflowId: 'wf-neg',
    firstRunId: 'r1',
  });
  // Fails today: "not a job id: -5" (lib/sources/bareos-columns.ts rangeCondition), on every attempt.
  const r = await run(acts.copyPage, { catalog: 'neg', source: 'director', versionId: plan.versionId, pageNo: 1 });
  assert.equal(r.rows + r.rejects, 100);
});
