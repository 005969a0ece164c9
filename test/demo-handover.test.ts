/**
 * The demo hands over:
 * - a history generated with an end time gives every client a successful backup (T) in the 24 hours
 *   before it as its newest job, and nothing after it, at any time of day;
 * - the summary's hand-over prints exactly the `export` lines a shell needs (configuration path
 *   absolute and quoted, no colour codes), plus `TEMPORAL_ADDRESS` only off the default address;
 * - pasted into a shell, those lines alone let `start`, `status`, `check` and `events` run from
 *   another directory against a private Temporal dev server, and `check` is OK on freshly
 *   generated recent data (the full demo, on 127.0.0.1:7233, is not run here; demo-clones runs it
 *   on a private server);
 * - at 80 columns nothing the demo prints is cut: the progress bar keeps line wrapping on (no
 *   `ESC[?7l`) and fits the width, announcements and summary lines are wrapped at spaces;
 * - the summary names the pages each worker committed and any other worker polling the queue.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { directorWallClock, generateBareosSource } from '../dev/bareos-generator';
import type { HandoverOptions } from '../dev/demo/handover';
import { handoverEnv, handoverLines, shadowingVariables } from '../dev/demo/handover';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import { privateTemporal, spawnWorker, testDatabases, uniqueQueue } from '../dev/harness/harness';
import { projectRoot } from '../lib/paths';
import { PassThrough } from 'node:stream';
import type { RebuildProgress } from '../client';
import { wrapLine } from '../dev/demo/lines';
import { ProgressView } from '../dev/demo/progress-view';
import { workerLines } from '../dev/demo/summary';

let dbs: TestDatabases;

before(async () => {
  dbs = await testDatabases('handover');
});

after(async () => {
  await dbs?.drop();
});

/** Per client of the source: its newest job (by start time, then job id) and the latest time of any job. */
async function newestJobs(endTime: string): Promise<{
  clients: { name: string; type: string; status: string; ageSeconds: number | null }[];
  latest: string;
}> {
  const newest = await dbs.sourcePool.query<{ name: string; type: string; status: string; age: number | null }>(
    `SELECT DISTINCT ON (c.clientid) c.name, j.type, j.jobstatus AS status,
            extract(epoch FROM $1::timestamp - j.starttime)::float8 AS age
     FROM client c JOIN job j USING (clientid)
     ORDER BY c.clientid, j.starttime DESC NULLS LAST, j.jobid DESC`,
    [endTime],
  );
  const latest = await dbs.sourcePool.query<{ t: string }>(
    `SELECT to_char(max(greatest(schedtime, starttime, endtime, realendtime)), 'YYYY-MM-DD HH24:MI:SS') AS t FROM job`,
  );
  return {
    clients: newest.rows.map((r) => ({ name: r.name, type: r.type, status: r.status, ageSeconds: r.age })),
    latest: latest.rows[0].t,
  };
}

