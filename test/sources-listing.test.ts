/**
 * restic and borg listings: parsing (bigint-safe, restic's null / grouped shapes, borg checkpoints,
 * per-record validation) without services, then real rebuilds of listing files and a listing
 * command on a private Temporal dev server with a real worker (TZ=Asia/Kolkata) and PostgreSQL:
 * the catalogs' fields match the files; malformed records are quarantined, counted, and block the
 * publish under the default threshold.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { parseListing, normalizeTime } from '../lib/sources/listing';
import { parseListingInThread } from '../lib/sources/listing-thread';
import { readListingBytes } from '../lib/sources/staged';
import { jobRowSchema, plainlyValid, validateRows } from '../lib/validate';
import type { ReadRow } from '../lib/sources/types';
import { projectRoot } from '../lib/paths';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import {
  privateTemporal,
  runCliProcess,
  spawnWorker,
  testDatabases,
  testEnv,
  uniqueQueue,
} from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';

const fixture = (name: string) => path.join(projectRoot(), 'test', 'fixtures', name);
const RESTIC_MANUAL = fixture('restic_doc_snapshots_json_manual_rest.json');
const BORG_VORTA = fixture('borg11_vorta_list_stdout.json');

/** A newer restic listing (short_id, summary) with the awkward corners, as restic writes it. */
const RESTIC_NEW = `[
  {"time":"2024-05-01T22:30:00.123456789+02:00","parent":"aa11","tree":"bb22","paths":["/srv/data","/etc"],"hostname":"web-1","username":"root","excludes":["*.tmp"],"program_version":"restic 0.17.3",
   "summary":{"backup_start":"2024-05-01T22:30:00.1234567+02:00","backup_end":"2024-05-01T23:10:05.9999999+02:00","files_new":3,"total_files_processed":9007199254740995,"total_bytes_processed":18446744073709551615,"data_added":1},
   "id":"1111111111111111111111111111111111111111111111111111111111111111","short_id":"11111111"},
  {"time":"2024-05-02T01:00:00Z","tree":"cc33","paths":["/home"],"hostname":"web-2","username":"alice","uid":1000,"gid":1000,"tags":["daily","home"],
   "summary":{"backup_start":"2024-05-02T01:00:00Z","backup_end":"2024-05-02T01:00:09.5Z","total_files_processed":12,"total_bytes_processed":9007199254740993},
   "id":"2222222222222222222222222222222222222222222222222222222222222222","short_id":"22222222"},
  {"time":"2024-05-02T01:00:00Z","tree":"cc33","paths":["/home"],"hostname":"web-2","username":"alice","uid":1000,"gid":1000,"original":"2222222222222222222222222222222222222222222222222222222222222222",
   "id":"3333333333333333333333333333333333333333333333333333333333333333","short_id":"33333333"},
  {"time":"2024-05-03T03:00:00-05:00","tree":"dd44","tags":["db-dump"],"hostname":"db-1",
   "id":"4444444444444444444444444444444444444444444444444444444444444444","short_id":"44444444"},
  {"time":"2024-05-03T03:00:00-05:00","tree":"dd44","tags":["db-dump"],"hostname":"db-1","program_version":"restic 0.17.3",
   "id":"4444444444444444444444444444444444444444444444444444444444444444","short_id":"44444444"}
]`;

/** A listing with malformed records among valid ones. */
const RESTIC_BAD = `[
  {"time":"2024-06-01T01:00:00Z","paths":["/a"],"hostname":"h1","id":"a1"},
  {"time":"2024-06-01T02:00:00Z","paths":["/a"],"hostname":"h1"},
  {"time":"2024-02-30T10:00:00Z","paths":["/a"],"hostname":"h1","id":"a3"},
  {"time":"2024-06-01T03:00:00Z","paths":["/a"],"hostname":"h1","id":"a4"},
  {"time":"2024-06-01T04:00:00Z","paths":["/a"],"hostname":"h1","id":"a5","summary":{"total_files_processed":1,"total_bytes_processed":-5}},
  {"time":"yesterday","paths":["/a"],"hostname":"h1","id":"a6"},
  {"time":"2024-06-02T01:00:00Z","paths":["/a"],"hostname":"h2","id":"a7"},
  {"time":"2024-06-02T02:00:00Z","paths":["/b"],"hostname":"h2","id":"a8"}
]`;

