/**
 * A director job's row hash (lib/sources/bareos-columns.ts `bareosRowHash`), on a generated Bareos
 * source: every column a page writes, the joined Client, Pool and FileSet names, the time zone and
 * `PurgedFiles` change it; equal values in two columns and two swapped values do not cancel; the
 * same row hashes alike in the page's COPY and in a refresh's candidates query.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { generateBareosSource } from '../dev/bareos-generator';
import { BAREOS_FROM_JOB, bareosRowHash, UTF8_MODE } from '../lib/sources/bareos-columns';

let dbs: TestDatabases;
let jobId: number;

before(async () => {
  dbs = await testDatabases('rowhash');
  await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 200, seed: 5 });
  const { rows } = await dbs.sourcePool.query<{ id: number }>(
    `SELECT jobid AS id FROM job WHERE starttime IS NOT NULL AND endtime IS NOT NULL AND realendtime IS NOT NULL ORDER BY jobid LIMIT 1`,
  );
  jobId = rows[0].id;
  // Known values where a case below toggles them: no prior job, no comment.
  await dbs.sourcePool.query(`UPDATE job SET priorjobid = 0, comment = NULL WHERE jobid = $1`, [jobId]);
});

after(async () => {
  await dbs?.drop();
});

/** The row hash of `jobId` as the source computes it, in `zone`. */
async function hashOf(zone = 'UTC', id = jobId): Promise<string> {
  const { rows } = await dbs.sourcePool.query<{ h: string }>(
    `SELECT ${bareosRowHash(UTF8_MODE, '$1')}::text AS h ${BAREOS_FROM_JOB} WHERE j.jobid = $2`,
    [zone, id],
  );
  return rows[0].h;
}

/** Runs `change` on the source, returns whether the job's hash changed, then runs `undo`. */
async function changes(change: string, undo: string): Promise<boolean> {
  const before = await hashOf();
  await dbs.sourcePool.query(change, [jobId]);
  const after = await hashOf();
  await dbs.sourcePool.query(undo, [jobId]);
  assert.equal(await hashOf(), before, `undone: ${undo}`);
  return after !== before;
}

test('every column a page writes, the joined names and PurgedFiles change the row hash', async () => {
  const j = (set: string, back: string) => [
    `UPDATE job SET ${set} WHERE jobid = $1`,
    `UPDATE job SET ${back} WHERE jobid = $1`,
  ];
  const cases: Record<string, string[]> = {
    job: j(`job = job || 'x'`, `job = left(job, -1)`),
    job_name: j(`name = name || 'x'`, `name = left(name, -1)`),
    type: j(`type = 'R'`, `type = 'B'`),
    level: j(`level = CASE level WHEN 'F' THEN 'I' ELSE 'F' END`, `level = CASE level WHEN 'F' THEN 'I' ELSE 'F' END`),
    status: j(
      `jobstatus = CASE jobstatus WHEN 'T' THEN 'E' ELSE 'T' END`,
      `jobstatus = CASE jobstatus WHEN 'T' THEN 'E' ELSE 'T' END`,
    ),
    sched_time: j(
      `schedtime = schedtime + interval '1 microsecond'`,
      `schedtime = schedtime - interval '1 microsecond'`,
    ),
    start_time: j(`starttime = starttime + interval '1 second'`, `starttime = starttime - interval '1 second'`),
    end_time: j(`endtime = endtime + interval '1 second'`, `endtime = endtime - interval '1 second'`),
    real_end_time: j(
      `realendtime = realendtime + interval '1 second'`,
      `realendtime = realendtime - interval '1 second'`,
    ),
    files: j(`jobfiles = jobfiles + 1`, `jobfiles = jobfiles - 1`),
    bytes: j(`jobbytes = jobbytes + 1`, `jobbytes = jobbytes - 1`),
    read_bytes: j(`readbytes = readbytes + 1`, `readbytes = readbytes - 1`),
    job_errors: j(`joberrors = joberrors + 1`, `joberrors = joberrors - 1`),
    prior_job_id: j(`priorjobid = 7`, `priorjobid = 0`),
    job_tdate: j(`jobtdate = jobtdate + 1`, `jobtdate = jobtdate - 1`),
    vol_session_id: j(`volsessionid = volsessionid + 1`, `volsessionid = volsessionid - 1`),
    vol_session_time: j(`volsessiontime = volsessiontime + 1`, `volsessiontime = volsessiontime - 1`),
    comment: j(`comment = 'moved to tape'`, `comment = NULL`),
    purged_files: j(`purgedfiles = 1 - purgedfiles`, `purgedfiles = 1 - purgedfiles`),
    client: [
      `UPDATE client SET name = name || 'x' WHERE clientid = (SELECT clientid FROM job WHERE jobid = $1)`,
      `UPDATE client SET name = left(name, -1) WHERE clientid = (SELECT clientid FROM job WHERE jobid = $1)`,
    ],
    pool: [
      `UPDATE pool SET name = name || 'x' WHERE poolid = (SELECT poolid FROM job WHERE jobid = $1)`,
      `UPDATE pool SET name = left(name, -1) WHERE poolid = (SELECT poolid FROM job WHERE jobid = $1)`,
    ],
    fileset: [
      `UPDATE fileset SET fileset = fileset || 'x' WHERE filesetid = (SELECT filesetid FROM job WHERE jobid = $1)`,
      `UPDATE fileset SET fileset = left(fileset, -1) WHERE filesetid = (SELECT filesetid FROM job WHERE jobid = $1)`,
    ],
  };
  const unchanged: string[] = [];
  for (const [column, [change, undo]] of Object.entries(cases))
    if (!(await changes(change, undo))) unchanged.push(column);
  assert.deepEqual(unchanged, [], 'columns whose change left the row hash as it was');
});

test('the zone the times are read in changes the row hash; swapped or repeated values do not cancel', async () => {
  assert.notEqual(await hashOf('Europe/Berlin'), await hashOf('UTC'));
  // Swapping two columns' values (JobBytes and ReadBytes), or giving both the same value, changes it.
  const swap = await changes(
    `UPDATE job SET jobbytes = readbytes, readbytes = jobbytes WHERE jobid = $1`,
    `UPDATE job SET jobbytes = readbytes, readbytes = jobbytes WHERE jobid = $1`,
  );
  const { rows } = await dbs.sourcePool.query<{ b: string; r: string }>(
    `SELECT jobbytes::text AS b, readbytes::text AS r FROM job WHERE jobid = $1`,
    [jobId],
  );
  assert.ok(rows[0].b !== rows[0].r ? swap : true, 'swapping two different values changes the hash');
  const same = await changes(
    `UPDATE job SET readbytes = 12345, jobbytes = 12345 WHERE jobid = $1`,
    `UPDATE job SET readbytes = ${rows[0].r}, jobbytes = ${rows[0].b} WHERE jobid = $1`,
  );
  assert.ok(same, 'equal values in two columns change the hash');
  // Two jobs differ.
  const { rows: other } = await dbs.sourcePool.query<{ id: number }>(
    `SELECT jobid AS id FROM job WHERE jobid <> $1 LIMIT 1`,
    [jobId],
  );
  assert.notEqual(await hashOf('UTC', other[0].id), await hashOf());
});
