/**
 * `start --files` on restic and borg listing sources, on a private Temporal dev server with a real
 * worker and PostgreSQL: each snapshot's or archive's files come from the source's `filesCommand`
 * (here `cat` of the real listings in test/fixtures/file-listings, one file per id or archive),
 * run inside the page. `active_files` equals the listings field by field, the reconciliation's
 * source side equals its catalog side, a bad record is quarantined alone, and a snapshot pruned
 * after the plan is left out of the published version and reported as gone from the source.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
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

const FIXTURES = path.join(projectRoot(), 'test', 'fixtures', 'file-listings');
const fixture = (name: string) => fs.readFileSync(path.join(FIXTURES, name), 'utf8');
const RESTIC = ['0.14', '0.18', '0.19'];

/** One listed record as the test reads the fixture itself: JSON.parse, the path split by hand. */
interface Listed {
  path: string;
  name: string;
  size: string | null;
  uid: string;
  gid: string;
  mtimeUtc: string | null;
  position: number;
}

/** UTC microsecond text of an RFC 3339 time with an offset (restic's nanoseconds truncated). */
function utcMicros(t: string): string {
  const m = /^(.*T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/.exec(t)!;
  const base = new Date(`${m[1]}${m[3]}`).toISOString().slice(0, 19);
  return `${base}.${(m[2] ?? '').slice(0, 6).padEnd(6, '0')}Z`;
}

function resticListed(text: string): Listed[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .slice(1)
    .map((l, i) => {
      const n = JSON.parse(l.replace(/"size":(\d{16,})/, '"size":"$1"')) as Record<string, unknown>;
      const p = n.path as string;
      const dir = n.type === 'dir';
      return {
        path: dir ? `${p}/` : p.slice(0, p.lastIndexOf('/') + 1),
        name: dir ? '' : p.slice(p.lastIndexOf('/') + 1),
        size: n.size === undefined ? null : String(n.size),
        uid: String(n.uid),
        gid: String(n.gid),
        mtimeUtc: utcMicros(n.mtime as string),
        position: i + 1,
      };
    });
}

describe('file records of restic and borg listings rebuilt on a real Temporal server and PostgreSQL', () => {
  let temporal: Awaited<ReturnType<typeof privateTemporal>>;
  let dbs: TestDatabases;
  let env: NodeJS.ProcessEnv;
  let worker: WorkerProcess | undefined;
  let dir: string;
  const ids: string[] = [];

  before(async () => {
    temporal = await privateTemporal();
    dbs = await testDatabases('flisting');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-file-listings-'));
    const write = (name: string, text: string) => {
      const p = path.join(dir, name);
      fs.mkdirSync(path.dirname(p), { recursive: true });
      fs.writeFileSync(p, text);
      return p;
    };
    // One fleet listing of the three restic repositories' snapshots; each snapshot's files by id.
    const snapshots = RESTIC.flatMap((v) => JSON.parse(fixture(`restic-${v}-snapshots.json`)) as { id: string }[]);
    RESTIC.forEach((v, i) => {
      ids.push(snapshots[i].id);
      write(`restic/${snapshots[i].id}.jsonl`, fixture(`restic-${v}-ls.jsonl`));
    });
    // A fourth snapshot: restic 0.18's listing and one record written for this test, whose name holds a NUL.
    const bad = { ...snapshots[1], id: 'f'.repeat(64), short_id: 'ffffffff', time: '2026-12-02T01:00:00Z' };
    delete (bad as { summary?: unknown }).summary;
    write(
      `restic/${bad.id}.jsonl`,
      `${fixture('restic-0.18-ls.jsonl').replace(snapshots[1].id, bad.id)}{"name":"a\\u0000b","type":"file","path":"/tmp/a\\u0000b","uid":0,"gid":0,"size":1,"mode":420,"mtime":"2026-12-01T00:00:00Z","message_type":"node","struct_type":"node"}\n`,
    );
    const pruned = { ...snapshots[0], id: 'e'.repeat(64), short_id: 'eeeeeeee' };
    const cat = (sub: string, placeholder: string) => ['sh', '-c', `exec cat "${dir}/${sub}/$0.jsonl"`, placeholder];
    // borg: one archive per repository, named alike.
    write('borg12/fixture-host-2026-12-01.jsonl', fixture('borg-1.2-files.jsonl'));
    write('borg2/fixture-host-2026-12-01.jsonl', fixture('borg-2-files.jsonl'));
    const config = {
      catalogDatabaseUrl: dbs.catalogUrl,
      sources: {
        'restic-fleet': {
          kind: 'restic-json',
          path: write('restic-snapshots.json', JSON.stringify([...snapshots, bad])),
          filesCommand: cat('restic', '{id}'),
        },
        'restic-pruned': {
          kind: 'restic-json',
          path: write('restic-pruned.json', JSON.stringify([snapshots[0], pruned])),
          // restic 0.18's answer for a snapshot that is gone, else the listing.
          filesCommand: [
            'sh',
            '-c',
            `if [ -f "${dir}/restic/$0.jsonl" ]; then exec cat "${dir}/restic/$0.jsonl"; fi; echo '{"message_type":"exit_error","code":1,"message":"no matching ID found for prefix \\"'$0'\\""}' >&2; exit 1`,
            '{id}',
          ],
        },
        'restic-no-files': { kind: 'restic-json', path: write('plain.json', JSON.stringify(snapshots)) },
        'borg-12': {
          kind: 'borg-json',
          path: path.join(FIXTURES, 'borg-1.2-list.json'),
          timezone: 'Europe/Berlin',
          client: 'fixture-host',
          filesCommand: cat('borg12', '{archive}'),
        },
        'borg-2': {
          kind: 'borg-json',
          path: path.join(FIXTURES, 'borg-2-list.json'),
          client: 'fixture-host',
          filesCommand: cat('borg2', '{archive}'),
        },
      },
    };
    env = testEnv({
      address: temporal.address,
      configFile: write('config.json', JSON.stringify(config, null, 2)),
      taskQueue: uniqueQueue('flisting'),
    });
    worker = await spawnWorker(env);
  });

  after(async () => {
    worker?.kill();
    await temporal?.stop();
    await dbs?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const rebuild = (catalog: string, source: string) =>
    runCliProcess(['start', '--catalog', catalog, '--source', source, '--files', '--wait'], env);

  async function files(catalog: string, jobId: string): Promise<Record<string, string | null>[]> {
    const { rows } = await dbs.catalogPool.query(
      `SELECT file_id::text, path, name, encode(path_bytes, 'hex') AS path_bytes, encode(name_bytes, 'hex') AS name_bytes,
              file_index::text, delta_seq::text, deleted::text, size::text, mode::text, uid::text, gid::text,
              to_char(mtime AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS mtime, md5, lstat
       FROM active_files f WHERE catalog_name = $1 AND job_id = $2 ORDER BY f.file_index`,
      [catalog, jobId],
    );
    return rows;
  }

  test('restic 0.14, 0.18 and 0.19 snapshots: active_files equals each listing field by field; a record with a NUL is quarantined alone', async () => {
    const r = rebuild('rf', 'restic-fleet');
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /file records: source 81 = catalog 80 \+ 1 quarantined;/);
    for (const [i, id] of ids.entries()) {
      const expected = resticListed(fixture(`restic-${RESTIC[i]}-ls.jsonl`));
      const got = await files('rf', id);
      assert.equal(got.length, expected.length, `snapshot ${id}`);
      got.forEach((g, k) => {
        const e = expected[k];
        assert.deepEqual(
          [g.path, g.name, g.size, g.uid, g.gid, g.mtime, g.file_index, g.delta_seq, g.deleted, g.md5, g.lstat],
          [e.path, e.name, e.size, e.uid, e.gid, e.mtimeUtc, String(e.position), '0', 'false', null, null],
          `restic ${RESTIC[i]} record ${k + 1}`,
        );
      });
      const mode = (p: string) => got.find((g) => `${g.path}${g.name}` === p)?.mode;
      assert.equal(mode('/tmp/fx/src/data/docs/readme.txt'), String(0o100644));
      assert.equal(mode('/tmp/fx/src/data/setuid'), String(0o104755));
      assert.equal(mode('/tmp/fx/src/data/sticky/'), String(0o41777));
      assert.equal(mode('/tmp/fx/src/data/chardev'), String(0o20644));
    }
    const withBad = await files('rf', 'f'.repeat(64));
    assert.equal(withBad.length, 20, 'the job of the bad record keeps its other files');
    const rejects = await dbs.catalogPool.query<{ reason: string; raw: string; record_key: string }>(
      `SELECT r.reason, r.raw, r.record_key::text FROM reject r JOIN version v USING (version_id)
       WHERE v.catalog_name = 'rf' AND v.status = 'active' AND r.record_key IS NOT NULL`,
    );
    assert.equal(rejects.rows.length, 1);
    assert.match(rejects.rows[0].reason, /name: contains a NUL character/);
    assert.match(rejects.rows[0].raw, /"path":"\/tmp\/a\\u0000b"/);
    const report = await dbs.catalogPool.query<{ report: { files: Record<string, unknown> } }>(
      `SELECT r.report FROM reconciliation r JOIN version v USING (version_id) WHERE v.catalog_name = 'rf'
       ORDER BY r.round DESC LIMIT 1`,
    );
    const f = report.rows[0].report.files;
    assert.deepEqual([f.source, f.catalog, f.rejects, f.mismatchedBuckets], [81, 80, 1, []]);
  });

  test('borg 1.2 (naive mtimes in the source zone) and borg 2 (offsets, exact bytes of a Latin-1 name): active_files equals each listing', async () => {
    for (const [catalog, source, file] of [
      ['b12', 'borg-12', 'borg-1.2-files.jsonl'],
      ['b2', 'borg-2', 'borg-2-files.jsonl'],
    ] as const) {
      const r = rebuild(catalog, source);
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
      const listed = fixture(file)
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l) as { path: string; size: number; uid: number; mtime: string; type: string });
      const archiveId = (
        JSON.parse(fixture(file.replace('files.jsonl', 'list.json'))) as { archives: { id: string }[] }
      ).archives[0].id;
      const got = await files(catalog, archiveId);
      assert.equal(got.length, listed.length);
      got.forEach((g, k) => {
        const e = listed[k];
        const dirEntry = e.type === 'd';
        assert.equal(`${g.path}${g.name ?? ''}`.replace(/\/$/, ''), e.path.replace('?', catalog === 'b2' ? 'ü' : '?'));
        assert.equal(g.name === '', dirEntry);
        assert.equal(g.size, String(e.size));
        assert.equal(g.uid, String(e.uid));
        // borg 1.2 writes the host's wall-clock time: read in the source's zone (Europe/Berlin, UTC+1 in December).
        const naive = e.mtime.slice(0, 26);
        const utc =
          catalog === 'b12'
            ? new Date(Date.parse(`${naive.slice(0, 19)}+01:00`)).toISOString().slice(0, 19)
            : naive.slice(0, 19);
        assert.equal(g.mtime, `${utc}.${naive.slice(20, 26)}Z`);
      });
      const muller = got.find((g) => (g.name ?? '').includes('ller'))!;
      if (catalog === 'b2') {
        assert.deepEqual(
          [muller.name, muller.name_bytes],
          ['Müller.txt', Buffer.from('M\xfcller.txt', 'latin1').toString('hex')],
        );
      } else {
        assert.deepEqual([muller.name, muller.name_bytes], ['M?ller.txt', null]);
      }
      assert.equal(got.find((g) => g.path === 'data/sticky/')?.mode, String(0o41777));
      assert.equal(got.find((g) => g.name === 'setuid')?.mode, String(0o104755));
    }
  });

  test('a snapshot pruned after the plan is left out of the version, counted and reported as gone from the source; the rebuild is published', async () => {
    const r = rebuild('rp', 'restic-pruned');
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(
      r.stdout,
      /reconciliation: ok: \d+ buckets, source 1 = catalog 1; file records: source 20 = catalog 20; delta after watermark 0, 1 job gone from the source after the plan;/,
    );
    const attempts = await dbs.catalogPool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM page_attempt a JOIN version v USING (version_id) WHERE v.catalog_name = 'rp'`,
    );
    const pages = await dbs.catalogPool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM plan_page p JOIN version v USING (version_id) WHERE v.catalog_name = 'rp'`,
    );
    assert.equal(attempts.rows[0].n, pages.rows[0].n, 'one attempt per page: no retry');
    const gone = await dbs.catalogPool.query<{ job_id: string; reason: string }>(
      `SELECT g.job_id, g.reason FROM gone_job g JOIN version v USING (version_id) WHERE v.catalog_name = 'rp'`,
    );
    assert.deepEqual(
      gone.rows.map((g) => g.job_id),
      ['e'.repeat(64)],
    );
    assert.match(
      gone.rows[0].reason,
      /^the snapshot is no longer in the repository: .*no matching ID found for prefix/,
    );
    const jobs = await dbs.catalogPool.query<{ job_id: string }>(
      `SELECT job_id FROM active_jobs WHERE catalog_name = 'rp'`,
    );
    assert.deepEqual(
      jobs.rows.map((j) => j.job_id),
      [ids[0]],
    );
    const events = await dbs.catalogPool.query<{ kind: string; message: string }>(
      `SELECT kind, message FROM event WHERE catalog_name = 'rp' AND kind IN ('gone', 'published') ORDER BY event_id`,
    );
    assert.deepEqual(
      events.rows.map((e) => e.kind),
      ['gone', 'published'],
    );
    assert.match(
      events.rows[1].message,
      /; 1 job gone from the source after the plan, left out \(a follow-up delta\)$/,
    );
  });

  test('--files on a listing source without filesCommand fails at plan; start reports the failure at once, saying what is needed', () => {
    const r = rebuild('rn', 'restic-no-files');
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(`${r.stdout}\n${r.stderr}`, /a restic or borg listing source with a filesCommand/);
    // start sees the rebuild close while it waits for the plan: the failure, not "not planned within 30 s".
    assert.doesNotMatch(r.stdout, /not planned within/);
  });

  test('start --refresh (and --dry-run) on a listing source: a full rebuild without an active version, then up to date; the dry run changes nothing', async () => {
    const versions = async () =>
      (await dbs.catalogPool.query(`SELECT 1 FROM version WHERE catalog_name = 'lr'`)).rowCount;
    const dry = runCliProcess(
      ['start', '--catalog', 'lr', '--source', 'borg-12', '--files', '--refresh', '--dry-run', '--json'],
      env,
    );
    assert.equal(dry.code, 0, dry.stderr);
    const plan = JSON.parse(dry.stdout) as {
      dryRun: boolean;
      refresh: boolean;
      fullRebuildBecause: string;
      jobs: { new: number };
    };
    assert.equal(plan.dryRun, true);
    assert.equal(plan.refresh, false);
    assert.match(plan.fullRebuildBecause, /the catalog has no active version/);
    assert.ok(plan.jobs.new > 0, 'every job is new');
    assert.equal(await versions(), 0, 'the dry run made no version');
    for (let i = 0; i < 2; i++) {
      const r = runCliProcess(
        ['start', '--catalog', 'lr', '--source', 'borg-12', '--files', '--refresh', '--wait'],
        env,
      );
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
      assert.match(
        r.stdout,
        i === 0
          ? /refresh ran as a full rebuild: the catalog has no active version/
          : /refresh: up to date: nothing changed in the source since version \d+, which stays active/,
      );
    }
    assert.equal(await versions(), 1, 'the listing did not change: no second version');
  });
});