describe('listing parser (no services)', () => {
  test('the restic manual sample: ids, hosts, paths, times truncated to microseconds, uid kept', () => {
    const l = parseListing('restic-json', fs.readFileSync(RESTIC_MANUAL), { source: 's' });
    assert.equal(l.records.length, 2);
    assert.equal(l.duplicates, 0);
    const [a, b] = l.records;
    assert.equal(a.jobId, 'bbeed6d28159aa384d1ccc6fa0b540644b1b9599b162d2972acda86b1b80f89e');
    assert.equal(a.client, 'kasimir');
    assert.equal(a.jobName, '/home/work/doc');
    assert.equal(a.startText, '2017-03-11T09:57:43.266306+01:00');
    assert.equal(b.startText, '2017-03-11T09:58:57.541446+01:00', '938 ns are truncated, not rounded');
    assert.equal(a.timeKind, 'offset');
    assert.equal(JSON.parse(a.extra!).uid, '1000');
    assert.equal(a.rejectReason, null);
  });

  test('restic: counters beyond 2^53 stay exact; a missing uid is 0; copies are flagged; a repeated id keeps the last record', () => {
    const l = parseListing('restic-json', Buffer.from(RESTIC_NEW), { source: 's' });
    assert.equal(l.listed, 5);
    assert.equal(l.duplicates, 1);
    assert.equal(l.records.length, 4);
    const [first, second, copy, last] = l.records;
    assert.equal(first.bytes, '18446744073709551615');
    assert.equal(first.files, '9007199254740995');
    assert.equal(second.bytes, '9007199254740993');
    assert.equal(first.startText, '2024-05-01T22:30:00.123456+02:00', 'summary.backup_start, truncated');
    assert.equal(first.endText, '2024-05-01T23:10:05.999999+02:00');
    assert.equal(JSON.parse(first.extra!).uid, '0', 'restic omits uid 0');
    assert.equal(JSON.parse(copy.extra!).copy, true);
    assert.equal(JSON.parse(copy.extra!).original, second.jobId);
    assert.equal(copy.startText, '2024-05-02T01:00:00.000000Z', 'no summary: time');
    assert.equal(last.jobName, 'db-dump', 'no paths: the tags');
    assert.equal(
      JSON.parse(last.extra!).program_version,
      'restic 0.17.3',
      'the last listed record of a repeated id wins',
    );
  });

  test('restic: null and [] are empty; a --group-by listing is flattened; other shapes are refused', () => {
    assert.equal(parseListing('restic-json', Buffer.from('null'), { source: 's' }).records.length, 0);
    assert.equal(parseListing('restic-json', Buffer.from('[]\n'), { source: 's' }).records.length, 0);
    const flat = parseListing('restic-json', Buffer.from(RESTIC_NEW), { source: 's' });
    const grouped = JSON.stringify([
      { group_key: { hostname: 'web-1', paths: null, tags: null }, snapshots: [JSON.parse(RESTIC_NEW)[0]] },
      { group_key: { hostname: 'web-2', paths: null, tags: null }, snapshots: [] },
    ]).replace('18446744073709552000', '18446744073709551615');
    const g = parseListing(
      'restic-json',
      Buffer.from(`[{"group_key":{"hostname":"web-1"},"snapshots":${RESTIC_NEW}}]`),
      { source: 's' },
    );
    assert.equal(g.groups, 1);
    assert.deepEqual(g.records, flat.records);
    assert.equal(parseListing('restic-json', Buffer.from(grouped), { source: 's' }).groups, 2);
    assert.throws(
      () => parseListing('restic-json', Buffer.from('{"snapshots":[]}'), { source: 's' }),
      /SOURCE_DATA_INVALID|must be a JSON array/,
    );
    assert.throws(
      () => parseListing('restic-json', Buffer.from('[{"id":'), { source: 'fleet' }),
      /source fleet: the restic-json listing is not valid JSON/,
    );
    assert.throws(() => parseListing('borg-json', Buffer.from('[]'), { source: 's' }), /"archives" array/);
  });

  test('borg: the Vorta sample; .checkpoint archives are partial (status I), not dropped', () => {
    const doc = JSON.parse(fs.readFileSync(BORG_VORTA, 'utf8'));
    doc.archives.push({
      ...doc.archives[0],
      name: 'nyx2.local-2018-11-07T01:00:00.checkpoint',
      id: 'ff'.repeat(32),
      start: '2018-11-07T01:00:05.000000',
      time: '2018-11-07T01:00:05.000000',
    });
    const l = parseListing('borg-json', Buffer.from(JSON.stringify(doc)), { source: 's', client: 'nyx2.local' });
    assert.equal(l.records.length, 7);
    assert.deepEqual(
      l.records.map((r) => r.status),
      ['T', 'T', 'T', 'T', 'T', 'T', 'I'],
    );
    assert.equal(l.records[0].timeKind, 'naive');
    assert.equal(l.records[0].startText, '2018-11-04T23:19:15.000000');
    assert.equal(l.records[0].client, 'nyx2.local');
    assert.equal(l.records[0].job, 'nyx2.local-2018-11-04T23:19:04.864971');
  });

  test('malformed records carry reasons; the page validator quarantines them and keeps the rest', () => {
    const l = parseListing('restic-json', Buffer.from(RESTIC_BAD), { source: 's' });
    const reasons = l.records.map((r) => r.rejectReason);
    assert.equal(reasons.filter((r) => r === null).length, 4);
    assert.match(reasons[1]!, /^id: no snapshot id/);
    assert.match(reasons[2]!, /^time: is not a calendar date/);
    assert.match(reasons[4]!, /summary\.total_bytes_processed: must be a non-negative whole number/);
    assert.match(reasons[5]!, /^time: is not an RFC 3339 time/);
    assert.equal(JSON.parse(l.records[4].raw!).summary.total_bytes_processed, -5, 'raw record kept as listed');
    assert.deepEqual(normalizeTime('2024-13-01T00:00:00Z'), { error: 'is not a calendar date' });
    assert.deepEqual(normalizeTime('0000-01-01T00:00:00Z'), { error: 'is not a calendar date' });
    assert.deepEqual(normalizeTime('2024-02-29T23:59:59.1234567-03:30'), {
      text: '2024-02-29T23:59:59.123456-03:30',
      offset: true,
    });
    assert.deepEqual(normalizeTime('2024-06-01T24:00:00Z'), { error: 'is not a clock time' });
    // Rows as a database source reads them: negative bytes and a missing id are quarantined, an
    // unknown status is a warning, a repeated id keeps the last row read.
    const row = (id: string | null, over: Partial<ReadRow> = {}): ReadRow =>
      ({
        job_key: id ?? '9',
        job_id: id,
        job: 'j',
        job_name: 'n',
        client: null,
        type: 'B',
        level: 'F',
        status: 'T',
        sched_time: null,
        start_time: '2024-01-01T00:00:00.000000Z',
        end_time: null,
        real_end_time: null,
        files: '1',
        bytes: '2',
        read_bytes: null,
        job_errors: '0',
        pool: null,
        fileset: null,
        prior_job_id: null,
        job_tdate: null,
        vol_session_id: null,
        vol_session_time: null,
        comment: null,
        bucket: '2024-01-01',
        extra: null,
        ...over,
      }) as ReadRow;
    const v = validateRows([
      row('1'),
      row('2', { bytes: '-5' }),
      row(null),
      row('3', { status: 'X' }),
      row('4', { comment: 'first' }),
      row('4', { comment: 'second' }),
    ]);
    assert.deepEqual(
      v.valid.map((r) => [r.job_id, r.comment]),
      [
        ['1', null],
        ['3', null],
        ['4', 'second'],
      ],
    );
    assert.equal(v.duplicates, 1);
    assert.equal(v.warnings, 1);
    assert.deepEqual(
      v.rejects.map((r) => r.jobKey),
      ['2', '9'],
    );
    assert.match(v.rejects[0].reason, /^bytes: must be a non-negative whole number.*\("-5"\)/);
    assert.match(v.rejects[1].reason, /^job_id: no job id/);
    assert.equal(v.rejects[0].fingerprintRow, '2|T|\\N|1|-5');
  });
});

