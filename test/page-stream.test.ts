/**
 * The streaming page path against real PostgreSQL (the real activities in MockActivityEnvironment):
 * a director catalog in a `SQL_ASCII` database holding Latin-1 bytes keeps every job, its text
 * decoded and reconciled; a value the catalog refuses is quarantined alone (per-row fallback); a
 * record failing the source-side checks is quarantined with the same wording as the Node checks;
 * and a retry ends a frozen earlier attempt's transaction after the heartbeat timeout.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from 'pg';
import type { Activities } from '../activities';
import { decodedValueCounts } from '../lib/catalog';
import type { ActivityFixture } from '../dev/harness/activity-env';
import { activityFixture, runActivity } from '../dev/harness/activity-env';
import type { CopyPageResult, PlanResult, ReconcileSummary } from '../workflows/definitions';

const JOBS = 5_000;
/** legacyEncoding of the next source opened (sources are opened once per name). */
let encoding: 'LATIN1' | 'WIN1252' = 'LATIN1';
let fixture: ActivityFixture;
let acts: Activities;

/** Bytes as a SQL_ASCII text literal expression. */
const bytes = (hex: string): string => `convert_from('\\x${hex}'::bytea, 'SQL_ASCII')`;

before(async () => {
  fixture = await activityFixture('stream', {
    jobs: JOBS,
    seed: 11,
    sqlAscii: true,
    // Source `win1252` reads text that is not UTF-8 as WIN1252; every other name as LATIN1.
    source: (dbs) => ({ kind: 'bareos', databaseUrl: dbs.sourceUrl, legacyEncoding: encoding }),
  });
  acts = fixture.acts;
  const src = fixture.dbs.sourcePool;
  // 'Müller-fd' in Latin-1 (0xfc), five comments holding 0xe9 ('é'), one comment in valid UTF-8.
  await src.query(`UPDATE client SET name = ${bytes('4dfc6c6c65722d6664')} WHERE clientid = 1`);
  await src.query(
    `UPDATE job SET comment = 'caf' || ${bytes('e9')} WHERE jobid IN (SELECT jobid FROM job ORDER BY jobid LIMIT 5)`,
  );
  await src.query(`UPDATE job SET comment = ${bytes('6e61c3af7665e29c93')} WHERE jobid = (SELECT max(jobid) FROM job)`);
});

after(async () => {
  await fixture?.close();
});

async function plan(catalog: string): Promise<PlanResult> {
  return runActivity(acts.planRebuild, {
    catalog,
    source: 'director',
    pageSize: 1000,
    workflowId: `catalog-rebuild/${catalog}`,
    firstRunId: 'run1',
  });
}

function copy(catalog: string, versionId: string, pageNo: number, attempt = 1, heartbeatTimeoutMs = 2_000) {
  return runActivity(
    acts.copyPage as (i: Parameters<Activities['copyPage']>[0]) => Promise<CopyPageResult>,
    { catalog, source: 'director', versionId, pageNo },
    { attempt, heartbeatTimeoutMs },
  );
}

async function partitionOf(versionId: string): Promise<string> {
  const r = await fixture.dbs.catalogPool.query<{ t: string }>(
    `SELECT partition_table AS t FROM version WHERE version_id = $1`,
    [versionId],
  );
  return r.rows[0].t;
}

test('SQL_ASCII source with Latin-1 bytes: every job kept, text decoded (valid UTF-8 unchanged), reconciliation passes', async () => {
  const planned = await plan('latin');
  assert.equal(planned.pagesTotal, 5);
  let rows = 0;
  for (let p = 1; p <= planned.pagesTotal; p++) rows += (await copy('latin', planned.versionId, p)).rows;
  assert.equal(rows, JOBS);
  const table = await partitionOf(planned.versionId);
  const cat = fixture.dbs.catalogPool;
  const count = async (sql: string) => (await cat.query<{ n: number }>(sql)).rows[0].n;
  const client1Jobs = (
    await fixture.dbs.sourcePool.query<{ n: number }>(`SELECT count(*)::int AS n FROM job WHERE clientid = 1`)
  ).rows[0].n;
  assert.ok(client1Jobs > 0);
  assert.equal(await count(`SELECT count(*)::int AS n FROM "${table}" WHERE client = 'Müller-fd'`), client1Jobs);
  assert.equal(await count(`SELECT count(*)::int AS n FROM "${table}" WHERE comment = 'café'`), 5);
  assert.equal(await count(`SELECT count(*)::int AS n FROM "${table}" WHERE comment = 'naïve✓'`), 1);
  // The ledger counts the values decoded per column (valid UTF-8 is not counted).
  assert.deepEqual(await decodedValueCounts(cat, planned.versionId), { client: client1Jobs, comment: 5 });
  const summary = await runActivity(acts.reconcile as (i: unknown) => Promise<ReconcileSummary>, {
    catalog: 'latin',
    source: 'director',
    versionId: planned.versionId,
    round: 1,
    sampleSize: JOBS,
  });
  assert.equal(summary.ok, true, JSON.stringify(summary));
  assert.equal(summary.sampleMismatches, 0);
  assert.equal(summary.catalogRows, JOBS);
  const report = await fixture.dbs.catalogPool.query<{ d: Record<string, number> }>(
    `SELECT report->'decodedValues' AS d FROM reconciliation WHERE version_id = $1 AND round = 1`,
    [planned.versionId],
  );
  assert.deepEqual(
    report.rows[0].d,
    { client: client1Jobs, comment: 5 },
    'the report counts decoded values per column',
  );
});

