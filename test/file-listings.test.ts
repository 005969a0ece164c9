/**
 * restic and borg file listings mapped to the page stage (no services). The fixtures in
 * test/fixtures/file-listings are real output: `restic ls --json` of restic 0.14.0, 0.18.0 and
 * 0.19.1 and `borg list --json-lines` of borg 1.2.4 and borg2 2.0.0b5 (Debian's packages), each of
 * one backup of the same tree: a sparse file of 2^32 + 1 bytes, names with a tab, a newline, a
 * backslash and quotes, unicode and a Latin-1 byte (0xfc), an empty file with mtime 0, a file with
 * an mtime of 1960, a setuid file owned by uid 4000000000, a setgid and a sticky directory, a
 * symlink, a fifo, a character and a block device. restic 0.16 writes the node records of 0.14 plus
 * `inode`, restic 0.17 those of 0.18 (restic's cmd/restic/cmd_ls.go at v0.16.4 and v0.17.3).
 * The expected values below are the tree's own (ls -l, stat), written by hand.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as os from 'node:os';
import { spawn } from 'node:child_process';
import { projectRoot } from '../lib/paths';
import type { ListedJob, StagedListingRecord } from '../lib/sources/file-listing';
import { LISTING_STAGE_COLUMNS, listingRecord, listingRecordCopyLine } from '../lib/sources/file-listing';
import type { ListingKind } from '../lib/sources/listing-formats';
import { listingFormat } from '../lib/sources/listing-formats';
import { borgMode } from '../lib/sources/listing-formats/borg';
import { resticFormat, resticMode, resticSnapshotId } from '../lib/sources/listing-formats/restic';
import { commandArgv, filesCommandStream } from '../lib/sources/files-command';
import { listingFilePages } from '../lib/sources/staged-files';

const DIR = path.join(projectRoot(), 'test', 'fixtures', 'file-listings');
const JOB: ListedJob = { jobKey: '3', jobId: 'snap', bucket: '2026-12-01' };

type Rec = Record<(typeof LISTING_STAGE_COLUMNS)[number], string | null>;
const asRec = (r: StagedListingRecord): Rec =>
  Object.fromEntries(LISTING_STAGE_COLUMNS.map((c, i) => [c, r[i]])) as Rec;

/** A fixture's records, mapped, keyed by path + name (restic's snapshot line checked and left out). */
function mapped(
  file: string,
  kind: ListingKind,
): { records: Rec[]; byName: Map<string, Rec>; snapshot: string | null } {
  const lines = fs
    .readFileSync(path.join(DIR, file), 'utf8')
    .split('\n')
    .filter((l) => l.trim());
  let snapshot: string | null = null;
  if (kind === 'restic-json') {
    snapshot = resticSnapshotId(lines[0]);
    lines.shift();
  }
  const records = lines.map((l, i) => asRec(listingRecord(listingFormat(kind), JOB, i + 1, l)));
  return { records, byName: new Map(records.map((r) => [`${r.path}${r.name}`, r])), snapshot };
}

const OCT = (s: string) => String(parseInt(s, 8));