test('a history ending at a given time: every client has a T backup in the 24 h before it, nothing after it', async () => {
  const ends = ['2026-12-01 04:09:28', '2026-06-15 20:30:00', '2026-03-29 12:00:00', '2027-01-01 00:00:00'];
  for (const endTime of ends) {
    const r = await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 3000, seed: 1, endTime });
    assert.equal(r.jobs, 3000);
    const { clients, latest } = await newestJobs(endTime);
    assert.equal(clients.length, r.clients, `${endTime}: every client has jobs`);
    for (const c of clients) {
      const what = `${endTime}: newest job of ${c.name}: type ${c.type} status ${c.status}, ${c.ageSeconds} s old`;
      assert.equal(c.type, 'B', what);
      assert.equal(c.status, 'T', what);
      assert.ok(c.ageSeconds !== null && c.ageSeconds >= 0 && c.ageSeconds < 24 * 3600, what);
    }
    assert.ok(latest <= endTime, `${endTime}: a job time ${latest} lies after the end`);
    const older = await dbs.sourcePool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM job WHERE jobstatus IN ('f', 'E', 'W')`,
    );
    assert.ok(older.rows[0].n > 0, 'failures and warnings stay in the older history');
  }
  // deterministic for a given end
  const md5 = async () =>
    (
      await dbs.sourcePool.query<{ h: string }>(
        `SELECT md5(string_agg(j::text, E'\\n' ORDER BY jobid)) AS h FROM job j`,
      )
    ).rows[0].h;
  await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 2000, seed: 3, endTime: '2026-12-01 04:09:28' });
  const first = await md5();
  await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 2000, seed: 3, endTime: '2026-12-01 04:09:28' });
  assert.equal(await md5(), first);
  await assert.rejects(
    generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 10, seed: 1, endTime: '2026-12-01 25:00:00' }),
    RangeError,
  );
  assert.equal(directorWallClock(new Date('2026-12-01T04:09:28.500Z'), 'UTC'), '2026-12-01 04:09:28');
  assert.equal(directorWallClock(new Date('2026-07-01T22:30:00Z'), 'Europe/Berlin'), '2026-07-02 00:30:00');
});

const OPTIONS: HandoverOptions = {
  configFile: "/home/a user/it's/.data/demo-config.json",
  taskQueue: 'catalog-rebuild-demo',
  temporalAddress: '127.0.0.1:7233',
  projectRoot: '/home/a user/catalog-rebuild',
  catalog: 'demo',
};

/** The lines that start (after the indentation) with `export`. */
const exportLines = (lines: string[]): string[] => lines.filter((l) => /^\s*export\b/.test(l));

test('the hand-over prints exactly the export lines a shell needs, quoted, without colour codes', () => {
  const lines = handoverLines(OPTIONS);
  assert.deepEqual(exportLines(lines), [
    `    export CATALOG_REBUILD_CONFIG='/home/a user/it'\\''s/.data/demo-config.json'`,
    '    export CATALOG_REBUILD_TASK_QUEUE=catalog-rebuild-demo',
  ]);
  for (const l of lines) {
    assert.doesNotMatch(l, /\x1b/, `no colour codes: ${JSON.stringify(l)}`);
    assert.ok(l === '' || /^( {2,}\S|\S)/.test(l), `no prefix but indentation: ${JSON.stringify(l)}`);
  }
  const commands = lines.filter((l) => l.includes('bin/catalog-rebuild.js'));
  assert.deepEqual(
    commands.map((l) => l.trim().split(' ').slice(-3).join(' ')),
    ['status --catalog demo', 'check --catalog demo', 'events --catalog demo'],
  );
  for (const c of commands) assert.ok(c.includes(`node '/home/a user/catalog-rebuild/bin/catalog-rebuild.js'`), c);

  const local = handoverLines({ ...OPTIONS, temporalAddress: 'localhost:7233' });
  assert.equal(exportLines(local).length, 2, 'localhost:7233 is the default address too');
  const elsewhere = handoverLines({ ...OPTIONS, temporalAddress: '127.0.0.1:43117' });
  assert.deepEqual(exportLines(elsewhere).slice(2), ['    export TEMPORAL_ADDRESS=127.0.0.1:43117']);

  const shadowing = shadowingVariables(
    {
      CATALOG_DATABASE_URL: 'postgres://elsewhere/x',
      TEMPORAL_NAMESPACE: 'prod',
      TEMPORAL_CLI_PATH: '/bin/t',
      HOME: '/',
    },
    handoverEnv(OPTIONS),
  );
  assert.deepEqual(shadowing, ['CATALOG_DATABASE_URL', 'TEMPORAL_NAMESPACE']);
  const withUnset = handoverLines({ ...OPTIONS, shadowing });
  assert.equal(exportLines(withUnset).length, 2);
  assert.ok(withUnset.includes('    unset CATALOG_DATABASE_URL TEMPORAL_NAMESPACE'));
  assert.throws(() => handoverEnv({ ...OPTIONS, configFile: '.data/demo-config.json' }), /absolute/);
});

/** The environment of a fresh shell: none of the product's or Temporal's settings. */
function freshShellEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('CATALOG_') || (k.startsWith('TEMPORAL_') && k !== 'TEMPORAL_CLI_PATH')) continue;
    env[k] = v;
  }
  return env;
}

/** Runs `commands` in `sh` after the hand-over's export lines, from the temporary folder. */
function inShell(lines: string[], commands: string): { code: number | null; out: string } {
  const script = [...exportLines(lines).map((l) => l.trim()), `cd ${os.tmpdir()}`, commands].join('\n');
  const r = spawnSync('sh', ['-c', script], { env: freshShellEnv(), encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

test('with the printed lines alone, start, status, check and events work from another directory', async (t) => {
  const temporal = await privateTemporal();
  t.after(() => temporal.stop());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-handover-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const configFile = path.join(dir, 'demo-config.json');
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      catalogDatabaseUrl: dbs.catalogUrl,
      sources: { director: { kind: 'bareos', databaseUrl: dbs.sourceUrl, timezone: 'UTC' } },
    }),
  );
  const endTime = directorWallClock(new Date(), 'UTC');
  await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 4000, seed: 1, endTime });

  const options: HandoverOptions = {
    configFile,
    taskQueue: uniqueQueue('handover'),
    temporalAddress: temporal.address,
    projectRoot: projectRoot(),
    catalog: 'demo',
  };
  const lines = handoverLines(options);
  assert.equal(exportLines(lines).length, 3, 'a private server is not on the default address');
  const cli = lines
    .find((l) => l.trim().endsWith('status --catalog demo'))!
    .trim()
    .replace(/ status --catalog demo$/, '');

  const worker: WorkerProcess = await spawnWorker(
    { ...freshShellEnv(), ...handoverEnv(options) },
    { entry: 'product' },
  );
  t.after(async () => {
    worker.kill();
    await worker.exited;
  });

  const start = inShell(lines, `${cli} start --catalog demo --source director --page-size 500 --wait`);
  assert.equal(start.code, 0, start.out);
  const status = inShell(lines, `${cli} status --catalog demo`);
  assert.equal(status.code, 0, status.out);
  assert.match(status.out, /demo/);
  const check = inShell(lines, `${cli} check --catalog demo`);
  assert.equal(check.code, 0, check.out);
  assert.match(check.out, /^CATALOG OK - 40 clients ok /);
  const events = inShell(lines, `${cli} events --catalog demo`);
  assert.equal(events.code, 0, events.out);
  assert.match(events.out, /published/);
});