test('a value the catalog refuses is quarantined alone; a record failing the source checks is quarantined with its reason', async () => {
  const src = fixture.dbs.sourcePool;
  const ids = (await src.query<{ id: string }>(`SELECT jobid::text AS id FROM job ORDER BY jobid LIMIT 1000`)).rows;
  const poison = ids[500].id;
  const negative = ids[700].id;
  await src.query(`UPDATE job SET comment = 'poison' WHERE jobid = $1`, [poison]);
  await src.query(`UPDATE job SET jobfiles = -1 WHERE jobid = $1`, [negative]);
  try {
    const planned = await plan('poison');
    const table = await partitionOf(planned.versionId);
    const cat = fixture.dbs.catalogPool;
    // Division by zero (SQLSTATE 22012, a data error) for exactly one row.
    await cat.query(
      `ALTER TABLE "${table}" ADD CONSTRAINT poison CHECK (1 / (CASE WHEN comment = 'poison' THEN 0 ELSE 1 END) = 1)`,
    );
    const r = await copy('poison', planned.versionId, 1);
    assert.equal(r.rows, 998);
    assert.equal(r.rejects, 2);
    const rejects = await cat.query<{ job_key: string; reason: string; raw: string }>(
      `SELECT job_key::text, reason, raw FROM reject WHERE version_id = $1 ORDER BY job_key`,
      [planned.versionId],
    );
    assert.deepEqual(
      rejects.rows.map((x) => x.job_key),
      [poison, negative],
    );
    assert.match(rejects.rows[0].reason, /database error 22012/);
    assert.match(rejects.rows[0].raw, /"comment":"poison"/);
    assert.equal(rejects.rows[1].reason, 'files: must be a non-negative whole number ("-1")');
    const written = await cat.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`);
    assert.equal(written.rows[0].n, 998);
    const quarantinedInCatalog = await cat.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "${table}" WHERE job_key IN ($1, $2)`,
      [poison, negative],
    );
    assert.equal(quarantinedInCatalog.rows[0].n, 0);
  } finally {
    await src.query(`UPDATE job SET comment = NULL WHERE jobid = $1`, [poison]);
    await src.query(`UPDATE job SET jobfiles = 0 WHERE jobid = $1`, [negative]);
  }
});

test('a retry ends the transaction of a frozen earlier attempt after the heartbeat timeout, then commits the page', async () => {
  const planned = await plan('zombie');
  const cat = fixture.dbs.catalogPool;
  const page = (
    await cat.query<{ first_key: string; last_key: string }>(
      `SELECT first_key::text, last_key::text FROM plan_page WHERE version_id = $1 AND page_no = 1`,
      [planned.versionId],
    )
  ).rows[0];
  // The frozen attempt: its page transaction holds the uncommitted ledger row of page 1.
  const zombie = new Client({ connectionString: fixture.dbs.catalogUrl, application_name: 'catalog-rebuild:worker:1' });
  await zombie.connect();
  const zombieError = new Promise<Error>((resolve) => zombie.on('error', resolve));
  await zombie.query('BEGIN');
  await zombie.query(`SELECT set_config('application_name', $1, true)`, [
    `catalog-rebuild:worker:1:page:${planned.versionId}:1`,
  ]);
  await zombie.query(
    `INSERT INTO page (version_id, page_no, first_key, last_key, attempt, worker_identity) VALUES ($1, 1, $2, $3, 1, 'frozen@host')`,
    [planned.versionId, page.first_key, page.last_key],
  );
  const started = Date.now();
  const r = await copy('zombie', planned.versionId, 1, 2, 1_500);
  const took = Date.now() - started;
  assert.equal(r.alreadyCommitted, false);
  assert.equal(r.rows, 1000);
  assert.ok(took >= 1_400, `waited for the heartbeat timeout first (${took} ms)`);
  assert.match((await zombieError).message, /terminat/);
  const ledger = await cat.query<{ attempt: number; worker_identity: string }>(
    `SELECT attempt, worker_identity FROM page WHERE version_id = $1 AND page_no = 1 AND committed_at IS NOT NULL`,
    [planned.versionId],
  );
  assert.deepEqual(ledger.rows, [{ attempt: 2, worker_identity: 'test@host' }]);
  const ended = await cat.query<{ message: string }>(
    `SELECT message FROM event WHERE version_id = $1 AND kind = 'zombie_ended'`,
    [planned.versionId],
  );
  assert.equal(ended.rows.length, 1);
  await zombie.end().catch(() => undefined);
});