for (const v of ['0.14', '0.18', '0.19']) {
  test(`restic ${v} ls --json: every node mapped, field by field`, () => {
    const snapshots = JSON.parse(fs.readFileSync(path.join(DIR, `restic-${v}-snapshots.json`), 'utf8')) as {
      id: string;
    }[];
    const { records, byName, snapshot } = mapped(`restic-${v}-ls.jsonl`, 'restic-json');
    assert.equal(snapshot, snapshots[0].id, 'the first line names the snapshot listed');
    assert.equal(records.length, 20);
    assert.deepEqual(
      records.map((r) => r.problem),
      records.map(() => null),
    );
    assert.deepEqual(
      records.map((r) => r.file_index),
      records.map((_, i) => String(i + 1)),
    );
    assert.deepEqual(
      records.map((r) => r.file_id),
      records.map((_, i) => String(3n * 10_000_000_000n + BigInt(i + 1))),
    );
    const d = '/tmp/fx/src/data/';
    const get = (p: string) => {
      const r = byName.get(p);
      assert.ok(r, `${p} in ${[...byName.keys()].join(', ')}`);
      return r;
    };
    const readme = get(`${d}docs/readme.txt`);
    assert.deepEqual(
      [readme.path, readme.name, readme.size, readme.mode, readme.uid, readme.gid, readme.mtime, readme.delta_seq],
      [`${d}docs/`, 'readme.txt', '6', OCT('100644'), '0', '0', '1960-06-15T12:00:00.000000Z', '0'],
    );
    assert.equal(get(`${d}docs/empty`).mtime, '1970-01-01T00:00:00.000000Z');
    assert.equal(get(`${d}docs/empty`).size, '0');
    for (const n of [
      'tab\tname.txt',
      'new\nline.txt',
      'back\\slash "quote".txt',
      'ünïcødé-日本.txt',
      'M\ufffdller.txt',
    ])
      assert.equal(get(`${d}docs/${n}`).name, n);
    const setuid = get(`${d}setuid`);
    assert.deepEqual([setuid.mode, setuid.uid, setuid.gid], [OCT('104755'), '4000000000', '4000000001']);
    assert.equal(get(`${d}sparse-4GiB+1`).size, '4294967297');
    const sticky = get(`${d}sticky/`);
    assert.deepEqual([sticky.path, sticky.name, sticky.mode, sticky.size], [`${d}sticky/`, '', OCT('41777'), null]);
    assert.equal(get(`${d}dir with space/`).mode, OCT('42750'));
    assert.equal(get('/tmp/').mode, OCT('41777'), '/tmp, a directory of the path backed up');
    assert.deepEqual([get(`${d}link`).mode, get(`${d}link`).size], [OCT('120777'), null]);
    assert.equal(get(`${d}fifo`).mode, OCT('10644'));
    assert.equal(get(`${d}chardev`).mode, OCT('20644'));
    assert.equal(get(`${d}blockdev`).mode, OCT('60644'));
    assert.ok(readme.raw === null && readme.path_bytes === null && readme.name_bytes === null);
  });
}

for (const [file, offset] of [
  ['borg-1.2-files.jsonl', ''],
  ['borg-2-files.jsonl', '+00:00'],
] as const) {
  test(`${file.replace('-files.jsonl', '')} list --json-lines: every entry mapped, field by field`, () => {
    const { records, byName } = mapped(file, 'borg-json');
    assert.equal(records.length, 17);
    assert.deepEqual(
      records.map((r) => r.problem),
      records.map(() => null),
    );
    const get = (p: string) => {
      const r = byName.get(p);
      assert.ok(r, `${p} in ${[...byName.keys()].join(', ')}`);
      return r;
    };
    assert.deepEqual(
      [get('data/').path, get('data/').name, get('data/').mode, get('data/').size],
      ['data/', '', OCT('40755'), '0'],
    );
    const readme = get('data/docs/readme.txt');
    assert.deepEqual(
      [readme.path, readme.name, readme.size, readme.mode, readme.mtime],
      ['data/docs/', 'readme.txt', '6', OCT('100644'), `1970-01-01T00:00:00.000000${offset}`],
    );
    assert.equal(get('data/docs/tab\tname.txt').mtime, `2026-12-01T21:52:33.687138${offset}`);
    for (const n of ['tab\tname.txt', 'new\nline.txt', 'back\\slash "quote".txt', 'ünïcødé-日本.txt'])
      assert.equal(get(`data/docs/${n}`).name, n);
    const setuid = get('data/setuid');
    assert.deepEqual([setuid.mode, setuid.uid, setuid.gid], [OCT('104755'), '4000000000', '4000000001']);
    assert.equal(get('data/sparse-4GiB+1').size, '4294967297');
    assert.equal(get('data/sticky/').mode, OCT('41777'));
    assert.equal(get('data/dir with space/').mode, OCT('42750'));
    assert.equal(get('data/link').mode, OCT('120777'));
    assert.equal(get('data/fifo').mode, OCT('10644'));
    assert.equal(get('data/chardev').mode, OCT('20644'));
    assert.equal(get('data/blockdev').mode, OCT('60644'));
    if (offset) {
      // borg 2 gives the exact bytes of a path that is not UTF-8 (path_b64): the name is staged as bytes.
      const muller = records.find((r) => r.name_bytes !== null)!;
      assert.deepEqual(
        [muller.path, muller.name, muller.path_bytes, muller.name_bytes],
        ['data/docs/', null, null, `\\x${Buffer.from('M\xfcller.txt', 'latin1').toString('hex')}`],
      );
    } else {
      assert.equal(get('data/docs/M?ller.txt').name, 'M?ller.txt', 'borg 1.2 writes ? for the byte');
    }
  });
}

