/**
 * The backup check (`catalog-rebuild check`, Nagios conventions) on real PostgreSQL:
 * - catalogs prepared by writing a version partition and the active pointer as the schema defines
 *   them: OK, WARNING (a W-only client), CRITICAL (a too-old client; no clients at all), UNKNOWN
 *   (no active version; a database that cannot be reached), restore and admin jobs ignored,
 *   durations, --client, and exit 3 for the check's own usage errors;
 * - a catalog rebuilt by a real worker on a private Temporal dev server from a generated Bareos
 *   source: the check agrees with an independent computation over the source, and its answer does
 *   not change while a second rebuild is paused half way; after the publish it does.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Pool } from 'pg';
import { createVersionPartition } from '../lib/catalog';
import { migrate } from '../lib/db';
import { freePort } from '../dev/env/dev-server';
import { connectTemporal, getProgress, pause, rebuildHandle, resume, startRebuild, waitForResult } from '../client';
import { checkCatalog } from '../client/check';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import {
  privateTemporal,
  runCliAsync,
  runCliProcess,
  spawnWorker,
  testDatabases,
  testEnv,
  uniqueQueue,
  writeConfig,
} from '../dev/harness/harness';
import { serverTimezone } from '../dev/harness/fixture';
import { waitFor } from '../dev/harness/wait';

const NOW = '2026-11-01T20:00:00Z';
const HOUR = 3600_000;

let dbs: TestDatabases;
let checkEnv: NodeJS.ProcessEnv;
let nextJobId = 1;

before(async () => {
  dbs = await testDatabases('check');
  await migrate(dbs.catalogPool);
  checkEnv = { ...process.env, CATALOG_REBUILD_CONFIG: writeConfig(dbs), CATALOG_DATABASE_URL: '' };
});

after(async () => {
  await dbs?.drop();
});

interface Job {
  client: string | null;
  type?: string;
  status: string;
  /** Hours before NOW of the start time (null: no start time). */
  startedHoursAgo: number | null;
  /** Hours before NOW of the end time; default: start + 1 h. */
  endedHoursAgo?: number | null;
  /** JobErrors; default 0. */
  jobErrors?: number;
}

/** A published catalog with these jobs: a version row, its own partition, and the active pointer. */
async function publishedCatalog(catalog: string, jobs: Job[], status = 'active'): Promise<string> {
  const c = await dbs.catalogPool.connect();
  try {
    await c.query('BEGIN');
    const v = await c.query<{ version_id: string }>(
      `INSERT INTO version (catalog_name, source_name, status, workflow_id, first_run_id, page_size, pages_total, source_rows)
       VALUES ($1, 'prepared', $2, $3, 'prepared', 1000, 1, $4) RETURNING version_id::text`,
      [catalog, status, `catalog-rebuild/${catalog}`, jobs.length],
    );
    const versionId = v.rows[0].version_id;
    await createVersionPartition(c, versionId);
    const at = (h: number | null | undefined) =>
      h === null || h === undefined ? null : new Date(Date.parse(NOW) - h * HOUR).toISOString();
    for (const j of jobs) {
      const id = nextJobId++;
      const end =
        j.endedHoursAgo !== undefined ? j.endedHoursAgo : j.startedHoursAgo === null ? null : j.startedHoursAgo - 1;
      await c.query(
        `INSERT INTO job (version_id, job_key, job_id, job, job_name, client, type, level, status, start_time, end_time,
                          job_errors, page_no)
         VALUES ($1, $2::bigint, $2::bigint::text, $3, $4, $5, $6, 'I', $7, $8, $9, $10, 1)`,
        [
          versionId,
          String(id),
          `job.${id}`,
          `backup-${j.client}`,
          j.client,
          j.type ?? 'B',
          j.status,
          at(j.startedHoursAgo),
          at(end),
          j.jobErrors ?? 0,
        ],
      );
    }
    if (status === 'active') {
      await c.query(
        `INSERT INTO active (catalog_name, version_id) VALUES ($1, $2)
         ON CONFLICT (catalog_name) DO UPDATE SET version_id = EXCLUDED.version_id, published_at = now()`,
        [catalog, versionId],
      );
    }
    await c.query('COMMIT');
    return versionId;
  } catch (err) {
    await c.query('ROLLBACK');
    throw err;
  } finally {
    c.release();
  }
}