/** A fake 80-column terminal: everything written to it. */
function terminal80(): { stream: PassThrough & { isTTY: boolean; columns: number }; text(): string } {
  const stream = Object.assign(new PassThrough(), { isTTY: true, columns: 80 });
  let text = '';
  stream.on('data', (d: Buffer) => (text += d.toString()));
  return { stream, text: () => text };
}

/** What a terminal shows of `raw`: its lines (split at CR and LF) without escape sequences. */
const visibleLines = (raw: string): string[] =>
  raw
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .split(/\r|\n/)
    .filter((l) => l.length > 0);

const PROGRESS: RebuildProgress = {
  phase: 'reconciling',
  paused: true,
  draining: false,
  pagesTotal: 100000,
  pagesDone: 34567,
  checkpoint: 34560,
  rowsUpserted: 69134000,
  rejects: 0,
  retries: 12345,
  rowsPerSecond: 1234567,
  etaSeconds: 60,
  versionId: '7',
  watermark: null,
  lastEvent: null,
  inFlight: 4,
} as unknown as RebuildProgress;

test('at 80 columns the progress bar keeps line wrapping on and no line the demo prints is cut', async () => {
  const term = terminal80();
  const view = new ProgressView(term.stream);
  const kill =
    "SIGKILL to worker 1's process group (pid 123456) at 34567/100000 pages, 4 in flight: the point of the product — " +
    'its pages are detected by heartbeat timeout and retried on a live worker, committed pages are not redone';
  view.update(PROGRESS, 'no worker answered the progress query (yet)');
  view.announce(kill);
  view.update({ ...PROGRESS, pagesDone: 34600 }, '');
  view.stop();
  await new Promise((r) => setImmediate(r));
  const raw = term.text();
  assert.ok(!raw.includes('\x1b[?7l'), 'line wrapping is never turned off');
  const lines = visibleLines(raw);
  assert.ok(
    lines.some((l) => l.includes('34600/100000 pages')),
    raw,
  );
  for (const l of lines) assert.ok(l.length <= 80, `${l.length} columns: ${JSON.stringify(l)}`);
  assert.equal(
    lines
      .filter((l) => !l.includes('░') && !l.includes('█'))
      .map((l) => l.trim())
      .join(' ')
      .replace(/^==> /, ''),
    kill,
    'the announcement is complete, wrapped at spaces',
  );

  for (const line of [`==> ${kill}`, `  catalog = source yes: ${'x'.repeat(32)} vs ${'y'.repeat(32)} ${kill}`]) {
    const wrapped = wrapLine(line, 80);
    assert.ok(wrapped.length > 1);
    for (const w of wrapped) assert.ok(w.length <= 80, w);
    assert.equal(wrapped.map((w) => w.trim()).join(' '), line.trim());
  }
});

test('the summary counts the pages each worker committed and names workers the demo did not start', () => {
  const identityOf = (pid: number) => `${pid}@vm`;
  const lines = workerLines({
    killedAtPage: 34,
    pagesTotal: 100,
    pagesByWorker: [
      { workerIdentity: '999@other-host', pages: 60 },
      { workerIdentity: '101@vm', pages: 34 },
      { workerIdentity: '102@vm', pages: 6 },
    ],
    started: [
      { n: 1, pid: 101 },
      { n: 2, pid: 102 },
    ],
    identityOf,
    // A process of this host that no longer runs is left out (Temporal lists pollers for minutes
    // after their last poll); a worker of another host is named.
    pollers: ['102@vm', '999@other-host', '101@vm', `2147483646@${os.hostname()}`],
    taskQueue: 'catalog-rebuild-demo-0123abcd',
  });
  assert.deepEqual(lines, [
    '  worker kill     worker 1 SIGKILLed at page 34/100',
    '  pages by worker 999@other-host (not started by this demo) 60, worker 1 (pid 101) 34, worker 2 (pid 102) 6',
    '  other workers   polling task queue catalog-rebuild-demo-0123abcd, not started by this demo: 999@other-host',
  ]);
  const alone = workerLines({
    killedAtPage: null,
    pagesTotal: 3,
    pagesByWorker: [{ workerIdentity: '101@vm', pages: 3 }],
    started: [{ n: 1, pid: 101 }],
    identityOf,
    pollers: ['101@vm'],
    taskQueue: 'q',
  });
  assert.deepEqual(alone, [
    '  worker kill     did not happen (the rebuild ended first)',
    '  pages by worker worker 1 (pid 101) 3',
  ]);
});
