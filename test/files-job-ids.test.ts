/**
 * `files --job` names a job of the active version: a listing source's (restic, borg: hex ids)
 * unique prefix of at least 8 hex digits, such as the short id `restic snapshots` shows, lists that
 * job's files; an ambiguous prefix is a usage error (exit 2) naming the matches; a director's job
 * ids match exactly (`12` is not a prefix of `120`); a job not in the active version exits 1 naming
 * it. Runs the CLI against a migrated catalog database holding one published version of a restic
 * catalog and one of a director catalog, each with file records.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { runCliProcess, testDatabases, writeConfig } from '../dev/harness/harness';
import { createFilePartition, createVersionPartition } from '../lib/catalog';

let dbs: TestDatabases;
let env: NodeJS.ProcessEnv;

const SNAP = '84813b7e' + '0123456789abcdef'.repeat(3) + '01234567';
const TWIN_A = 'abcdef01' + '1'.repeat(56);
const TWIN_B = 'abcdef01' + '2'.repeat(56);

/** Publishes a version of `catalog` holding `jobs` (job id → file names of its files). */
async function publish(catalog: string, jobs: Record<string, string[]>): Promise<void> {
  const { rows } = await dbs.catalogPool.query<{ id: string }>(
    `INSERT INTO version (catalog_name, source_name, status, workflow_id, first_run_id, page_size, published_at, files)
     VALUES ($1, 'src', 'active', 'catalog-rebuild/' || $1, $1, 100, now(), true) RETURNING version_id::text AS id`,
    [catalog],
  );
  const v = rows[0].id;
  await dbs.catalogPool.query(`UPDATE version SET segment_ids = ARRAY[version_id] WHERE version_id = $1`, [v]);
  await createVersionPartition(dbs.catalogPool, v);
  await createFilePartition(dbs.catalogPool, v);
  let key = 0;
  let fileId = 0;
  for (const [jobId, names] of Object.entries(jobs)) {
    key += 1;
    await dbs.catalogPool.query(
      `INSERT INTO job (version_id, job_key, job_id, page_no, start_time) VALUES ($1, $2, $3, 1, '2026-12-01T00:00:00Z')`,
      [v, key, jobId],
    );
    for (const name of names) {
      fileId += 1;
      await dbs.catalogPool.query(
        `INSERT INTO file (version_id, page_no, job_key, job_id, file_id, path, name, file_index, delta_seq, size)
         VALUES ($1, 1, $2, $3, $4, '/etc/', $5, $6, 0, 10)`,
        [v, key, jobId, fileId, name, fileId],
      );
    }
  }
  await dbs.catalogPool.query(`INSERT INTO active (catalog_name, version_id) VALUES ($1, $2)`, [catalog, v]);
}

const files = (catalog: string, job: string) =>
  runCliProcess(['files', '--catalog', catalog, '--job', job], env, 60_000);

before(async () => {
  dbs = await testDatabases('jobids');
  env = { ...process.env, CATALOG_REBUILD_CONFIG: writeConfig(dbs), CATALOG_DATABASE_URL: '' };
  await publish('fleet', { [SNAP]: ['hosts', 'passwd'], [TWIN_A]: ['a'], [TWIN_B]: ['b'] });
  await publish('director', { '12': ['twelve'], '120': ['one-twenty'], '1200': ['x'] });
});

after(async () => {
  await dbs?.drop();
});

test('files --job: a unique 8+ hex prefix of a listing job id, exact director ids, ambiguous and unknown jobs refused', () => {
  const full = files('fleet', SNAP);
  assert.equal(full.code, 0, full.stderr);
  assert.deepEqual(
    full.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split('  ').slice(0, 3).join('  ')),
    [`${SNAP}  2026-12-01T00:00:00.000000Z  /etc/hosts`, `${SNAP}  2026-12-01T00:00:00.000000Z  /etc/passwd`],
  );
  for (const prefix of ['84813b7e', SNAP.slice(0, 20)]) {
    const short = files('fleet', prefix);
    assert.equal(short.code, 0, short.stderr);
    assert.equal(short.stdout, full.stdout, `prefix ${prefix} lists the snapshot's files`);
  }

  const ambiguous = files('fleet', 'abcdef01');
  assert.equal(ambiguous.code, 2, ambiguous.stdout);
  assert.equal(ambiguous.stdout, '');
  assert.match(
    ambiguous.stderr,
    new RegExp(
      `--job abcdef01 is ambiguous: it starts 2 job ids of the active version \\d+ of catalog fleet: ${TWIN_A}, ${TWIN_B}; give more digits`,
    ),
  );
  const unique = files('fleet', TWIN_B.slice(0, 9));
  assert.equal(unique.code, 0, unique.stderr);
  assert.match(unique.stdout, new RegExp(`^${TWIN_B} .*/etc/b`));

  const tooShort = files('fleet', '84813b7');
  assert.equal(tooShort.code, 1);
  assert.match(
    tooShort.stderr,
    /job 84813b7 is not in the active version \d+ of catalog fleet \(a snapshot or archive id prefix needs at least 8 hex digits\)/,
  );
  const unknown = files('fleet', 'deadbeefdead');
  assert.equal(unknown.code, 1);
  assert.match(
    unknown.stderr,
    /^catalog-rebuild: job deadbeefdead is not in the active version \d+ of catalog fleet$/m,
  );

  const twelve = files('director', '12');
  assert.equal(twelve.code, 0, twelve.stderr);
  assert.deepEqual(
    twelve.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split('  ')[2]),
    ['/etc/twelve'],
    '12 is not a prefix of 120',
  );
  const notThere = files('director', '12000000');
  assert.equal(notThere.code, 1, 'an 8-digit number is a director job id, never a prefix');
  assert.match(notThere.stderr, /job 12000000 is not in the active version \d+ of catalog director$/m);
});
