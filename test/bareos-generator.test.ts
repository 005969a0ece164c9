import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as path from 'node:path';
import { Client } from 'pg';
import format from 'pg-format';
import { generateBareosSource } from '../dev/bareos-generator';
import { COPY_ID_OFFSET, replicateJobs } from '../dev/bench/source';
import { b64Sql } from '../dev/bareos-file-generator';
import { baculaBase64, encodeLStat } from '../dev/lstat';
import { projectRoot } from '../lib/paths';

const ADMIN_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const DB_NAME = `catalog_rebuild_test_gen_${crypto.randomBytes(5).toString('hex')}`;
const DB_URL = (() => {
  const u = new URL(ADMIN_URL);
  u.pathname = `/${DB_NAME}`;
  return u.toString();
})();

async function withClient<T>(url: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** md5 over every row of the four tables, ordered by id, computed in SQL. */
async function catalogMd5(): Promise<string> {
  return withClient(DB_URL, async (c) => {
    const { rows } = await c.query<{ h: string }>(
      `SELECT md5(
         (SELECT coalesce(string_agg(j::text, E'\\n' ORDER BY jobid), '') FROM job j) || '#' ||
         (SELECT coalesce(string_agg(c::text, E'\\n' ORDER BY clientid), '') FROM client c) || '#' ||
         (SELECT coalesce(string_agg(p::text, E'\\n' ORDER BY poolid), '') FROM pool p) || '#' ||
         (SELECT coalesce(string_agg(f::text, E'\\n' ORDER BY filesetid), '') FROM fileset f)) AS h`,
    );
    return rows[0].h;
  });
}

async function scalar(sql: string): Promise<string> {
  return withClient(DB_URL, async (c) => {
    const { rows } = await c.query<{ v: string }>(`SELECT (${sql})::text AS v`);
    return rows[0].v;
  });
}

function runCli(tz: string | undefined): void {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.TZ;
  if (tz !== undefined) env.TZ = tz;
  const script = path.join(projectRoot(), 'dist/dev/gen-bareos.js');
  const r = spawnSync(process.execPath, [script, '--jobs', '5000', '--seed', '7', '--database', DB_URL], {
    env,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `gen-bareos failed (TZ=${tz ?? 'unset'}): ${r.stderr}`);
  assert.match(r.stdout, /^jobs=5000 maxJobId=\d+ clients=40 /);
}

before(async () => {
  await withClient(ADMIN_URL, (c) => c.query(format('CREATE DATABASE %I', DB_NAME)));
});

after(async () => {
  await withClient(ADMIN_URL, async (c) => {
    try {
      await c.query(format('DROP DATABASE IF EXISTS %I WITH (FORCE)', DB_NAME));
    } catch {
      await c.query(format('DROP DATABASE IF EXISTS %I', DB_NAME));
    }
  });
});

let referenceMd5 = '';

test('same seed gives byte-identical catalogs with exactly the requested jobs', async () => {
  const r1 = await generateBareosSource({ databaseUrl: DB_URL, jobs: 5000, seed: 7 });
  const h1 = await catalogMd5();
  const r2 = await generateBareosSource({ databaseUrl: DB_URL, jobs: 5000, seed: 7 });
  const h2 = await catalogMd5();
  assert.equal(h1, h2);
  assert.deepEqual(r1, r2);
  assert.equal(r1.jobs, 5000);
  assert.equal(r1.clients, 40);
  assert.equal(await scalar('SELECT count(*) FROM job'), '5000');
  assert.ok(r1.maxJobId > 5000, `maxJobId ${r1.maxJobId} should exceed the row count (gaps)`);
  assert.match(r1.firstStart ?? '', /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
  assert.ok((r1.lastStart ?? '').startsWith('2026-11-01 '), `lastStart ${r1.lastStart}`);
  referenceMd5 = h1;

  await generateBareosSource({ databaseUrl: DB_URL, jobs: 5000, seed: 8 });
  assert.notEqual(await catalogMd5(), h1, 'another seed gives another catalog');
});

test('the catalog holds the edge cases of a real director', async () => {
  await generateBareosSource({ databaseUrl: DB_URL, jobs: 5000, seed: 7 });
  const checks: [string, string][] = [
    [
      'running job with NULL endtime',
      `jobstatus = 'R' AND endtime IS NULL AND realendtime IS NULL AND starttime IS NOT NULL`,
    ],
    ['NULL starttime', `starttime IS NULL`],
    ['level single space', `level = ' '`],
    ['restore job', `type = 'R'`],
    ['admin job', `type = 'D'`],
    ['copy job', `type IN ('C', 'c') AND priorjobid > 0`],
    ['migration job', `type IN ('M', 'g')`],
    ['verify job', `type = 'V' AND level = 'V'`],
    ['clientid 0', `clientid = 0`],
    ['jobbytes above 2^53', `jobbytes > 9007199254740992`],
    ['warning status', `jobstatus = 'W'`],
    ['fatal status', `jobstatus = 'f'`],
    ['canceled status', `jobstatus = 'A'`],
    ['readbytes below jobbytes', `readbytes < jobbytes`],
  ];
  for (const [what, where] of checks) {
    assert.notEqual(await scalar(`SELECT count(*) FROM job WHERE ${where}`), '0', what);
  }
  assert.equal(await scalar(`SELECT max(jobid) - min(jobid) + 1 > count(*) FROM job`), 'true', 'a gap in jobid');
  assert.equal(
    await scalar(
      `SELECT count(*) FROM job WHERE jobtdate <> extract(epoch FROM coalesce(endtime, starttime, schedtime))::bigint`,
    ),
    '0',
    'jobtdate is the epoch of endtime (or starttime) read as UTC',
  );
  assert.equal(
    await scalar(
      `SELECT count(*) FROM job WHERE job !~ '^[^ ]+\\.\\d{4}-\\d{2}-\\d{2}_\\d{2}\\.\\d{2}\\.\\d{2}_\\d{2}$'`,
    ),
    '0',
  );
  assert.equal(
    await scalar(`SELECT count(*) FROM job WHERE jobstatus = 'R' AND jobid < (SELECT max(jobid) - 500 FROM job)`),
    '0',
    'only the newest jobs run',
  );
  // the sequence continues after the largest id
  assert.equal(await scalar(`SELECT last_value FROM job_jobid_seq`), await scalar('SELECT max(jobid) FROM job'));
});

test('tiny histories have exactly the requested rows', async () => {
  for (const jobs of [1, 37]) {
    const r = await generateBareosSource({ databaseUrl: DB_URL, jobs, seed: 3, clients: 5, endDate: '2024-02-29' });
    assert.equal(r.jobs, jobs);
    assert.equal(await scalar('SELECT count(*) FROM job'), String(jobs));
  }
  assert.equal((await scalar(`SELECT count(*) FROM job WHERE jobstatus = 'R'`)) !== '0', true, 'newest job is running');
});

test("the bench's copies of a source: ids offset per copy, the job name's sequence made the job id (unique, as a director's), other fields the same", async () => {
  await generateBareosSource({ databaseUrl: DB_URL, jobs: 2000, seed: 7 });
  const names = await scalar(`SELECT count(DISTINCT job) FROM job`);
  await replicateJobs(DB_URL, 3);
  assert.equal(await scalar('SELECT count(*) FROM job'), '6000');
  assert.equal(await scalar('SELECT count(DISTINCT job) FROM job'), String(Number(names) * 3));
  const sameFields = `SELECT count(*) FROM job a JOIN job b ON b.jobid = a.jobid + ${2 * COPY_ID_OFFSET}
    WHERE (a.name, a.starttime, a.jobbytes, a.jobstatus) IS NOT DISTINCT FROM (b.name, b.starttime, b.jobbytes, b.jobstatus)
      AND b.job = regexp_replace(a.job, '_[0-9]+$', '') || '_' || b.jobid
      AND (a.priorjobid = 0 OR b.priorjobid = a.priorjobid + ${2 * COPY_ID_OFFSET})`;
  assert.equal(await scalar(sameFields), '2000');
});

test('with files: File/Path/Version 2230, exactly the requested rows, JobFiles = File rows, LStat as encodeLStat', async () => {
  const r = await generateBareosSource({ databaseUrl: DB_URL, jobs: 3000, seed: 7, files: 30_000 });
  assert.equal(r.files?.files, 30_000);
  assert.equal(await scalar('SELECT count(*) FROM file'), '30000');
  assert.equal(await scalar('SELECT versionid FROM version'), '2230');
  // every job with File rows has JobFiles = its File rows; no File row without its Path row
  assert.equal(
    await scalar(
      `SELECT count(*) FROM job j WHERE j.type IN ('B', 'C') AND j.purgedfiles = 0
         AND j.jobfiles <> (SELECT count(*) FROM file f WHERE f.jobid = j.jobid)`,
    ),
    '0',
  );
  assert.equal(await scalar('SELECT count(*) FROM file f LEFT JOIN path p USING (pathid) WHERE p.pathid IS NULL'), '0');
  assert.equal((await scalar(`SELECT count(*) FROM file WHERE name = '' AND lstat LIKE 'gB % EHt C %'`)) !== '0', true);
  assert.equal((await scalar(`SELECT count(*) FROM file WHERE fileindex = 0`)) !== '0', true, 'deleted entries');
  assert.equal((await scalar(`SELECT count(*) FROM file WHERE deltaseq > 0`)) !== '0', true, 'delta sequences');
  assert.equal(
    (await scalar(`SELECT count(*) FROM file f JOIN path p USING (pathid) WHERE p.path || f.name = '/etc/hosts'`)) !==
      '0',
    true,
  );
  // the SQL base 64 is Bacula's, and an entry's LStat is encodeLStat of its fields
  const values = ['0', '1', '63', '64', '4095', '4096', '9007199254740993', '9223372036854775807'];
  const encoded = await withClient(DB_URL, async (c) =>
    (
      await c.query<{ v: string }>(
        `SELECT ${b64Sql('x')} AS v FROM unnest($1::bigint[]) WITH ORDINALITY AS u(x, i) ORDER BY i`,
        [values],
      )
    ).rows.map((x) => x.v),
  );
  assert.deepEqual(
    encoded,
    values.map((v) => baculaBase64(BigInt(v))),
  );
  const row = await withClient(
    DB_URL,
    async (c) =>
      (await c.query<{ lstat: string }>(`SELECT lstat FROM file WHERE name <> '' ORDER BY fileid LIMIT 1`)).rows[0],
  );
  const digits = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const f = row.lstat.split(' ').map((x) => [...x].reduce((n, ch) => n * 64n + BigInt(digits.indexOf(ch)), 0n));
  assert.equal(f.length, 16);
  assert.equal(
    encodeLStat({ ino: f[1], mode: Number(f[2]), uid: f[4], gid: f[5], size: f[7], mtime: f[11] }),
    row.lstat,
  );
  const again = await generateBareosSource({ databaseUrl: DB_URL, jobs: 3000, seed: 7, files: 30_000 });
  assert.deepEqual(again, r, 'deterministic');
  await generateBareosSource({ databaseUrl: DB_URL, jobs: 50, seed: 7 });
  assert.equal(await scalar('SELECT count(*) FROM file'), '0', 'regenerated without files: no stale file records');
});

test('invalid options are rejected before touching the database', async () => {
  await assert.rejects(generateBareosSource({ databaseUrl: DB_URL, jobs: 0, seed: 1 }), RangeError);
  await assert.rejects(generateBareosSource({ databaseUrl: DB_URL, jobs: 1.5, seed: 1 }), RangeError);
  await assert.rejects(
    generateBareosSource({ databaseUrl: DB_URL, jobs: 10, seed: 1, endDate: '2026-02-30' }),
    RangeError,
  );
  await assert.rejects(generateBareosSource({ databaseUrl: DB_URL, jobs: 10, seed: 1, clients: 0 }), RangeError);
  await assert.rejects(generateBareosSource({ databaseUrl: DB_URL, jobs: 10, seed: 1, files: -1 }), RangeError);
});

test('the CLI output does not depend on the TZ environment variable', async () => {
  runCli(undefined);
  const unset = await catalogMd5();
  runCli('America/New_York');
  const newYork = await catalogMd5();
  assert.equal(unset, newYork);
  if (referenceMd5) assert.equal(unset, referenceMd5, 'CLI defaults equal the library defaults');
});