describe('listing edge cases (no services)', () => {
  const one = (snap: string) => parseListing('restic-json', Buffer.from(`[${snap}]`), { source: 's' }).records[0];
  test('fractional or exponent sizes, NUL characters, offsets PostgreSQL cannot hold, mixed naive/offset times and over-long ids are quarantined, never thrown', () => {
    for (const n of ['1.5', '1.0', '1e400', '0.0']) {
      assert.match(
        one(`{"id":"a","time":"2024-01-01T00:00:00Z","summary":{"total_bytes_processed":${n}}}`).rejectReason!,
        /total_bytes_processed: must be a non-negative whole number/,
        n,
      );
      assert.match(
        one(`{"id":"a","time":"2024-01-01T00:00:00Z","uid":${n}}`).rejectReason!,
        /uid: must be a non-negative whole number/,
        n,
      );
    }
    const nul = one('{"id":"a","time":"2024-01-01T00:00:00Z","hostname":"web\\u00001","paths":["/x"]}');
    assert.match(nul.rejectReason!, /^hostname: contains a NUL character/);
    assert.equal(nul.client, null, 'nothing with a NUL is staged');
    assert.ok(!nul.raw!.includes('\u0000') && nul.raw!.includes('\\u0000'), 'raw keeps the NUL escaped');
    assert.match(
      one('{"id":"a","time":"2024-01-01T00:00:00+20:00"}').rejectReason!,
      /time: has a UTC offset beyond ±15:59/,
    );
    assert.equal(one('{"id":"a","time":"2024-01-01T00:00:00+14:00"}').rejectReason, null);
    assert.match(
      one(
        '{"id":"a","time":"2024-01-01T00:00:00Z","summary":{"backup_start":"2024-01-01T00:00:00+05:00","backup_end":"2024-01-01T01:00:00"}}',
      ).rejectReason!,
      /summary\.backup_end: has no UTC offset while the start has one/,
    );
    const noEnd = one('{"id":"a","time":"2024-01-01T00:00:00Z","summary":{"backup_start":"2024-01-01T00:00:05Z"}}');
    assert.deepEqual(
      [noEnd.startText, noEnd.endText],
      ['2024-01-01T00:00:05.000000Z', null],
      'a summary without backup_end has no end time',
    );
    assert.match(one('{"id":5,"time":"2024-01-01T00:00:00Z"}').rejectReason!, /^id: must be a string, not a number/);
    assert.match(
      parseListing('borg-json', Buffer.from('{"archives":[{"id":"x","name":5,"start":"2024-01-01T00:00:00"}]}'), {
        source: 's',
      }).records[0].rejectReason!,
      /^name: must be a string, not a number/,
    );
    // A 10,000-character id passes the listing (it is a string) and is quarantined by the page (index key limit).
    const long = validateRows([
      {
        job_key: '1',
        job_id: 'x'.repeat(10_000),
        job: null,
        job_name: null,
        client: 'h',
        type: 'B',
        level: null,
        status: 'T',
        sched_time: null,
        start_time: null,
        end_time: null,
        real_end_time: null,
        files: null,
        bytes: null,
        read_bytes: null,
        job_errors: null,
        pool: null,
        fileset: null,
        prior_job_id: null,
        job_tdate: null,
        vol_session_id: null,
        vol_session_time: null,
        comment: null,
        bucket: null,
        extra: null,
      },
    ]);
    assert.equal(long.valid.length, 0);
    assert.match(long.rejects[0].reason, /^job_id: is longer than 1024 bytes \(an index key\) \("x{20,}…\)$/);
  });

  test('the fast row check never accepts a row the schema refuses (random rows, edge values)', () => {
    const values: Record<string, (string | null)[]> = {
      job_key: ['1', '0', '-1', '', '9223372036854775807', '99999999999999999999', 'x'],
      job_id: ['1', '', 'x'.repeat(341), 'x'.repeat(342), 'é'.repeat(400), null],
      client: [null, 'fd', 'é'.repeat(341), 'é'.repeat(600)],
      start_time: [null, '2024-01-01T00:00:00.000000Z', '2024-01-01T00:00:00Z', 'infinity', ''],
      files: [null, '0', '-1', '1.5', '9223372036854775807', '9223372036854775808', '999999999999999999'],
      bytes: [null, '0', '-5', '18446744073709551615', '123456789012345678901', '1e3'],
      job_errors: [null, '0', '-1', '2147483647', '2147483648', '-2147483648', '999999999'],
      job_tdate: [null, '1714558540', '-9223372036854775808', '9223372036854775808'],
      bucket: [null, '2024-01-01', 'infinity', '0001-12-31 BC'],
    };
    let seed = 7;
    const pick = <T>(xs: T[]): T => xs[(seed = (seed * 1103515245 + 12345) % 2147483648) % xs.length];
    let fast = 0;
    for (let i = 0; i < 20_000; i++) {
      const r: Record<string, string | null> = {
        job: null,
        job_name: null,
        type: 'B',
        level: null,
        status: 'T',
        sched_time: null,
        end_time: null,
        real_end_time: null,
        read_bytes: null,
        pool: null,
        fileset: null,
        prior_job_id: null,
        vol_session_id: null,
        vol_session_time: null,
        comment: null,
        extra: null,
      };
      for (const [k, xs] of Object.entries(values)) r[k] = pick(xs);
      if (plainlyValid(r as never)) {
        fast++;
        assert.ok(jobRowSchema.safeParse(r).success, `fast check accepted ${JSON.stringify(r).slice(0, 300)}`);
      }
    }
    assert.ok(fast > 100, `${fast} rows took the fast path`);
  });

  test('a later invalid record does not replace a valid one with the same id; the last valid record wins', () => {
    const l = parseListing(
      'restic-json',
      Buffer.from(
        '[{"id":"a","time":"2024-01-01T00:00:00Z","paths":["/first"]},{"id":"a","time":"bogus"},{"id":"b","time":"2024-01-01T00:00:00Z"},{"id":"b","time":"2024-01-02T00:00:00Z","paths":["/last"]}]',
      ),
      { source: 's' },
    );
    assert.deepEqual(
      l.records.map((r) => [r.jobId, r.jobName, r.rejectReason === null]),
      [
        ['a', '/first', true],
        ['a', null, false],
        ['b', '/last', true],
      ],
    );
    assert.equal(l.duplicates, 1);
  });

  test('listing bytes: a UTF-8 byte order mark is dropped; empty output, invalid UTF-8 and a broken element say so', () => {
    assert.equal(
      parseListing('restic-json', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), fs.readFileSync(RESTIC_MANUAL)]), {
        source: 's',
      }).records.length,
      2,
    );
    assert.throws(
      () => parseListing('restic-json', Buffer.from(''), { source: 's' }),
      /listing is empty \(0 bytes\); restic prints \[\] or null/,
    );
    assert.throws(
      () => parseListing('restic-json', Buffer.from([0x5b, 0xff, 0x5d]), { source: 's' }),
      /not valid UTF-8 \(byte 1\)/,
    );
    assert.throws(
      () => parseListing('restic-json', Buffer.from('[{"id":"a"},,{"id":"b"}]'), { source: 's' }),
      /not valid JSON \(element 2, at character 12\)/,
    );
    assert.throws(
      () => parseListing('restic-json', Buffer.from('[{"id":"a"}] trailing'), { source: 's' }),
      /Expected end of input/,
    );
    assert.match(one('3').rejectReason!, /^record: is not a JSON object/);
  });

  test('a listing command that ignores SIGTERM, or leaves a process behind, is killed with its whole process group at its timeout', async () => {
    const marker = `catalog-rebuild-test-${process.pid}-${Date.now()}`;
    for (const script of [`trap '' TERM; exec -a ${marker} sleep 300`, `(exec -a ${marker} sleep 300) & wait`]) {
      const started = Date.now();
      await assert.rejects(
        readListingBytes('fleet', { kind: 'restic-json', command: ['bash', '-c', script], commandTimeoutMs: 1500 }),
        /source fleet: listing command bash timed out after 1500 ms/,
      );
      assert.ok(Date.now() - started < 5_000, `gave up after ${Date.now() - started} ms`);
    }
    const gone = () => spawnSync('pgrep', ['-f', marker], { encoding: 'utf8' }).stdout.trim() === '';
    await waitFor('the command’s processes to exit', gone, { timeoutMs: 5_000 }).catch(() => undefined);
    const left = spawnSync('pgrep', ['-f', marker], { encoding: 'utf8' });
    assert.equal(left.stdout.trim(), '', 'no process of the command is left');
    const ok = await readListingBytes('fleet', {
      kind: 'restic-json',
      command: ['bash', '-c', `echo '[]'; (exec -a ${marker} sleep 300) &`],
    });
    assert.equal(ok.toString(), '[]\n');
    await waitFor('the left-behind process to exit', gone, { timeoutMs: 5_000 }).catch(() => undefined);
    assert.equal(
      spawnSync('pgrep', ['-f', marker], { encoding: 'utf8' }).stdout.trim(),
      '',
      'a process left behind by a finished command is killed',
    );
  });

  test('a listing too large for the parser heap fails with a clear error; the process survives', async () => {
    const parts: string[] = [];
    for (let i = 0; i < 60_000; i++)
      parts.push(
        `{"id":"${String(i).padStart(64, '0')}","time":"2024-05-01T22:30:00Z","paths":["/a/b/c/d"],"hostname":"h"}`,
      );
    const saved = process.env.CATALOG_REBUILD_LISTING_HEAP_MB;
    process.env.CATALOG_REBUILD_LISTING_HEAP_MB = '64';
    try {
      await assert.rejects(
        parseListingInThread('restic-json', Buffer.from(`[${parts.join(',')}]`), { source: 'big' }),
        /source big: the listing \(\d+ bytes\) does not fit the parser's 64 MB heap/,
      );
    } finally {
      if (saved === undefined) delete process.env.CATALOG_REBUILD_LISTING_HEAP_MB;
      else process.env.CATALOG_REBUILD_LISTING_HEAP_MB = saved;
    }
    const small = await parseListingInThread('restic-json', fs.readFileSync(RESTIC_MANUAL), { source: 's' }, true);
    assert.equal(small.records, 2);
    assert.equal(small.ids!.length, 2);
  });
});