test('seal proves every planned page has its ledger row: a page whose ledger row was deleted is named, copied again (its rows exist: upserted), then sealed', async () => {
  const planned = await plan('seal');
  for (let p = 1; p <= planned.pagesTotal; p++) await copy('seal', planned.versionId, p);
  const cat = fixture.dbs.catalogPool;
  const table = await partitionOf(planned.versionId);
  const before = await cat.query<{ n: number; x: string }>(
    `SELECT count(*)::int AS n, sum(hashtext(t::text))::text AS x FROM "${table}" t`,
  );
  await cat.query(`DELETE FROM page WHERE version_id = $1 AND page_no = 2`, [planned.versionId]);
  const seal = () =>
    runActivity(acts.sealVersion as (i: unknown) => Promise<{ missingPages: number[] }>, {
      versionId: planned.versionId,
    });
  assert.deepEqual(await seal(), { missingPages: [2] });
  const status = async () =>
    (await cat.query<{ s: string }>(`SELECT status AS s FROM version WHERE version_id = $1`, [planned.versionId]))
      .rows[0].s;
  assert.equal(await status(), 'building');
  // The page is copied again as attempt 1: its COPY meets existing keys (23505) and upserts instead.
  const again = await copy('seal', planned.versionId, 2);
  assert.equal(again.rows, 1000);
  assert.deepEqual(await seal(), { missingPages: [] });
  assert.equal(await status(), 'verifying');
  const after = await cat.query<{ n: number; x: string }>(
    `SELECT count(*)::int AS n, sum(hashtext(t::text))::text AS x FROM "${table}" t`,
  );
  assert.deepEqual(after.rows[0], before.rows[0], 'same rows, same content');
});

test('WIN1252 leaves 0x81 undefined: the job holding it is quarantined alone with its bytes escaped; the page commits', async () => {
  const src = fixture.dbs.sourcePool;
  const ids = (await src.query<{ id: string }>(`SELECT jobid::text AS id FROM job ORDER BY jobid LIMIT 1000`)).rows;
  const bad = ids[300].id;
  await src.query(`UPDATE job SET comment = 'w-' || ${bytes('81')} WHERE jobid = $1`, [bad]);
  encoding = 'WIN1252';
  try {
    const planned = await runActivity(acts.planRebuild, {
      catalog: 'win',
      source: 'win1252',
      pageSize: 1000,
      workflowId: 'catalog-rebuild/win',
      firstRunId: 'run1',
    });
    const r = await runActivity(
      acts.copyPage as (i: Parameters<Activities['copyPage']>[0]) => Promise<CopyPageResult>,
      { catalog: 'win', source: 'win1252', versionId: planned.versionId, pageNo: 1 },
    );
    assert.equal(r.rows, 999);
    assert.equal(r.rejects, 1);
    const rej = await fixture.dbs.catalogPool.query<{ job_key: string; reason: string; raw: string }>(
      `SELECT job_key::text, reason, raw FROM reject WHERE version_id = $1`,
      [planned.versionId],
    );
    assert.equal(rej.rows[0].job_key, bad);
    assert.match(rej.rows[0].reason, /neither UTF-8 nor WIN1252: .*0x81.*SQLSTATE 22P05/);
    assert.match(rej.rows[0].raw, /"comment" : "w-\\\\201"|"comment":"w-\\\\201"/);
  } finally {
    encoding = 'LATIN1';
    await src.query(`UPDATE job SET comment = NULL WHERE jobid = $1`, [bad]);
  }
});