function check(args: string[], env = checkEnv) {
  return runCliProcess(['check', ...args, '--now', NOW], env, 60_000);
}

/** Several checks at once (separate processes). */
function checks(argsList: string[][], env = checkEnv) {
  return Promise.all(argsList.map((args) => runCliAsync(['check', ...args, '--now', NOW], env)));
}

/** Parses `... | k=v k=v` perfdata. */
function perfdata(line: string): Record<string, string> {
  const [, perf = ''] = line.split(' | ');
  return Object.fromEntries(
    perf
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => kv.split('=') as [string, string]),
  );
}

test('OK, WARNING and CRITICAL with perfdata; restore and admin jobs are ignored', async () => {
  // Two healthy clients; a client whose last backup is older than the lookback is out of scope;
  // restore (R) and admin (D) jobs, and backups without a client, never count.
  const healthy: Job[] = [
    { client: 'web-01-fd', status: 'T', startedHoursAgo: 2 },
    { client: 'web-01-fd', status: 'T', startedHoursAgo: 26 },
    { client: 'web-01-fd', type: 'R', status: 'E', startedHoursAgo: 1 },
    { client: 'db-01-fd', status: 'T', startedHoursAgo: 20 },
    { client: 'db-01-fd', status: 'E', startedHoursAgo: 1 },
    { client: 'gone-fd', status: 'T', startedHoursAgo: 24 * 60 },
    { client: 'restore-only-fd', type: 'R', status: 'E', startedHoursAgo: 3 },
    { client: 'bareos-fd', type: 'D', status: 'E', startedHoursAgo: 3 },
    { client: '', status: 'E', startedHoursAgo: 3 },
    { client: null, status: 'E', startedHoursAgo: 3 },
  ];
  await publishedCatalog('ok1', healthy);
  const ok = check(['--catalog', 'ok1']);
  assert.equal(ok.code, 0, `${ok.stdout}${ok.stderr}`);
  assert.equal(ok.stdout.trim().split('\n').length, 1, 'one status line');
  assert.match(ok.stdout, /^CATALOG OK - 2 clients ok /);
  assert.deepEqual(perfdata(ok.stdout.trim()), {
    clients_ok: '2',
    clients_warning: '0',
    clients_critical: '0',
    oldest_age_seconds: String(20 * 3600),
  });

  // A client whose only recent backup ended with warnings (W) is WARNING, named in the text.
  await publishedCatalog('warn1', [
    ...healthy,
    { client: 'mail-01-fd', status: 'W', startedHoursAgo: 5 },
    { client: 'mail-01-fd', status: 'T', startedHoursAgo: 72 },
    { client: 'mail-01-fd', type: 'R', status: 'T', startedHoursAgo: 1 },
  ]);
  const warn = check(['--catalog', 'warn1']);
  assert.equal(warn.code, 1, warn.stdout);
  assert.match(warn.stdout, /^CATALOG WARNING - 1 of 3 clients .*mail-01-fd/);
  assert.deepEqual(perfdata(warn.stdout.trim()), {
    clients_ok: '2',
    clients_warning: '1',
    clients_critical: '0',
    oldest_age_seconds: String(20 * 3600),
  });

  // Bacula 9.6 writes "Backup OK -- with warnings" as T with JobErrors > 0, never W: a client whose
  // recent backups all had job errors is WARNING; one good T among them makes it OK.
  await publishedCatalog('warn-t', [
    ...healthy,
    { client: 'mail-01-fd', status: 'T', jobErrors: 2, startedHoursAgo: 5 },
    { client: 'mail-01-fd', status: 'T', jobErrors: 1, startedHoursAgo: 20 },
    { client: 'mail-01-fd', status: 'T', startedHoursAgo: 72 },
    { client: 'app-01-fd', status: 'T', jobErrors: 1, startedHoursAgo: 2 },
    { client: 'app-01-fd', status: 'T', startedHoursAgo: 10 },
  ]);
  const warnT = check(['--catalog', 'warn-t']);
  assert.equal(warnT.code, 1, warnT.stdout);
  assert.match(warnT.stdout, /^CATALOG WARNING - 1 of 4 clients with only warning backups .*: mail-01-fd /);
  assert.deepEqual(perfdata(warnT.stdout.trim()), {
    clients_ok: '3',
    clients_warning: '1',
    clients_critical: '0',
    oldest_age_seconds: String(20 * 3600),
  });

  // A client whose newest good backup is too old is CRITICAL, even with a newer restore (R) or a
  // newer failed backup; the warning client is still named.
  await publishedCatalog('crit1', [
    ...healthy,
    { client: 'mail-01-fd', status: 'W', startedHoursAgo: 5 },
    { client: 'app-01-fd', status: 'T', startedHoursAgo: 30 },
    { client: 'app-01-fd', type: 'R', status: 'T', startedHoursAgo: 1 },
    { client: 'file-01-fd', status: 'E', startedHoursAgo: 1 },
    { client: 'file-01-fd', status: 'f', startedHoursAgo: 10 },
    { client: 'file-01-fd', status: 'T', startedHoursAgo: 40 },
  ]);
  const crit = check(['--catalog', 'crit1']);
  assert.equal(crit.code, 2, crit.stdout);
  assert.match(
    crit.stdout,
    /^CATALOG CRITICAL - 2 of 5 clients without a good backup within max age 26h: app-01-fd, file-01-fd; 1 warning: mail-01-fd /,
  );
  assert.deepEqual(perfdata(crit.stdout.trim()), {
    clients_ok: '2',
    clients_warning: '1',
    clients_critical: '2',
    oldest_age_seconds: String(40 * 3600),
  });

  const [wide, narrow, ninety, lookback, some, ghost] = await checks([
    ['--catalog', 'crit1', '--max-age', '2d'],
    ['--catalog', 'crit1', '--max-age', '5400s'],
    ['--catalog', 'crit1', '--max-age', '180m'],
    ['--catalog', 'crit1', '--lookback', '1d'],
    ['--catalog', 'crit1', '--client', 'web-01-fd', '--client', 'db-01-fd'],
    ['--catalog', 'crit1', '--client', 'web-01-fd', '--client', 'ghost-fd', '--client', 'restore-only-fd'],
  ]);
  // Durations: a wider max age makes the old clients OK; 90 minutes leaves none, 3 hours one.
  assert.equal(wide.code, 1, wide.stdout);
  assert.deepEqual(perfdata(wide.stdout.trim()), {
    clients_ok: '4',
    clients_warning: '1',
    clients_critical: '0',
    oldest_age_seconds: String(40 * 3600),
  });
  assert.equal(narrow.code, 2, narrow.stdout);
  assert.equal(
    perfdata(narrow.stdout.trim()).clients_ok,
    '0',
    'web-01-fd ended 1 h ago but started 2 h ago: start time counts',
  );
  assert.equal(perfdata(ninety.stdout.trim()).clients_ok, '1');
  // A short lookback takes a client out of scope when its newest backup job is older.
  assert.equal(lookback.code, 2, lookback.stdout);
  assert.deepEqual(perfdata(lookback.stdout.trim()), {
    clients_ok: '2',
    clients_warning: '1',
    clients_critical: '1',
    oldest_age_seconds: String(40 * 3600),
  });

  // --client: exactly these clients; a client with no backup at all is CRITICAL.
  assert.equal(some.code, 0, some.stdout);
  assert.match(some.stdout, /^CATALOG OK - 2 clients ok/);
  assert.equal(ghost.code, 2, ghost.stdout);
  assert.match(ghost.stdout, /2 of 3 clients without a good backup within max age 26h: ghost-fd, restore-only-fd /);
  assert.deepEqual(perfdata(ghost.stdout.trim()), {
    clients_ok: '1',
    clients_warning: '0',
    clients_critical: '2',
    oldest_age_seconds: String(2 * 3600),
  });

  // The library gives the same answer as the CLI.
  const lib = await checkCatalog(dbs.catalogPool, { catalog: 'crit1', now: NOW });
  assert.equal(lib.code, 2);
  assert.equal(lib.line, crit.stdout.trim());
  assert.deepEqual(
    lib.clients.map((c) => `${c.client}:${c.state}`),
    ['app-01-fd:CRITICAL', 'db-01-fd:OK', 'file-01-fd:CRITICAL', 'mail-01-fd:WARNING', 'web-01-fd:OK'],
  );
});

