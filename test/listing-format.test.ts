/**
 * Listing formats (lib/sources/listing-formats/): the registry's kinds are the configuration's, an
 * unknown kind is refused by name, and a third format is one file plus its registration: the
 * Proxmox-Backup-Server-like format of dev/fixtures/pbs-listing-format.ts, registered in this
 * thread, is read by the shared machinery (job listing, file lines, files command). In-process:
 * no Temporal, no database (the files command runs `sh`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { sourceSchema } from '../lib/config';
import { ConfigError } from '../lib/errors';
import type { ListedJob, StagedListingRecord } from '../lib/sources/file-listing';
import { LISTING_STAGE_COLUMNS, listingRecord } from '../lib/sources/file-listing';
import type { CommandJob } from '../lib/sources/files-command';
import { commandArgv, listedCopyText } from '../lib/sources/files-command';
import { parseListing } from '../lib/sources/listing';
import { LISTING_KINDS, listingFormat, listingKinds, registerListingFormat } from '../lib/sources/listing-formats';
import { borgFormat } from '../lib/sources/listing-formats/borg';
import { resticFormat } from '../lib/sources/listing-formats/restic';
import { PBS_KIND, pbsFormat } from '../dev/fixtures/pbs-listing-format';

type Rec = Record<(typeof LISTING_STAGE_COLUMNS)[number], string | null>;
const asRec = (r: StagedListingRecord): Rec =>
  Object.fromEntries(LISTING_STAGE_COLUMNS.map((c, i) => [c, r[i]])) as Rec;

const KIND_MESSAGE =
  'kind must be one of "bareos", "bacula" (director catalog databases), "restic-json", "borg-json" (listings)';

test('the registry: restic and borg are the configuration’s listing kinds; an unknown kind is refused naming the known ones', () => {
  assert.deepEqual(LISTING_KINDS, ['restic-json', 'borg-json']);
  assert.equal(listingFormat('restic-json'), resticFormat);
  assert.equal(listingFormat('borg-json'), borgFormat);
  assert.deepEqual(
    [resticFormat, borgFormat].map((f) => [f.noun, f.fileListingHeader?.name ?? null]),
    [
      ['snapshot', 'snapshot line'],
      ['archive', null],
    ],
  );
  const unknown = (e: unknown) =>
    e instanceof ConfigError &&
    e.code === 'CONFIG_INVALID' &&
    e.message === 'unknown listing kind "pbs-json": the listing formats are "restic-json", "borg-json"';
  assert.throws(() => listingFormat(PBS_KIND), unknown);
  assert.throws(() => parseListing(PBS_KIND, Buffer.from('[]'), { source: 's' }), unknown);
  // The configuration's kinds are the built-in formats' (the message as before).
  const cfg = sourceSchema.safeParse({ kind: PBS_KIND, path: '/x.json' });
  assert.equal(cfg.success, false);
  assert.deepEqual(
    cfg.error?.issues.map((i) => i.message),
    [KIND_MESSAGE],
  );
  assert.equal(sourceSchema.safeParse({ kind: 'borg-json', path: '/x.json' }).success, true);
});

test('a third format is one file plus its registration; it cannot replace a registered kind', () => {
  registerListingFormat(pbsFormat);
  assert.equal(listingFormat(PBS_KIND), pbsFormat);
  assert.deepEqual(listingKinds(), ['restic-json', 'borg-json', PBS_KIND]);
  assert.throws(() => registerListingFormat({ ...resticFormat }), /listing kind "restic-json" is registered already/);
  assert.throws(
    () => listingFormat('tar-json'),
    /^ConfigError: unknown listing kind "tar-json": the listing formats are "restic-json", "borg-json", "pbs-json"$/,
  );
  // Registering in this thread does not make it a configuration kind (a product format is listed in BUILT_IN).
  assert.equal(sourceSchema.safeParse({ kind: PBS_KIND, path: '/x.json' }).success, false);
});

const SNAPSHOTS = `[
  {"backup-type": "host", "backup-id": "web1", "backup-time": 1700000000, "size": 10, "owner": "root@pam", "comment": "nightly"},
  {"backup-type": "vm", "backup-id": "101", "backup-time": 1700086400, "size": 123456789012345678, "owner": "backup@pbs", "protected": true},
  {"backup-type": "host", "backup-id": "web1", "backup-time": 1700000000, "size": 7},
  {"backup-type": "host", "backup-time": 1700172800},
  {"backup-type": "ct", "backup-id": "x", "backup-time": -1}
]`;

test('the third format’s job listing parses to staged records: ids, names, instants, exact sizes; repeats and bad records as for restic', () => {
  const l = parseListing(PBS_KIND, Buffer.from(SNAPSHOTS), { source: 'pbs' });
  assert.equal(l.listed, 5);
  assert.equal(l.duplicates, 1, 'the repeated snapshot: the last one listed is kept');
  assert.equal(l.groups, 0);
  const [vm, web, noId, negative] = l.records;
  assert.deepEqual(vm, {
    jobId: 'vm/101/2023-11-15T22:13:20Z',
    job: 'vm/101/2023-11-15T22:13:20Z',
    jobName: 'vm/101',
    client: '101',
    type: 'B',
    level: null,
    status: 'T',
    timeKind: 'offset',
    startText: '2023-11-15T22:13:20.000000Z',
    endText: null,
    files: null,
    bytes: '123456789012345678',
    comment: null,
    extra: '{"backup-type":"vm","owner":"backup@pbs","protected":true}',
    rejectReason: null,
    raw: null,
  });
  assert.deepEqual(
    [web.jobId, web.bytes, web.comment, web.extra],
    ['host/web1/2023-11-14T22:13:20Z', '7', null, '{"backup-type":"host"}'],
  );
  assert.deepEqual(
    [noId.jobId, noId.rejectReason, noId.raw],
    [null, 'backup-id: no backup id', '{"backup-type":"host","backup-time":1700172800}'],
  );
  assert.equal(negative.rejectReason, 'backup-time: must be a non-negative whole number');
  // The shared messages, with the format's kind and hint.
  assert.throws(
    () => parseListing(PBS_KIND, Buffer.from(' \n'), { source: 'pbs' }),
    /^SourceDataInvalidError: source pbs: the pbs-json listing is empty \(2 bytes\); the datastore lists \[\] when it holds no snapshots$/,
  );
  assert.throws(
    () => parseListing(PBS_KIND, Buffer.from('{"snapshots": []}'), { source: 'pbs' }),
    /^SourceDataInvalidError: source pbs: a pbs-json listing must be a JSON array of snapshots$/,
  );
  assert.throws(
    () => parseListing(PBS_KIND, Buffer.from('[{"backup-id": }]'), { source: 'pbs' }),
    /source pbs: the pbs-json listing is not valid JSON \(element 1, at character 1\)/,
  );
  assert.equal(parseListing(PBS_KIND, Buffer.from('[]'), { source: 'pbs' }).records.length, 0);
});

const FILE_LINES = [
  '{"type": "d", "path": "/etc", "mode": 493, "uid": 0, "gid": 0, "mtime": 1700000000}',
  '{"type": "f", "path": "/etc/hosts", "size": 1099511627776, "mode": 420, "uid": 0, "gid": 4000000000, "mtime": 1700000001}',
  '{"type": "l", "path": "/etc/localtime", "mode": 511, "mtime": 0}',
  '{"type": "x", "path": "/dev/odd", "mtime": 1700000002}',
  '{"type": "f", "path": "/big", "size": 18446744073709551616, "mode": 420}',
];

test('the third format’s file lines map to stage records: mode, size, mtime, the path split into directory and name', () => {
  const job: ListedJob = { jobKey: '4', jobId: 'host/web1/2023-11-14T22:13:20Z', bucket: '2023-11-14' };
  const recs = FILE_LINES.map((line, i) => asRec(listingRecord(pbsFormat, job, i + 1, line)));
  const pick = (r: Rec) => [r.path, r.name, r.mode, r.size, r.uid, r.gid, r.mtime, r.problem];
  assert.deepEqual(recs.map(pick), [
    ['/etc/', '', String(0o40755), null, '0', '0', '2023-11-14T22:13:20.000000Z', null],
    ['/etc/', 'hosts', String(0o100644), '1099511627776', '0', '4000000000', '2023-11-14T22:13:21.000000Z', null],
    ['/etc/', 'localtime', String(0o120777), null, null, null, '1970-01-01T00:00:00.000000Z', null],
    ['/dev/', 'odd', null, null, null, null, null, 'type: unknown entry type "x"'],
    [
      '/',
      'big',
      String(0o100644),
      '18446744073709551616',
      null,
      null,
      null,
      'size: exceeds 64 bits (18446744073709551616)',
    ],
  ]);
  assert.deepEqual(
    recs.map((r) => [r.job_key, r.job_id, r.bucket, r.file_id, r.file_index]),
    FILE_LINES.map((_, i) => [
      '4',
      job.jobId,
      '2023-11-14',
      String(4n * 10_000_000_000n + BigInt(i + 1)),
      String(i + 1),
    ]),
  );
  assert.equal(recs[3].raw, FILE_LINES[3], 'a quarantined line keeps the line as listed');
});

test('the third format’s files command: its placeholder values, its noun, a snapshot gone from the datastore', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-pbs-'));
  try {
    const listing = path.join(dir, 'files.jsonl');
    fs.writeFileSync(listing, `${FILE_LINES.join('\n')}\n`);
    const staged = [
      { key: '1', id: 'host/web1/2023-11-14T22:13:20Z', job: 'host/web1/2023-11-14T22:13:20Z' },
      { key: '2', id: 'vm/101/2023-11-15T22:13:20Z', job: 'vm/101/2023-11-15T22:13:20Z' },
    ];
    const jobs: CommandJob[] = staged.map((s) => ({
      jobKey: s.key,
      jobId: s.id,
      bucket: null,
      ...pbsFormat.commandValues({ id: s.id, job: s.job, extra: null }),
    }));
    const settings = {
      source: 'pbs',
      kind: PBS_KIND,
      argv: [
        'sh',
        '-c',
        'case "$0" in host/*) cat "$1";; *) echo "Error: snapshot $0 does not exist" >&2; exit 255;; esac',
        '{id}',
        listing,
      ],
      timeoutMs: 10_000,
    };
    assert.deepEqual(commandArgv(settings, jobs[1]).slice(3), ['vm/101/2023-11-15T22:13:20Z', listing]);
    const gone: { jobKey: string; reason: string; message: string }[] = [];
    let text = '';
    for await (const b of listedCopyText(settings, jobs, (j, message) =>
      gone.push({ jobKey: j.jobKey, reason: j.reason, message }),
    ))
      text += b.toString('utf8');
    assert.equal(text.split('\n').filter(Boolean).length, FILE_LINES.length);
    assert.deepEqual(gone, [
      {
        jobKey: '2',
        reason:
          'the snapshot is no longer in the repository: Error: snapshot vm/101/2023-11-15T22:13:20Z does not exist',
        message:
          'source pbs: files command sh for snapshot vm/101/2023-11-15T22:13:20Z: the snapshot is no longer in the repository (pruned or deleted after the plan?): Error: snapshot vm/101/2023-11-15T22:13:20Z does not exist; start a new rebuild to plan without it',
      },
    ]);
    // A kind no format has fails the command's stream before anything runs.
    const unknown = listedCopyText({ ...settings, kind: 'tar-json' }, jobs, () => undefined);
    await assert.rejects(unknown.next(), /unknown listing kind "tar-json"/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