describe('listing sources rebuilt on a real Temporal server and PostgreSQL', () => {
  let temporal: Awaited<ReturnType<typeof privateTemporal>>;
  let dbs: TestDatabases;
  let env: NodeJS.ProcessEnv;
  let worker: WorkerProcess | undefined;
  let dir: string;

  before(async () => {
    temporal = await privateTemporal();
    dbs = await testDatabases('listing');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-listings-'));
    const write = (name: string, text: string) => {
      const p = path.join(dir, name);
      fs.writeFileSync(p, text);
      return p;
    };
    const borg = JSON.parse(fs.readFileSync(BORG_VORTA, 'utf8'));
    borg.archives.push({
      ...borg.archives[0],
      name: 'nyx2.local-2018-11-07T01:00:00.checkpoint',
      archive: 'nyx2.local-2018-11-07T01:00:00.checkpoint',
      barchive: 'nyx2.local-2018-11-07T01:00:00.checkpoint',
      id: 'ff'.repeat(32),
      start: '2018-11-07T01:00:05.000000',
      time: '2018-11-07T01:00:05.000000',
    });
    const config = {
      catalogDatabaseUrl: dbs.catalogUrl,
      sources: {
        'restic-manual': { kind: 'restic-json', path: RESTIC_MANUAL },
        'restic-command': {
          kind: 'restic-json',
          command: [
            process.execPath,
            '-e',
            `process.stdout.write(require('fs').readFileSync(${JSON.stringify(RESTIC_MANUAL)}))`,
          ],
        },
        // The same listing, plus one snapshot from its second run on: a snapshot taken during the
        // rebuild, after the plan read the listing.
        'restic-growing': {
          kind: 'restic-json',
          command: [
            process.execPath,
            '-e',
            `const fs = require('fs');
             const mark = ${JSON.stringify(path.join(dir, 'growing.ran'))};
             const list = JSON.parse(fs.readFileSync(${JSON.stringify(RESTIC_MANUAL)}, 'utf8'));
             if (fs.existsSync(mark)) list.push({ ...list[0], id: 'ab'.repeat(32), short_id: 'abababab', time: '2017-03-12T08:00:00Z' });
             else fs.writeFileSync(mark, '');
             process.stdout.write(JSON.stringify(list));`,
          ],
        },
        // A relative path is resolved against the configuration file's folder, not the worker's working directory.
        'restic-new': {
          kind: 'restic-json',
          path: path.basename(write('new.json', RESTIC_NEW)),
          timezone: 'Europe/Berlin',
        },
        'restic-grouped': {
          kind: 'restic-json',
          path: write(
            'grouped.json',
            `[{"group_key":{"hostname":"x","paths":null,"tags":null},"snapshots":${RESTIC_NEW}}]`,
          ),
          timezone: 'Europe/Berlin',
        },
        'restic-empty': { kind: 'restic-json', path: write('empty.json', 'null\n') },
        'restic-bad': { kind: 'restic-json', path: write('bad.json', RESTIC_BAD) },
        'restic-bad-allowed': { kind: 'restic-json', path: write('bad2.json', RESTIC_BAD), maxRejects: 4 },
        'restic-missing': { kind: 'restic-json', path: path.join(dir, 'no-such-file.json') },
        'restic-failing': {
          kind: 'restic-json',
          command: [
            process.execPath,
            '-e',
            "process.stderr.write('Fatal: unable to open config file: <config/> does not exist\\n'); process.exit(1)",
            '--',
            '--password=s3cret',
          ],
        },
        borg: {
          kind: 'borg-json',
          path: write('borg.json', JSON.stringify(borg, null, 2)),
          timezone: 'Europe/Berlin',
          client: 'nyx2.local',
        },
      },
    };
    const configFile = write('config.json', JSON.stringify(config, null, 2));
    env = testEnv({
      address: temporal.address,
      configFile,
      taskQueue: uniqueQueue('listing'),
      extra: { TZ: 'Asia/Kolkata' },
    });
    worker = await spawnWorker(env);
  });

  after(async () => {
    worker?.kill();
    await temporal?.stop();
    await dbs?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const rebuild = (catalog: string, source: string, extra: string[] = []) =>
    runCliProcess(['start', '--catalog', catalog, '--source', source, '--page-size', '2', '--wait', ...extra], env);

  /** The published catalog, every field as text (times as UTC instants), in job id order. */
  async function activeRows(catalog: string): Promise<Record<string, string | null>[]> {
    const { rows } = await dbs.catalogPool.query(
      `SELECT job_id, job, job_name, client, type, level, status,
              to_char(start_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS start_time,
              to_char(end_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS end_time,
              files::text, bytes::text, bucket::text, extra
       FROM active_jobs WHERE catalog_name = $1 ORDER BY job_id`,
      [catalog],
    );
    return rows;
  }

  async function lastReport(catalog: string): Promise<Record<string, any>> {
    const { rows } = await dbs.catalogPool.query(
      `SELECT r.report FROM reconciliation r JOIN version v USING (version_id) WHERE v.catalog_name = $1 ORDER BY v.version_id DESC, r.round DESC LIMIT 1`,
      [catalog],
    );
    return rows[0].report;
  }

  test('the restic manual sample and the same listing from a command rebuild into catalogs that match the file', async () => {
    for (const [catalog, source] of [
      ['restic-manual', 'restic-manual'],
      ['restic-command', 'restic-command'],
    ]) {
      const r = rebuild(catalog, source);
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
      const rows = await activeRows(catalog);
      const file = JSON.parse(fs.readFileSync(RESTIC_MANUAL, 'utf8')) as {
        id: string;
        hostname: string;
        paths: string[];
        uid: number;
        gid: number;
        tree: string;
      }[];
      assert.equal(rows.length, file.length);
      const expectedStart = ['2017-03-11T08:57:43.266306Z', '2017-03-11T08:58:57.541446Z'];
      file.forEach((s, i) => {
        const row = rows.find((x) => x.job_id === s.id)!;
        assert.ok(row, `snapshot ${s.id} is in the catalog`);
        assert.equal(row.job, s.id);
        assert.equal(row.client, s.hostname);
        assert.equal(row.job_name, s.paths.join(', '));
        assert.equal(row.type, 'B');
        assert.equal(row.level, null);
        assert.equal(row.status, 'T');
        assert.equal(row.start_time, expectedStart[i]);
        assert.equal(row.end_time, expectedStart[i]);
        assert.equal(row.bucket, '2017-03-11');
        assert.equal(row.files, null);
        assert.deepEqual(row.extra, {
          time: JSON.parse(fs.readFileSync(RESTIC_MANUAL, 'utf8'))[i].time,
          tree: s.tree,
          paths: s.paths,
          copy: false,
          username: 'fd0',
          uid: String(s.uid),
          gid: String(s.gid),
        });
      });
    }
    const snap = await dbs.catalogPool.query<{ source_snapshot: string }>(
      `SELECT source_snapshot FROM version WHERE catalog_name = 'restic-manual' AND status = 'active'`,
    );
    const { createHash } = await import('node:crypto');
    assert.equal(
      snap.rows[0].source_snapshot,
      createHash('sha256').update(fs.readFileSync(RESTIC_MANUAL)).digest('hex'),
      'the content hash is the watermark',
    );
    const staged = await dbs.catalogPool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM staged_record s JOIN version v USING (version_id) WHERE v.status = 'active'`,
    );
    assert.equal(staged.rows[0].n, 0, 'staged listings are dropped once published');
  });

  test('a command listing is run again at reconciliation: a snapshot added during the rebuild is the reported delta', async () => {
    const r = rebuild('restic-growing', 'restic-growing');
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /reconciliation: ok: \d+ buckets, source 2 = catalog 2; delta after watermark 1;/);
    assert.equal((await activeRows('restic-growing')).length, 2, 'the new snapshot is for the next rebuild');
    assert.equal((await lastReport('restic-growing')).delta, 1);
    const again = rebuild('restic-growing', 'restic-growing');
    assert.equal(again.code, 0, `${again.stdout}\n${again.stderr}`);
    assert.match(again.stdout, /source 3 = catalog 3; delta after watermark 0;/, 'the next rebuild includes it');
  });

  test('restic: sizes beyond 2^53 exact, summary times, missing uid 0, copies flagged, a repeated id counted; grouped listing gives the same catalog', async () => {
    const r = rebuild('restic-new', 'restic-new');
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const rows = await activeRows('restic-new');
    assert.equal(rows.length, 4);
    const [a, b, c, d] = rows;
    assert.equal(a.bytes, '18446744073709551615');
    assert.equal(a.files, '9007199254740995');
    assert.equal(a.start_time, '2024-05-01T20:30:00.123456Z');
    assert.equal(a.end_time, '2024-05-01T21:10:05.999999Z');
    assert.equal(a.bucket, '2024-05-01', 'bucket: the date in the source zone (Europe/Berlin)');
    assert.equal(a.job_name, '/srv/data, /etc');
    assert.equal((a.extra as unknown as Record<string, unknown>).uid, '0');
    assert.equal(b.bytes, '9007199254740993');
    assert.equal(b.bucket, '2024-05-02', '01:00 UTC is 03:00 in Berlin');
    assert.equal((c.extra as unknown as Record<string, unknown>).copy, true);
    assert.equal((c.extra as unknown as Record<string, unknown>).original, b.job_id);
    assert.equal(d.start_time, '2024-05-03T08:00:00.000000Z');
    assert.equal(d.job_name, 'db-dump');
    const report = await lastReport('restic-new');
    assert.equal(report.ok, true);
    assert.equal(report.sourceRows, 4);
    assert.equal(report.duplicateRecords, 1, 'the repeated snapshot id is counted');
    assert.deepEqual(
      report.bytes,
      {
        source: (18446744073709551615n + 9007199254740993n).toString(),
        catalogPlusRejects: (18446744073709551615n + 9007199254740993n).toString(),
      },
      'byte totals exact',
    );
    const planned = await dbs.catalogPool.query<{ message: string }>(
      `SELECT message FROM event WHERE catalog_name = 'restic-new' AND kind = 'planned'`,
    );
    assert.match(planned.rows[0].message, /1 repeated ids dropped, the last listed kept/);
    // Sums of bytes computed in SQL stay exact.
    const sum = await dbs.catalogPool.query<{ s: string }>(
      `SELECT sum(bytes)::text AS s FROM active_jobs WHERE catalog_name = 'restic-new'`,
    );
    assert.equal(sum.rows[0].s, (18446744073709551615n + 9007199254740993n).toString());

    const g = rebuild('restic-grouped', 'restic-grouped');
    assert.equal(g.code, 0, `${g.stdout}\n${g.stderr}`);
    assert.deepEqual(await activeRows('restic-grouped'), rows);
  });

  test('an empty restic listing (null) publishes an empty catalog, not an error', async () => {
    const r = rebuild('restic-empty', 'restic-empty');
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /published; 0 pages, 0 rows, 0 rejects/);
    const v = await dbs.catalogPool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM active a JOIN version v USING (version_id) WHERE a.catalog_name = 'restic-empty' AND v.source_rows = 0`,
    );
    assert.equal(v.rows[0].n, 1);
  });

  test('borg: the Vorta sample plus a checkpoint in Europe/Berlin: names, ids, instants, partial status', async () => {
    const r = rebuild('borg', 'borg');
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const rows = await activeRows('borg');
    const doc = JSON.parse(fs.readFileSync(BORG_VORTA, 'utf8')) as {
      archives: { id: string; name: string; start: string; barchive: string }[];
    };
    assert.equal(rows.length, doc.archives.length + 1);
    for (const a of doc.archives) {
      const row = rows.find((x) => x.job_id === a.id)!;
      assert.ok(row, `archive ${a.name}`);
      assert.equal(row.job, a.name);
      assert.equal(row.job_name, a.name);
      assert.equal(row.client, 'nyx2.local');
      assert.equal(row.status, 'T');
      // November in Berlin is CET (UTC+1): the instant is one hour before the wall-clock time.
      const [, y, mo, d, h, mi, s] = /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)/.exec(a.start)!.map(Number);
      const utc = new Date(Date.UTC(y, mo - 1, d, h - 1, mi, s)).toISOString().replace('.000Z', '.000000Z');
      assert.equal(row.start_time, utc);
      assert.equal(row.bucket, a.start.slice(0, 10));
      assert.equal((row.extra as unknown as Record<string, unknown>).barchive, a.barchive);
    }
    const cp = rows.find((x) => x.job_id === 'ff'.repeat(32))!;
    assert.equal(cp.status, 'I', 'a checkpoint archive is a partial backup, kept');
    const report = await lastReport('borg');
    assert.deepEqual(
      { zone: report.dst.zone, nonexistent: report.dst.nonexistent, ambiguous: report.dst.ambiguous },
      { zone: 'Europe/Berlin', nonexistent: 0, ambiguous: 0 },
    );
  });

  test('malformed records are quarantined with reasons and counted; the rest commits; the default threshold blocks the publish', async () => {
    const r = rebuild('restic-bad', 'restic-bad');
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    const out = `${r.stdout}\n${r.stderr}`;
    assert.match(out, /4 source records of restic-bad are quarantined, more than the threshold of 0/);
    assert.match(out, /raise maxRejects/);
    const v = await dbs.catalogPool.query<{ version_id: string; status: string }>(
      `SELECT version_id::text, status FROM version WHERE catalog_name = 'restic-bad'`,
    );
    assert.equal(v.rows[0].status, 'failed');
    const vid = v.rows[0].version_id;
    const rejects = await dbs.catalogPool.query<{
      job_key: string;
      job_id: string | null;
      reason: string;
      raw: string;
      page_no: number;
    }>(`SELECT job_key::text, job_id, reason, raw, page_no FROM reject WHERE version_id = $1 ORDER BY job_key`, [vid]);
    assert.deepEqual(
      rejects.rows.map((x) => [x.job_key, x.job_id]),
      [
        ['2', null],
        ['3', 'a3'],
        ['5', 'a5'],
        ['6', 'a6'],
      ],
    );
    assert.match(rejects.rows[0].reason, /no snapshot id/);
    assert.match(rejects.rows[1].reason, /not a calendar date/);
    assert.match(rejects.rows[2].reason, /non-negative whole number/);
    assert.match(rejects.rows[3].reason, /not an RFC 3339 time/);
    assert.equal(JSON.parse(rejects.rows[2].raw).summary.total_bytes_processed, -5);
    assert.deepEqual(
      rejects.rows.map((x) => x.page_no),
      [1, 2, 3, 3],
    );
    // The ledger counts them per page; the valid records of the same pages committed.
    const ledger = await dbs.catalogPool.query<{ page_no: number; rows: number; rejects: number }>(
      `SELECT page_no, rows, rejects FROM page WHERE version_id = $1 ORDER BY page_no`,
      [vid],
    );
    assert.deepEqual(ledger.rows, [
      { page_no: 1, rows: 1, rejects: 1 },
      { page_no: 2, rows: 1, rejects: 1 },
      { page_no: 3, rows: 0, rejects: 2 },
      { page_no: 4, rows: 2, rejects: 0 },
    ]);
    const jobs = await dbs.catalogPool.query<{ ids: string }>(
      `SELECT string_agg(job_id, ',' ORDER BY job_key) AS ids FROM job WHERE version_id = $1`,
      [vid],
    );
    assert.equal(jobs.rows[0].ids, 'a1,a4,a7,a8');
    // Reconciliation: source = catalog + rejects; progress counts the rejects.
    const report = await lastReport('restic-bad');
    assert.equal(report.sourceRows, 8);
    assert.equal(report.catalogRows, 4);
    assert.equal(report.rejects, 4);
    assert.equal(report.sourceEqualsCatalogPlusRejects, true);
    assert.deepEqual(report.mismatched, []);
    assert.equal(report.ok, false);
    const status = runCliProcess(['status', '--catalog', 'restic-bad', '--json'], env);
    const p = JSON.parse(status.stdout);
    assert.equal(p.rejects, 4);
    assert.equal(p.phase, 'failed');
    const active = await dbs.catalogPool.query(`SELECT 1 FROM active WHERE catalog_name = 'restic-bad'`);
    assert.equal(active.rowCount, 0, 'nothing published');

    // A threshold that allows them publishes the valid records.
    const ok = rebuild('restic-bad-allowed', 'restic-bad-allowed');
    assert.equal(ok.code, 0, `${ok.stdout}\n${ok.stderr}`);
    assert.match(ok.stdout, /4 rejects/);
    assert.deepEqual(
      (await activeRows('restic-bad-allowed')).map((x) => x.job_id),
      ['a1', 'a4', 'a7', 'a8'],
    );
  });

  test('an unreadable listing or a failing command fails that rebuild with a message naming it; the worker keeps serving', async () => {
    const r = rebuild('restic-missing', 'restic-missing');
    assert.equal(r.code, 1);
    assert.match(
      `${r.stdout}\n${r.stderr}`,
      /source restic-missing: cannot read the listing file .*no-such-file\.json/,
    );
    const f = rebuild('restic-failing', 'restic-failing');
    assert.equal(f.code, 1);
    assert.match(
      `${f.stdout}\n${f.stderr}`,
      /source restic-failing: listing command .*node exited with status 1: Fatal: unable to open config file/,
    );
    assert.doesNotMatch(`${f.stdout}\n${f.stderr}`, /s3cret/, 'command arguments are not echoed');
    const failed = await dbs.catalogPool.query(
      `SELECT 1 FROM version WHERE catalog_name IN ('restic-missing', 'restic-failing')`,
    );
    assert.equal(failed.rowCount, 0, 'no version is planned from an unreadable listing');
    const again = rebuild('restic-manual', 'restic-manual');
    assert.equal(again.code, 0, `${again.stdout}\n${again.stderr}`);
  });
});