test('CRITICAL when no client has a backup job in the lookback; the status line truncates long client lists', async () => {
  await publishedCatalog('noclients', [
    { client: 'restore-only-fd', type: 'R', status: 'T', startedHoursAgo: 3 },
    { client: 'bareos-fd', type: 'D', status: 'T', startedHoursAgo: 3 },
    { client: 'old-fd', status: 'T', startedHoursAgo: 24 * 40 },
    { client: '', status: 'T', startedHoursAgo: 3 },
  ]);
  const none = check(['--catalog', 'noclients']);
  assert.equal(none.code, 2, none.stdout);
  assert.match(none.stdout, /^CATALOG CRITICAL - no client has a backup job in the last 35d /);
  assert.deepEqual(perfdata(none.stdout.trim()), {
    clients_ok: '0',
    clients_warning: '0',
    clients_critical: '0',
    oldest_age_seconds: 'U',
  });

  // 20 failing clients: 8 are named, the rest counted; the line stays one line.
  await publishedCatalog(
    'many',
    Array.from({ length: 20 }, (_, i) => ({
      client: `host-${String(i).padStart(2, '0')}-fd`,
      status: 'E',
      startedHoursAgo: 1,
    })),
  );
  const many = check(['--catalog', 'many']);
  assert.equal(many.code, 2);
  assert.match(
    many.stdout,
    /20 of 20 clients without a good backup within max age 26h: host-00-fd, .*host-07-fd, \.\.\. \(12 more\)/,
  );
  assert.doesNotMatch(many.stdout, /host-08-fd/);
  assert.equal(perfdata(many.stdout.trim()).oldest_age_seconds, 'U');
});

