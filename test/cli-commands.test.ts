/**
 * CLI command handlers and their output without Temporal or PostgreSQL: the result lines of a
 * closed rebuild, event lines, the Nagios status line from a check snapshot, handlers run through
 * the commander layer over a fake context (fake pool, no Temporal connection), the usage of `files`
 * and `find` and their output over fake reads, and the `--files` flag of `start`.
 */
import { test } from 'node:test';
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import type { Pool } from 'pg';
import { buildCli, ExitCode, runCli } from '../client/cli';
import { checkResult } from '../client/check';
import { checkCommand } from '../client/commands/check';
import type { CommandContext } from '../client/commands/context';
import { formatEvent } from '../client/commands/events';
import { formatRebuildResult } from '../client/commands/outcome';
import { throttleCommand } from '../client/commands/throttle';
import { filesCommand, findCommand, parsePathHex, pathArgsFromRawBytes } from '../client/commands/files';
import type { ActiveFileVersion, FileHit, FileReads } from '../client/commands/file-reads';
import type { RebuildCatalogResult } from '../client';
import { flagConflicts, getProgress, rebuildFlags } from '../client';
import type { WorkflowHandle } from '@temporalio/client';
import type { EventRow } from '../lib/catalog/event-reads';

const RESULT: RebuildCatalogResult = {
  catalog: 'main',
  versionId: '7',
  published: true,
  cancelled: false,
  pagesTotal: 12,
  pagesDone: 12,
  rowsUpserted: 2400,
  rejects: 2,
  retries: 1,
  reconciliation: {
    round: 1,
    ok: true,
    buckets: 30,
    sourceRows: 2400,
    catalogRows: 2398,
    rejects: 2,
    mismatched: [],
    delta: 5,
    duplicateJobNames: 0,
    sampleMismatches: 0,
    sampled: 100,
  },
  previousVersionId: '6',
  durationMs: 61_499,
  runs: 2,
};

/** A context whose Temporal connection fails the test and whose pool is `pool`. */
function fakeContext(pool: Partial<Pool> | (() => Pool), lines: string[]): CommandContext {
  return {
    out: (l) => lines.push(l),
    tty: null,
    connectTemporal: () => Promise.reject(new Error('no Temporal in this test')),
    catalogPool: () => (typeof pool === 'function' ? pool() : (pool as Pool)),
  };
}

test('a closed rebuild is described in one line, plus the reconciliation report (with its file records)', () => {
  assert.deepEqual(formatRebuildResult(RESULT), [
    'catalog main: version 7 published; 12 pages, 2400 rows, 2 rejects, 1 retries, 61 s, 2 run(s)',
    'reconciliation: ok: 30 buckets, source 2400 = catalog 2398 + 2 quarantined; delta after watermark 5; duplicate job names 0; sample 100 checked, 0 differ',
  ]);
  // A cancelled rebuild says how many of its pages were committed.
  assert.deepEqual(
    formatRebuildResult({
      ...RESULT,
      published: false,
      cancelled: true,
      pagesDone: 5,
      rowsUpserted: 1000,
      reconciliation: null,
    }),
    ['catalog main: version 7 cancelled (abandoned); 5 of 12 pages, 1000 rows, 2 rejects, 1 retries, 61 s, 2 run(s)'],
  );
  // Cancelled before its plan had a version (a rebuild of v0.1.0 cancelled while planning).
  assert.deepEqual(
    formatRebuildResult({ ...RESULT, versionId: '', published: false, cancelled: true, pagesTotal: 0, pagesDone: 0 }),
    ['catalog main: cancelled before a version was planned: nothing was written; 61 s'],
  );
  const mismatch = formatRebuildResult({
    ...RESULT,
    published: false,
    reconciliation: { ...RESULT.reconciliation!, ok: false, rejects: 0 },
  });
  assert.match(mismatch[0], /version 7 NOT published;/);
  assert.match(mismatch[1], /^reconciliation: MISMATCH: 30 buckets, source 2400 = catalog 2398; delta/);
  const withFiles = formatRebuildResult({
    ...RESULT,
    reconciliation: { ...RESULT.reconciliation!, files: { source: 81, catalog: 80, rejects: 1 } },
  });
  assert.match(
    withFiles[1],
    /2 quarantined; file records: source 81 = catalog 80 \+ 1 quarantined; delta after watermark 5;/,
  );
  // Jobs gone from the source after the plan are named with the delta, and only when there are some.
  const gone = (n: number) =>
    formatRebuildResult({ ...RESULT, reconciliation: { ...RESULT.reconciliation!, gone: n } })[1];
  assert.match(gone(1), /; delta after watermark 5, 1 job gone from the source after the plan; duplicate job names 0;/);
  assert.match(gone(3), /; delta after watermark 5, 3 jobs gone from the source after the plan; /);
  assert.equal(gone(0), formatRebuildResult(RESULT)[1]);
});

