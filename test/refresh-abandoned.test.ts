/**
 * A refresh cancelled after some of its pages committed (real worker processes, a private Temporal
 * dev server, PostgreSQL). Its pages marked rows of the active version's segments as superseded by
 * it (`superseded_by`): the active version must still show them, and the next start must give them
 * back (`releaseSuperseded`, when it drops the abandoned version) before it plans, or the next
 * refresh, which shares those segments, would lose those of jobs it finds unchanged (here: edits
 * undone after the cancel).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pool } from 'pg';
import { cancelSignal } from '../workflows/definitions';
import { waitForResult } from '../client/index';
import { rebuildFixture, startAndWait } from '../dev/harness/fixture';
import { privateTemporal } from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';
import { viewDifference } from '../dev/harness/views';
import { changeDirectorSource } from '../dev/harness/director-changes';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
before(async () => {
  temporal = await privateTemporal();
});
after(async () => {
  await temporal?.stop();
});

const start = startAndWait;

/** The active version of `catalog`, and what `active_jobs` shows of it: rows and an md5 of them in key order. */
async function activeJobs(pool: Pool, catalog: string) {
  const { rows } = await pool.query<{ v: string; n: number; md5: string }>(
    `SELECT (SELECT version_id::text FROM active WHERE catalog_name = $1) AS v, count(*)::int AS n,
            md5(string_agg(j::text, E'\\n' ORDER BY j.job_id)) AS md5
     FROM active_jobs j WHERE j.catalog_name = $1`,
    [catalog],
  );
  return rows[0];
}

/** Rows of any version's table marked superseded by `versionId`. */
async function supersededBy(pool: Pool, versionId: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM job WHERE superseded_by = $1`, [
    versionId,
  ]);
  return rows[0].n;
}

test('a refresh cancelled after some of its pages committed: the active version is untouched, and the next refresh gives back what it superseded and equals a full rebuild', async (t) => {
  const fx = await rebuildFixture(t, { address: temporal.address, tag: 'refreshab', jobs: 5000, seed: 53 });
  const pool = fx.dbs.catalogPool;
  await fx.spawn();
  const base = await start(fx, fx.catalog, []);
  assert.equal(base.code, 0, base.text);
  const before = await activeJobs(pool, fx.catalog);
  await changeDirectorSource(fx.dbs.sourcePool);
  // Half the jobs' comments edited: more changed jobs than one refresh page takes (2,000 keys).
  const src = fx.dbs.sourcePool;
  await src.query(`CREATE TABLE saved_comment AS SELECT jobid, comment FROM job WHERE jobid % 2 = 0`);
  await src.query(`UPDATE job SET comment = 'edited' WHERE jobid % 2 = 0`);

  // One page at a time with a pause between them, so the cancel lands after a committed page.
  const handle = await fx.start({ refresh: true, concurrency: 1, pauseBetweenPagesMs: 3000 });
  const p = await waitFor('a refresh page committed', async () => {
    const q = await fx.progress(handle);
    return q.pagesDone >= 1 && q;
  });
  assert.ok(p.pagesTotal > p.pagesDone, `pages left to copy (${p.pagesDone} of ${p.pagesTotal})`);
  await handle.signal(cancelSignal, { reason: 'test: cancel a refresh mid-copy' });
  const r = await waitForResult(handle);
  assert.equal(r.cancelled, true);
  assert.ok(r.refresh, 'it was a refresh');
  const abandoned = r.versionId;
  const status = await pool.query<{ status: string }>(`SELECT status FROM version WHERE version_id = $1`, [abandoned]);
  assert.equal(status.rows[0].status, 'abandoned');
  const marked = await supersededBy(pool, abandoned);
  assert.ok(marked > 0, `its committed pages superseded rows of the active version's segments (${marked})`);
  assert.deepEqual(await activeJobs(pool, fx.catalog), before, 'the active version shows what it showed before');
  // The edits undone before the next refresh: those jobs are unchanged since the active version, so
  // the next refresh does not touch them, and their rows must count for it again.
  await src.query(`UPDATE job j SET comment = s.comment FROM saved_comment s WHERE j.jobid = s.jobid`);

  const next = await start(fx, fx.catalog, ['--refresh']);
  assert.equal(next.code, 0, next.text);
  assert.match(next.text, /refresh of version/, 'the next start is a refresh, not a full rebuild');
  assert.equal(await supersededBy(pool, abandoned), 0, 'the abandoned refresh gave its rows back');
  const after = await activeJobs(pool, fx.catalog);
  assert.notEqual(after.v, before.v, 'a new version is active');

  const full = `${fx.catalog}-f`;
  const f = await start(fx, full, []);
  assert.equal(f.code, 0, f.text);
  const d = await viewDifference(pool, 'active_jobs', fx.catalog, full);
  assert.deepEqual({ onlyA: d.onlyA, onlyB: d.onlyB }, { onlyA: 0, onlyB: 0 }, 'nothing lost or doubled');
});