test('Go file modes and borg mode strings as POSIX st_mode', () => {
  assert.equal(resticMode('file', undefined), 0o100000, 'restic leaves out a zero mode');
  assert.equal(resticMode('dir', 2161115629), 0o047755, 'restic’s own test: setuid, setgid, sticky dir');
  assert.equal(resticMode('irregular', 0o644), 0o644);
  assert.deepEqual(resticMode('door', 0o644), { error: 'type: unknown node type "door"' });
  assert.equal(borgMode('-rwSr-Sr-T'), 0o107644);
  assert.equal(borgMode('srwxr-xr-x'), 0o140755);
  assert.deepEqual(borgMode('-rw-r--r'), { error: 'mode: not a mode string ("-rw-r--r")' });
});

test('records that cannot be used are quarantined with their line; sizes beyond 2^53 stay exact', () => {
  // Lines written for this test (the edge cases real listings of this tree do not hold).
  const big = asRec(
    listingRecord(resticFormat, JOB, 1, '{"name":"b","type":"file","path":"/b","size":1152921504606846977,"mode":420}'),
  );
  assert.deepEqual([big.size, big.problem, big.mtime], ['1152921504606846977', null, null]);
  const cases: [string, RegExp][] = [
    ['{"name":"x","type":"door","path":"/x"}', /^type: unknown node type "door"$/],
    ['{"name":"x","type":"file","path":"/a\\u0000b"}', /name: contains a NUL character/],
    ['{"name":"x","type":"file","path":"/x","size":1.5}', /^size: not a whole number \(1\.5\)$/],
    ['{"name":"x","type":"file","path":"/x","size":18446744073709551616}', /^size: exceeds 64 bits/],
    ['{"name":"x","type":"file","path":"/x","mtime":"yesterday"}', /^mtime: not an RFC 3339 time \(yesterday\)$/],
    ['{"name":"x","type":"file","path":"/x","mtime":"2026-02-30T00:00:00Z"}', /^mtime: not a calendar date/],
    ['{"name":"x","type":"file","path":"/x","mtime":"0000-06-01T00:00:00Z"}', /^mtime: not a calendar date/],
    ['{"name":"x","type":"file","path":"/x","mtime":"2026-01-01T00:00:00+99:99"}', /^mtime: has a UTC offset beyond/],
    ['{"name":"x","type":"file","path":"/x","mtime":3}', /^mtime: not an RFC 3339 time \(3\)$/],
    ['{"name":"x","type":"file","path":"/x","uid":99999999999999999999}', /^uid: exceeds 63 bits/],
    ['{"name":"x","type":"file"}', /^path: is missing$/],
    ['{"name":', /^record: not valid JSON/],
  ];
  for (const [line, reason] of cases) {
    const r = asRec(listingRecord(resticFormat, JOB, 7, line));
    assert.match(r.problem ?? '', reason, line);
    assert.equal(r.raw, line);
    assert.equal(r.file_index, '7');
    assert.doesNotMatch(listingRecordCopyLine(listingRecord(resticFormat, JOB, 7, line)), /\u0000/);
  }
});

test('a page of listed jobs: restic estimates pack jobs up to the target; a job without one is a page of its own', () => {
  assert.deepEqual(listingFilePages(['10', '20', '500', null, '5'], 100), [
    { firstKey: '1', lastKey: '2', rows: 2, weight: 32 },
    { firstKey: '3', lastKey: '3', rows: 1, weight: 501 },
    { firstKey: '4', lastKey: '4', rows: 1, weight: 101 },
    { firstKey: '5', lastKey: '5', rows: 1, weight: 6 },
  ]);
  assert.deepEqual(listingFilePages([], 100), []);
});