test('events print as text lines or as the row in JSON', () => {
  const row: EventRow = {
    event_id: '41',
    created_at: new Date('2026-11-01T20:00:00.123Z'),
    version_id: null,
    kind: 'planned',
    message: 'planned 12 pages',
    details: { pages: 12 },
  };
  assert.equal(formatEvent(row, false), '2026-11-01T20:00:00.123Z  v-  planned      planned 12 pages');
  assert.equal(
    formatEvent({ ...row, version_id: '3' }, false),
    '2026-11-01T20:00:00.123Z  v3  planned      planned 12 pages',
  );
  assert.equal(
    formatEvent(row, true),
    '{"event_id":"41","created_at":"2026-11-01T20:00:00.123Z","version_id":null,"kind":"planned","message":"planned 12 pages","details":{"pages":12}}',
  );
});

test('the check turns a snapshot into the Nagios line and code', () => {
  const o = { catalog: 'main', maxAgeSeconds: 26 * 3600, lookbackSeconds: 35 * 86400 };
  const none = checkResult(o, { versionId: null, clients: [] });
  assert.equal(none.code, 3);
  assert.equal(none.line, 'CATALOG UNKNOWN - catalog main has no active (published) version');

  const empty = checkResult(o, { versionId: '4', clients: [] });
  assert.equal(empty.code, 2);
  assert.equal(
    empty.line,
    'CATALOG CRITICAL - no client has a backup job in the last 35d (catalog main version 4) | clients_ok=0 clients_warning=0 clients_critical=0 oldest_age_seconds=U',
  );

  const ok = checkResult(o, {
    versionId: '4',
    clients: [
      { client: 'a', hasGoodBackup: true, hasWarningBackup: false, newestAgeSeconds: 3600.4 },
      { client: 'b', hasGoodBackup: true, hasWarningBackup: true, newestAgeSeconds: -5 },
    ],
  });
  assert.equal(ok.code, 0);
  assert.equal(
    ok.line,
    'CATALOG OK - 2 clients ok (catalog main version 4, max age 26h) | clients_ok=2 clients_warning=0 clients_critical=0 oldest_age_seconds=3600',
  );
  assert.deepEqual(
    ok.clients.map((c) => c.ageSeconds),
    [3600, 0],
  );

  const warn = checkResult(o, {
    versionId: '4',
    clients: [{ client: 'a', hasGoodBackup: false, hasWarningBackup: true, newestAgeSeconds: 60 }],
  });
  assert.equal(warn.code, 1);
  assert.match(
    warn.line,
    /^CATALOG WARNING - 1 of 1 clients with only warning backups \(W, or T with job errors\) within max age 26h: a \(catalog main version 4\) \| /,
  );

  const many = Array.from({ length: 10 }, (_, i) => ({
    client: `c${i}`,
    hasGoodBackup: false,
    hasWarningBackup: false,
    newestAgeSeconds: null,
  }));
  const crit = checkResult(o, {
    versionId: '4',
    clients: [...many, { client: 'w|x', hasGoodBackup: false, hasWarningBackup: true, newestAgeSeconds: 10 }],
  });
  assert.equal(crit.code, 2);
  assert.equal(
    crit.line,
    'CATALOG CRITICAL - 10 of 11 clients without a good backup within max age 26h: c0, c1, c2, c3, c4, c5, c6, c7, ... (2 more); 1 warning: w x (catalog main version 4) | ' +
      'clients_ok=0 clients_warning=1 clients_critical=10 oldest_age_seconds=10',
  );
});