test("UNKNOWN (exit 3): no active version, unreachable database, and the check's own usage errors", async () => {
  const missing = check(['--catalog', 'nosuch']);
  assert.equal(missing.code, 3, missing.stdout);
  assert.match(missing.stdout, /^CATALOG UNKNOWN - catalog nosuch has no active \(published\) version/);

  // A catalog whose only version is still building has no active version.
  await publishedCatalog('building1', [{ client: 'web-01-fd', status: 'T', startedHoursAgo: 1 }], 'building');
  const building = check(['--catalog', 'building1']);
  assert.equal(building.code, 3, building.stdout);
  assert.match(building.stdout, /no active \(published\) version/);

  const port = await freePort();
  const unreachable = check(['--catalog', 'ok1'], {
    ...checkEnv,
    CATALOG_DATABASE_URL: `postgres://nobody:secret@127.0.0.1:${port}/nowhere`,
  });
  assert.equal(unreachable.code, 3, unreachable.stdout);
  assert.match(
    unreachable.stdout,
    new RegExp(
      `^CATALOG UNKNOWN - cannot connect to the catalog database 127\\.0\\.0\\.1:${port}/nowhere \\(CATALOG_DATABASE_URL\\): connect ECONNREFUSED`,
    ),
  );
  assert.doesNotMatch(unreachable.stdout + unreachable.stderr, /secret/, 'no credential in the output');

  const noConfig = runCliProcess(['check', '--catalog', 'ok1'], {
    ...process.env,
    CATALOG_REBUILD_CONFIG: '',
    CATALOG_DATABASE_URL: '',
  });
  assert.equal(noConfig.code, 3);
  assert.match(noConfig.stdout, /^CATALOG UNKNOWN - .*catalogDatabaseUrl/);

  // Usage errors of `check` are UNKNOWN (3), never 2; other commands keep 2.
  const usage = [
    [],
    ['--catalog', 'ok1', '--max-age', '26x'],
    ['--catalog', 'ok1', '--max-age', '0h'],
    ['--catalog', 'ok1', '--lookback', '35'],
    ['--catalog', 'ok1', '--bogus'],
    ['--catalog', 'ok1', '--client', ''],
    ['--catalog', 'ok1', '--now', 'yesterday'],
  ];
  const results = await Promise.all(usage.map((args) => runCliAsync(['check', ...args], checkEnv)));
  usage.forEach((args, i) => {
    const r = results[i];
    assert.equal(r.code, 3, `check ${args.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /^CATALOG UNKNOWN - usage: /, args.join(' '));
  });
  assert.equal(runCliProcess(['status'], checkEnv).code, 2);

  // As the `catalog_reader` role (active_jobs and nothing else) the check still answers.
  const reader = new Pool({ connectionString: dbs.catalogUrl, max: 1, options: '-c role=catalog_reader' });
  try {
    const denied = await reader.query('SELECT 1 FROM active').catch((e: { code?: string }) => e.code);
    assert.equal(denied, '42501', 'the reader role cannot read the pointer table');
    const ok = await checkCatalog(reader, { catalog: 'ok1', now: NOW });
    assert.equal(ok.code, 0, ok.line);
    assert.match(ok.line, /^CATALOG OK - 2 clients ok /);
    const none = await checkCatalog(reader, { catalog: 'nosuch', now: NOW });
    assert.equal(none.code, 3, none.line);
  } finally {
    await reader.end();
  }
});

test('a rebuilt catalog: check agrees with the source, and a half-done rebuild never changes its answer', async () => {
  const temporal = await privateTemporal();
  let worker: WorkerProcess | undefined;
  try {
    await dbs.generateSource({ jobs: 2500, seed: 21 });
    const sourceTz = await serverTimezone(dbs.sourcePool);
    const env = testEnv({ address: temporal.address, configFile: writeConfig(dbs), taskQueue: uniqueQueue('check') });
    worker = await spawnWorker(env);
    const first = await runCliAsync(
      ['start', '--catalog', 'gen', '--source', 'director', '--page-size', '250', '--wait'],
      env,
    );
    assert.equal(first.code, 0, `${first.stdout}\n${first.stderr}`);

    // Reference time: 10 minutes after the newest job time in the catalog.
    const newest = await dbs.catalogPool.query<{ t: Date }>(
      `SELECT max(coalesce(start_time, end_time)) AS t FROM active_jobs WHERE catalog_name = 'gen'`,
    );
    const now = new Date(newest.rows[0].t.getTime() + 600_000).toISOString();
    const oracle = async (): Promise<Record<string, string>> => {
      // Independent of the catalog: the Bareos source's own tables and time zone, the rules in JS.
      const { rows } = await dbs.sourcePool.query<{
        client: string | null;
        status: string;
        errors: number;
        t: number | null;
      }>(
        `SELECT c.name AS client, j.jobstatus::text AS status, j.joberrors AS errors,
                extract(epoch FROM coalesce(j.starttime, j.endtime) AT TIME ZONE $1)::float8 AS t
         FROM job j LEFT JOIN client c ON c.clientid = j.clientid WHERE j.type = 'B'`,
        [sourceTz],
      );
      const nowS = Date.parse(now) / 1000;
      const inScope = new Set(
        rows.filter((r) => r.client && r.t !== null && r.t >= nowS - 35 * 86400).map((r) => r.client!),
      );
      const verdict: Record<string, string> = {};
      for (const c of inScope) {
        const recent = rows.filter((r) => r.client === c && r.t !== null && r.t >= nowS - 26 * 3600);
        verdict[c] = recent.some((r) => r.status === 'T' && !r.errors)
          ? 'OK'
          : recent.some((r) => r.status === 'W' || (r.status === 'T' && r.errors > 0))
            ? 'WARNING'
            : 'CRITICAL';
      }
      return verdict;
    };
    const asVerdict = (states: { client: string; state: string }[]) =>
      Object.fromEntries(states.map((s) => [s.client, s.state]));

    const before = await checkCatalog(dbs.catalogPool, { catalog: 'gen', now });
    assert.deepEqual(asVerdict(before.clients), await oracle(), 'the check agrees with the source');
    assert.ok(before.clients.length >= 30, `${before.clients.length} clients in scope`);
    const beforeCli = runCliProcess(['check', '--catalog', 'gen', '--now', now], checkEnv);
    assert.equal(beforeCli.stdout.trim(), before.line);
    assert.equal(beforeCli.code, before.code);

    // Change the source so that the next version answers differently: one healthy client loses its
    // backups of the last three days.
    const victim = before.clients.find((c) => c.state === 'OK')!.client;
    await dbs.sourcePool.query(
      `DELETE FROM job j USING client c WHERE c.clientid = j.clientid AND c.name = $1 AND j.type = 'B'
         AND coalesce(j.starttime, j.endtime) AT TIME ZONE $2 >= $3::timestamptz - interval '3 days'`,
      [victim, sourceTz, now],
    );

    // Second rebuild, paused with the `pause` signal half way through its pages.
    const session = await connectTemporal(env);
    try {
      const { handle } = await startRebuild(
        session.client,
        { catalog: 'gen', source: 'director', pageSize: 250, concurrency: 1, pauseBetweenPagesMs: 150 },
        { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
      );
      const building = async () =>
        (
          await dbs.catalogPool.query<{ v: string; total: number; committed: number; rows: number }>(
            `SELECT v.version_id::text AS v, v.pages_total AS total,
                    (SELECT count(*)::int FROM page p WHERE p.version_id = v.version_id AND p.committed_at IS NOT NULL) AS committed,
                    (SELECT count(*)::int FROM job j WHERE j.version_id = v.version_id) AS rows
             FROM version v WHERE v.catalog_name = 'gen' AND v.status = 'building'`,
          )
        ).rows[0];
      const deadline = Date.now() + 60_000;
      await waitFor(
        'the second rebuild to reach a third of its pages',
        async () => {
          const b = await building();
          return b && b.committed >= Math.floor(b.total / 3);
        },
        { timeoutMs: 60_000, intervalMs: 100 },
      );
      await pause(handle);
      await waitFor(
        'the pause to drain',
        async () => {
          const p = await getProgress(handle);
          return p.paused && p.inFlight === 0;
        },
        { timeoutMs: deadline + 30_000 - Date.now(), intervalMs: 100 },
      );
      const half = await building();
      assert.ok(half.committed > 0 && half.committed < half.total, `half done: ${half.committed}/${half.total} pages`);
      assert.ok(half.rows > 0, 'the new version already holds rows');

      const during = await checkCatalog(dbs.catalogPool, { catalog: 'gen', now });
      assert.equal(during.line, before.line, 'same answer while the rebuild is half done');
      const duringCli = runCliProcess(['check', '--catalog', 'gen', '--now', now], checkEnv);
      assert.equal(duringCli.stdout.trim(), before.line);
      assert.equal(duringCli.code, before.code);

      await resume(handle);
      const r = await waitForResult(rebuildHandle(session.client, 'gen'));
      assert.equal(r.published, true);
      assert.equal(r.versionId, half.v);
    } finally {
      await session.close();
    }

    const afterPublish = await checkCatalog(dbs.catalogPool, { catalog: 'gen', now });
    assert.notEqual(afterPublish.line, before.line);
    assert.equal(asVerdict(afterPublish.clients)[victim], 'CRITICAL', `${victim} lost its recent backups`);
    assert.deepEqual(asVerdict(afterPublish.clients), await oracle(), 'the check agrees with the changed source');
    assert.equal(afterPublish.code, 2);
  } finally {
    worker?.kill();
    await temporal.stop();
  }
});