test('filesCommand: placeholders per job; a snapshot gone from the repository fails a stream that takes no gone jobs, naming it; other failures are retryable errors', async () => {
  const job = { jobKey: '1', jobId: 'abc123', bucket: null, id: 'abc123', shortId: 'abc1', archive: 'host-2026' };
  const settings = {
    source: 'r',
    kind: 'borg-json' as const,
    argv: ['borg', 'list', '--json-lines', '{repo}::{archive}', '{id}', '{short_id}'],
    repository: '/srv/borg',
    timeoutMs: 5_000,
  };
  assert.deepEqual(commandArgv(settings, job), [
    'borg',
    'list',
    '--json-lines',
    '/srv/borg::host-2026',
    'abc123',
    'abc1',
  ]);
  const drain = async (argv: string[], kind: ListingKind = 'restic-json') => {
    let text = '';
    for await (const chunk of filesCommandStream({ ...settings, kind, argv }, [job])) text += String(chunk);
    return text;
  };
  // restic 0.14 prints nothing and exits 0 for a missing snapshot; 0.18 exits 1 with this message.
  await assert.rejects(
    drain(['sh', '-c', 'echo \'Ignoring "abc123": no matching ID found for prefix "abc123"\' >&2']),
    (e: Error & { code?: string }) =>
      e.code === 'SOURCE_DATA_INVALID' &&
      /snapshot abc123: the snapshot is no longer in the repository/.test(e.message),
  );
  await assert.rejects(
    drain(['sh', '-c', 'echo "Archive host-2026 does not exist" >&2; exit 2'], 'borg-json'),
    (e: Error & { code?: string }) => e.code === 'SOURCE_DATA_INVALID' && /archive host-2026/.test(e.message),
  );
  await assert.rejects(
    drain(['sh', '-c', 'echo "repository is already locked" >&2; exit 11'], 'borg-json'),
    (e: Error & { code?: string }) =>
      e.code === undefined && /exited with status 11: repository is already locked/.test(e.message),
  );
  const lines = await drain(
    ['cat', path.join(DIR, 'restic-0.14-ls.jsonl')].map((a) => a),
    'restic-json',
  ).catch((e: Error) => e.message);
  assert.match(String(lines), /listed snapshot b06b35b8.* instead/);
  const text = await drain(['cat', path.join(DIR, 'borg-1.2-files.jsonl')], 'borg-json');
  assert.equal(text.split('\n').filter(Boolean).length, 17);
});

test('filesCommand: a snapshot or archive gone from the repository is told to onGone and the stream goes on with the next job; other failures still fail it', async () => {
  const listing = path.join(DIR, 'restic-0.14-ls.jsonl');
  const snapshot = resticSnapshotId(fs.readFileSync(listing, 'utf8').split('\n')[0])!;
  const job = (n: number, id: string) => ({
    jobKey: String(n),
    jobId: id,
    bucket: '2026-12-01',
    id,
    shortId: id.slice(0, 8),
    archive: `host-${n}`,
  });
  const settings = { source: 'r', kind: 'restic-json' as const, timeoutMs: 5_000 };
  // restic 0.14 for a forgotten snapshot: a warning, no output, exit 0; 0.18: exit 1. Else the listing.
  const argv = [
    'sh',
    '-c',
    `case "$0" in gone14) echo "Ignoring \"$0\": no matching ID found for prefix \"$0\"" >&2;;
       gone18) echo '{"message_type":"exit_error","code":1,"message":"no matching ID found for prefix"}' >&2; exit 1;;
       *) exec cat "${listing}";; esac`,
    '{id}',
  ];
  const drain = async (jobs: ReturnType<typeof job>[], a = argv, kind: ListingKind = 'restic-json') => {
    const told: { jobKey: string; jobId: string; bucket: string | null; reason: string }[] = [];
    let text = '';
    for await (const chunk of filesCommandStream({ ...settings, kind, argv: a }, jobs, (g) => told.push(g)))
      text += String(chunk);
    return { told, text };
  };
  const r = await drain([job(1, 'gone14'), job(2, snapshot), job(3, 'gone18')]);
  assert.deepEqual(
    r.told.map((g) => [g.jobKey, g.jobId, g.bucket]),
    [
      ['1', 'gone14', '2026-12-01'],
      ['3', 'gone18', '2026-12-01'],
    ],
  );
  assert.match(
    r.told[0].reason,
    /^the snapshot is no longer in the repository: Ignoring "?gone14"?: no matching ID found/,
  );
  assert.equal(r.text.split('\n').filter(Boolean).length, 20, 'the listed job kept all its records');
  const borg = await drain(
    [job(1, 'a1'), job(2, 'a2')],
    [
      'sh',
      '-c',
      'if [ "$0" = host-1 ]; then echo "Archive host-1 does not exist" >&2; exit 2; fi; cat "$1"',
      '{archive}',
      path.join(DIR, 'borg-1.2-files.jsonl'),
    ],
    'borg-json',
  );
  assert.deepEqual(
    borg.told.map((g) => [g.jobId, g.reason]),
    [['a1', 'the archive is no longer in the repository: Archive host-1 does not exist']],
  );
  assert.equal(borg.text.split('\n').filter(Boolean).length, 17);
  // A failure that is not a gone snapshot stays an error of the stream, retryable.
  await assert.rejects(
    drain([job(1, 'gone14'), job(2, 'x')], ['sh', '-c', 'echo "repository is already locked" >&2; exit 11']),
    (e: Error & { code?: string }) => e.code === undefined && /exited with status 11/.test(e.message),
  );
  // A listing of another snapshot is still refused non-retryably.
  await assert.rejects(
    drain([job(1, 'abc')], ['cat', listing]),
    (e: Error & { code?: string }) => e.code === 'SOURCE_DATA_INVALID' && /listed snapshot .* instead/.test(e.message),
  );
});