test('check: no configuration or no database is UNKNOWN (3) with one line', async () => {
  const lines: string[] = [];
  const noConfig = fakeContext(() => {
    throw new Error('CATALOG_REBUILD_CONFIG is not set');
  }, lines);
  assert.equal(await checkCommand(noConfig, { catalog: 'main', maxAge: 60, lookback: 60, timeout: 5 }), 3);
  assert.deepEqual(lines, ['CATALOG UNKNOWN - CATALOG_REBUILD_CONFIG is not set']);

  lines.length = 0;
  let ended = false;
  const down = fakeContext(
    {
      connect: (() => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:1'))) as Pool['connect'],
      end: (async () => {
        ended = true;
      }) as Pool['end'],
    },
    lines,
  );
  assert.equal(await checkCommand(down, { catalog: 'main', maxAge: 60, lookback: 60, timeout: 5 }), 3);
  assert.deepEqual(lines, [
    'CATALOG UNKNOWN - cannot connect to the catalog database: connect ECONNREFUSED 127.0.0.1:1',
  ]);
  assert.ok(ended, 'the pool is ended');
});

test('throttle without a setting is a usage error before any connection', async () => {
  const lines: string[] = [];
  await assert.rejects(
    throttleCommand(fakeContext({}, lines), { catalog: 'main' }),
    (e: unknown) =>
      e instanceof ExitCode && e.code === 2 && e.message === 'throttle needs --concurrency and/or --pause-ms',
  );
  assert.deepEqual(lines, []);
});

test('events through the command tree: options parsed, rows printed oldest first, pool ended', async () => {
  const lines: string[] = [];
  const calls: unknown[][] = [];
  let ended = false;
  const rows: EventRow[] = [
    {
      event_id: '1',
      created_at: new Date('2026-11-01T20:00:00Z'),
      version_id: '2',
      kind: 'planned',
      message: 'planned',
      details: {},
    },
    {
      event_id: '2',
      created_at: new Date('2026-11-01T20:01:00Z'),
      version_id: '2',
      kind: 'published',
      message: 'published',
      details: {},
    },
  ];
  const pool = {
    query: (async (_sql: string, params: unknown[]) => {
      calls.push(params);
      return { rows };
    }) as unknown as Pool['query'],
    end: (async () => {
      ended = true;
    }) as Pool['end'],
  };
  const program = buildCli(
    (l) => lines.push(l),
    (l) => lines.push(`err: ${l}`),
    fakeContext(pool, lines),
  );
  await program.parseAsync(['events', '--catalog', 'main', '--limit', '2'], { from: 'user' });
  assert.deepEqual(calls, [['main', 2]]);
  assert.deepEqual(lines, [
    '2026-11-01T20:00:00.000Z  v2  planned      planned',
    '2026-11-01T20:01:00.000Z  v2  published    published',
  ]);
  assert.ok(ended, 'the pool is ended');
});

/** Runs the CLI in process; its output and diagnostics as one text. */
async function run(argv: string[]): Promise<{ code: number; text: string }> {
  const lines: string[] = [];
  const code = await runCli(
    argv,
    (l) => lines.push(l),
    (l) => lines.push(l),
  );
  return { code, text: lines.join('\n') };
}

test('files and find: usage errors exit 2 before any connection; start --help shows --files', async () => {
  const noJob = await run(['files', '--catalog', 'main']);
  assert.equal(noJob.code, 2);
  assert.match(noJob.text, /--job <id>/);
  assert.equal((await run(['files', '--catalog', 'main', '--job', ' '])).code, 2);
  assert.equal((await run(['find', '--catalog', 'main'])).code, 2);
  const star = await run(['find', '--catalog', 'main', '--path', '*']);
  assert.equal(star.code, 2);
  assert.match(star.text, /prefix before the trailing \*/);
  assert.equal((await run(['find', '--catalog', 'main', '--path', '/etc/*', '--limit', '0'])).code, 2);
  assert.equal((await run(['find', '--catalog', 'main', '--path-hex', 'xyz'])).code, 2);
  // A dry run changes nothing: the flags of a rebuild that would are usage errors with it.
  for (const flag of [['--wait'], ['--allow-shrink'], ['--retention', '3']]) {
    const both = await run(['start', '--catalog', 'main', '--source', 'director', '--dry-run', ...flag]);
    assert.equal(both.code, 2, both.text);
    assert.match(both.text, new RegExp(`^error: option '${flag[0]}( <n>)?' cannot be used with option '--dry-run'`));
  }
  const help = await run(['start', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.text, /--files +rebuild each job's file records too/);
});

test('a mistyped required option is named as unknown, before the required one is called missing; a missing one still is', async () => {
  const typo = await run(['status', '--catalg', 'demo']);
  assert.equal(typo.code, 2);
  assert.match(typo.text, /^error: unknown option '--catalg'\n\(Did you mean --catalog\?\)/);
  assert.doesNotMatch(typo.text, /required option/);
  const missing = await run(['status', '--json']);
  assert.equal(missing.code, 2);
  assert.match(missing.text, /^error: required option '--catalog <name>' not specified/);
  const startTypo = await run(['start', '--catalog', 'main', '--sorce', 'director']);
  assert.equal(startTypo.code, 2);
  assert.match(startTypo.text, /^error: unknown option '--sorce'/);
  const filesNoJob = await run(['files', '--catalog', 'main']);
  assert.match(filesNoJob.text, /^error: required option '--job <id>' not specified/);
  // check is a Nagios plugin: its usage errors stay one UNKNOWN line, exit 3.
  const out: string[] = [];
  const checkCode = await runCli(
    ['check', '--rebuild', '--catlog', 'main'],
    (l) => out.push(l),
    () => undefined,
  );
  assert.equal(checkCode, 3);
  assert.deepEqual(out, ["REBUILD UNKNOWN - usage: unknown option '--catlog' (Did you mean --catalog?)"]);
});

test('find: a --path whose raw bytes are not UTF-8 becomes --path-hex; UTF-8 and other commands stay as they are', () => {
  const latin1 = Buffer.from('/home/caf\xe9', 'latin1');
  const argv = ['find', '--catalog', 'main', '--path', latin1.toString('utf8')];
  assert.match(argv[4], /\uFFFD/);
  const raw = argv.map((a, i) => (i === 4 ? latin1 : Buffer.from(a)));
  assert.deepEqual(pathArgsFromRawBytes(argv, raw), [
    'find',
    '--catalog',
    'main',
    '--path-hex',
    latin1.toString('hex'),
  ]);
  const prefix = Buffer.concat([latin1, Buffer.from('/*')]);
  assert.deepEqual(
    pathArgsFromRawBytes(
      ['find', `--path=${prefix.toString('utf8')}`],
      [Buffer.from('find'), Buffer.concat([Buffer.from('--path='), prefix])],
    ),
    ['find', `--path-hex=${Buffer.concat([latin1, Buffer.from('/')]).toString('hex')}*`],
  );
  const utf8 = ['find', '--path', '/home/café'];
  assert.deepEqual(
    pathArgsFromRawBytes(
      utf8,
      utf8.map((a) => Buffer.from(a)),
    ),
    utf8,
  );
  assert.deepEqual(pathArgsFromRawBytes(argv, undefined), argv);
  const files = ['files', '--path', argv[4]];
  assert.deepEqual(pathArgsFromRawBytes(files, [Buffer.from('files'), Buffer.from('--path'), latin1]), files);
  assert.deepEqual(parsePathHex('2f6574632f*'), { bytes: Buffer.from('/etc/'), prefix: true });
  assert.throws(() => parsePathHex('2f*2f'), /two digits per byte/);
});

test('start attaching to a running rebuild compares --files, --refresh and --verify like the other identifying flags', () => {
  const flags = rebuildFlags({ catalog: 'main', source: 'director', files: true });
  assert.deepEqual(flags, {
    source: 'director',
    pageSize: 'auto',
    concurrency: 4,
    allowShrink: false,
    files: true,
    refresh: false,
    verify: 'stored',
  });
  assert.deepEqual(flagConflicts({ ...flags }, flags), []);
  assert.deepEqual(flagConflicts({ ...flags }, { ...flags, verify: 'full' }), [
    'verify: running "stored", requested "full"',
  ]);
  // A rebuild started before --verify existed recorded none: its own verification.
  const { verify: _v, ...noVerify } = flags;
  assert.deepEqual(flagConflicts(noVerify, flags), []);
  assert.deepEqual(flagConflicts({ ...flags, files: false }, flags), ['files: running false, requested true']);
  assert.deepEqual(flagConflicts({ ...flags }, { ...flags, refresh: true }), [
    'refresh: running false, requested true',
  ]);
  // A rebuild started by a release without --files recorded no `files` flag: it has none.
  const { files: _, ...old } = flags;
  assert.deepEqual(flagConflicts(old, flags), ['files: running false, requested true']);
  assert.deepEqual(flagConflicts(old, { ...flags, files: false }), []);
});

test('files and find print one line per hit or one JSON array, and name a catalog without file records', async () => {
  const hit = (jobId: string, name: string, deleted = false): FileHit => ({
    jobId,
    startTime: '2026-11-01T20:00:00.000Z',
    path: '/etc/',
    name,
    size: '158',
    mtime: null,
    deleted,
  });
  const calls: unknown[][] = [];
  let active: ActiveFileVersion | null = { versionId: '7', files: true };
  const reads: FileReads = {
    activeFileVersion: async () => active,
    matchJobIds: async (_db, _catalog, job) => [job],
    listJobFiles: async (_db, ...args) => (
      calls.push(['list', ...args]),
      [hit('12', 'hosts'), hit('12', ''), ...(args[3] ? [hit('12', 'old', true)] : [])]
    ),
    findFiles: async (_db, ...args) => (calls.push(['find', ...args]), [hit('12', 'hosts'), hit('9', 'hosts')]),
    findFilesByBytes: async (_db, catalog, bytes, ...args) => (
      calls.push(['bytes', catalog, bytes.toString('hex'), ...args]),
      []
    ),
  };
  const lines: string[] = [];
  const notes: string[] = [];
  const ctx = fakeContext({ end: (async () => undefined) as Pool['end'] }, lines);
  const note = (l: string) => notes.push(l);
  assert.equal(await filesCommand(ctx, { catalog: 'main', job: '12', json: false }, note, reads), 0);
  assert.deepEqual(lines, [
    '12  2026-11-01T20:00:00.000Z  /etc/hosts  158  -',
    '12  2026-11-01T20:00:00.000Z  /etc/  158  -',
  ]);
  lines.length = 0;
  assert.equal(await filesCommand(ctx, { catalog: 'main', job: '12', json: false, deleted: true }, note, reads), 0);
  assert.equal(lines[2], '12  2026-11-01T20:00:00.000Z  /etc/old  158  -  deleted');
  lines.length = 0;
  assert.equal(await findCommand(ctx, { catalog: 'main', path: '/etc/hosts', limit: 1, json: true }, note, reads), 0);
  assert.deepEqual(JSON.parse(lines[0]), [hit('12', 'hosts')]);
  assert.deepEqual(notes, ['first 1 hits shown (newest jobs); more with a higher --limit']);
  assert.deepEqual(calls, [
    ['list', 'main', '12', undefined, false],
    ['list', 'main', '12', undefined, true],
    ['find', 'main', '/etc/hosts', 2, false],
  ]);
  calls.length = 0;
  assert.equal(
    await findCommand(ctx, { catalog: 'main', pathHex: '2f6574632f636166e9*', limit: 3, json: false }, note, reads),
    0,
  );
  assert.deepEqual(calls.at(-1), ['bytes', 'main', '2f6574632f636166e9', true, 4, false]);
  assert.equal(
    notes.at(-1),
    'no file record matches --path-hex 2f6574632f636166e9* in the active version 7 of catalog main',
  );
  for (const [bad, why] of [
    [{ pathHex: '2f6' }, /two digits per byte/],
    [{ pathHex: '2f00' }, /NUL/],
    [{}, /needs one of --path or --path-hex/],
    [{ path: '/etc/', pathHex: '2f' }, /one of --path or --path-hex, not both/],
  ] as const) {
    await assert.rejects(
      findCommand(ctx, { catalog: 'main', limit: 3, json: false, ...bad }, note, reads),
      (e: unknown) => e instanceof ExitCode && e.code === 2 && why.test(e.message),
      JSON.stringify(bad),
    );
  }
  // A byte lost before the CLI saw it (npx passes arguments on as text): the note says how to give it.
  const lostReads: FileReads = { ...reads, findFiles: async () => [] };
  assert.equal(
    await findCommand(ctx, { catalog: 'main', path: '/srv/caf\uFFFD', limit: 3, json: false }, note, lostReads),
    0,
  );
  assert.match(notes.at(-1)!, /U\+FFFD: a byte that is not UTF-8 was lost .* --path-hex/);
  active = { versionId: '7', files: false };
  await assert.rejects(
    findCommand(ctx, { catalog: 'main', path: '/etc/*', limit: 5, json: false }, note, reads),
    (e: unknown) =>
      e instanceof ExitCode && e.code === 1 && /version 7 of catalog main has no file records/.test(e.message),
  );
  active = null;
  await assert.rejects(
    filesCommand(ctx, { catalog: 'main', job: '12', json: false }, note, reads),
    (e: unknown) => e instanceof ExitCode && e.code === 1 && /catalog main has no active version/.test(e.message),
  );
});

test('getProgress asks again when the server refuses a query with a full query buffer; other errors and the timeout still reject', async (t) => {
  const full = new Error(
    'querying workflow failed: consistent query buffer is full, this may be caused by too many queries',
  );
  let calls = 0;
  const flaky = {
    query: async () => {
      calls++;
      if (calls <= 3) throw full;
      return { phase: 'copying', pagesDone: 7 };
    },
  } as unknown as WorkflowHandle;
  const p = await getProgress(flaky, 5_000);
  assert.equal(calls, 4);
  assert.equal((p as { pagesDone: number }).pagesDone, 7);

  const broken = { query: async () => Promise.reject(new Error('workflow not found')) } as unknown as WorkflowHandle;
  await assert.rejects(getProgress(broken, 5_000), /workflow not found/);

  // The timeout and the retries on mocked timers: asked at 0, 200, 400 and 600 ms, refused at 700 ms,
  // and at most one more ask (the retry already waiting) after it.
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const settle = () => new Promise((r) => setImmediate(r));
  const advance = async (ms: number) => {
    for (let at = 0; at < ms; at += 50) {
      await settle();
      t.mock.timers.tick(50);
    }
    await settle();
  };
  let asked = 0;
  const alwaysFull = {
    query: async () => {
      asked++;
      throw full;
    },
  } as unknown as WorkflowHandle;
  const refused = assert.rejects(getProgress(alwaysFull, 700), /no worker answered the progress query within 700 ms/);
  await advance(700);
  await refused;
  assert.equal(asked, 4, 'asked at 0, 200, 400 and 600 ms');
  await advance(1_000);
  assert.ok(asked <= 5, `no asking after the timeout but the retry already waiting: asked ${asked}`);
});

test('commands that read only the catalog database never load @temporalio/client; Temporal commands do', () => {
  // A fresh process per command: which modules its run loaded (the catalog database is unreachable,
  // so each ends with its own error after loading what it needs).
  const loaded = (args: string[]) => {
    const script = `const { runCli } = require(${JSON.stringify(require.resolve('../client/cli'))});
      runCli(${JSON.stringify(args)}, () => {}, () => {}).then((code) => {
        const mods = Object.keys(require.cache);
        console.log(JSON.stringify({ code, client: mods.some((m) => m.includes('@temporalio/client/')) }));
        process.exit(0);
      });`;
    const r = spawnSync(process.execPath, ['-e', script], {
      encoding: 'utf8',
      env: {
        ...process.env,
        CATALOG_REBUILD_CONFIG: '',
        CATALOG_DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none',
        TEMPORAL_ADDRESS: '127.0.0.1:1',
      },
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { code: number; client: boolean };
  };
  for (const args of [
    ['check', '--catalog', 'c'],
    ['files', '--catalog', 'c', '--job', '1'],
    ['find', '--catalog', 'c', '--path', '/etc/hosts'],
    ['events', '--catalog', 'c'],
    ['rejects', '--catalog', 'c'],
    ['rollback', '--catalog', 'c'],
  ]) {
    const r = loaded(args);
    assert.notEqual(r.code, 0, `${args[0]} fails on the unreachable database`);
    assert.equal(r.client, false, `${args.join(' ')} loaded @temporalio/client`);
  }
  const status = loaded(['check', '--catalog', 'c', '--rebuild', '--timeout', '2s']);
  assert.equal(status.client, true, 'check --rebuild talks to Temporal');
});