test('filesCommand: a warning on standard error with a good listing is no prune; a value holding a placeholder stays as it is', async () => {
  const job = { jobKey: '1', jobId: 'b06b35b8', bucket: null, id: 'b06b35b8', shortId: 'b06b35b8', archive: 'a{repo}' };
  const settings = {
    source: 'r',
    kind: 'restic-json' as const,
    argv: ['x', '{archive}'],
    repository: '/srv',
    timeoutMs: 5_000,
  };
  assert.deepEqual(commandArgv(settings, job), ['x', 'a{repo}']);
  let text = '';
  const listing = path.join(DIR, 'restic-0.14-ls.jsonl');
  for await (const chunk of filesCommandStream(
    {
      ...settings,
      argv: [
        'sh',
        '-c',
        `echo "Warning: cache dir /root/.cache/restic does not exist, creating" >&2; exec cat "${listing}"`,
      ],
    },
    [job],
  ))
    text += String(chunk);
  assert.equal(text.split('\n').filter(Boolean).length, 20);
  await assert.rejects(
    (async () => {
      for await (const _ of filesCommandStream({ ...settings, argv: ['sh', '-c', `tail -n +2 "${listing}"`] }, [job]))
        void _;
    })(),
    /printed no snapshot line \(20 records\): is it restic ls --json for one snapshot\?/,
  );
});

/** The pid a test command wrote to `pidFile` once it started (waits up to 20 s). */
async function commandPid(pidFile: string): Promise<number> {
  const deadline = Date.now() + 20_000;
  while (!fs.existsSync(pidFile) || !fs.readFileSync(pidFile, 'utf8').trim()) {
    assert.ok(Date.now() < deadline, 'the command started');
    await new Promise((r) => setTimeout(r, 50));
  }
  return Number(fs.readFileSync(pidFile, 'utf8'));
}

/** Whether process `pid` exists. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits up to `ms` for process `pid` to be gone. */
async function endsWithin(pid: number, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

test('filesCommand: when the worker dies (SIGKILL), the command it was running is ended with its process group', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-watchdog-'));
  const pidFile = path.join(dir, 'pid');
  const script = `
    const { filesCommandStream } = require(${JSON.stringify(path.join(projectRoot(), 'dist/lib/sources/files-command.js'))});
    const job = { jobKey: '1', jobId: 'x', bucket: null, id: 'x', shortId: 'x', archive: 'x' };
    filesCommandStream({ source: 'r', kind: 'borg-json', argv: ['sh', '-c', 'trap "" TERM; echo $$ > ${pidFile}; sleep 300'], timeoutMs: 600000 }, [job]).resume();`;
  const fakeWorker = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
  try {
    const pid = await commandPid(pidFile);
    const alive = () => isAlive(pid);
    assert.ok(alive(), 'the command runs');
    fakeWorker.kill('SIGKILL');
    await endsWithin(pid, 10_000);
    assert.equal(alive(), false, `command ${pid} ended with its worker`);
  } finally {
    fakeWorker.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('filesCommand: a cancelled page (its AbortSignal) ends the command in flight with its process group', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-abort-'));
  const pidFile = path.join(dir, 'pid');
  const ac = new AbortController();
  const job = { jobKey: '1', jobId: 'x', bucket: null, id: 'x', shortId: 'x', archive: 'x' };
  const stream = filesCommandStream(
    {
      source: 'r',
      kind: 'borg-json',
      argv: ['sh', '-c', `trap "" TERM; echo $$ > ${pidFile}; sleep 300`],
      timeoutMs: 600_000,
      signal: ac.signal,
    },
    [job],
  );
  const drained = (async () => {
    for await (const _ of stream) void _;
  })();
  try {
    const pid = await commandPid(pidFile);
    const alive = () => isAlive(pid);
    ac.abort();
    await assert.rejects(drained, /source r: files command was cancelled/);
    await endsWithin(pid, 10_000);
    assert.equal(alive(), false, `command ${pid} ended with its page`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
