/**
 * A refresh builds on the active version only while the source is read as it was read then (real
 * worker processes, a private Temporal dev server, PostgreSQL): a worker whose configuration now
 * reads the source in another time zone, or decodes its non-UTF-8 text from another legacy
 * encoding, would otherwise keep old rows written under the old reading beside new rows written
 * under the new one. `start --refresh` (here its dry run, then the refresh itself) says why it is a
 * full rebuild instead, and the refresh's result equals the source read the new way.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { rebuildFixture, serverTimezone } from '../dev/harness/fixture';
import type { RebuildFixture } from '../dev/harness/fixture';
import { privateTemporal, runCliAsync, writeConfig } from '../dev/harness/harness';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
before(async () => {
  temporal = await privateTemporal();
});
after(async () => {
  await temporal?.stop();
});

/** `start --refresh --dry-run --json` of the fixture's catalog under configuration `configFile`: exit code, plan, stderr. */
async function dryRefresh(fx: RebuildFixture, configFile: string) {
  const r = await runCliAsync(
    ['start', '--catalog', fx.catalog, '--source', 'director', '--refresh', '--dry-run', '--json'],
    { ...fx.env, CATALOG_REBUILD_CONFIG: configFile },
  );
  const plan = r.code === 0 ? (JSON.parse(r.stdout) as { refresh: boolean; fullRebuildBecause?: string }) : null;
  return { code: r.code, plan, stderr: r.stderr };
}

/** Spawns a worker reading configuration `configFile`, runs `fn`, then stops that worker. */
async function withWorkerConfig<T>(fx: RebuildFixture, configFile: string, fn: () => Promise<T>): Promise<T> {
  const w = await fx.spawn({ CATALOG_REBUILD_CONFIG: configFile });
  try {
    return await fn();
  } finally {
    fx.fleet.kill(w);
    await w.exited;
  }
}

test('a refresh after the source time zone or legacyEncoding changed is a full rebuild and says why', async (t) => {
  const fx = await rebuildFixture(t, { address: temporal.address, tag: 'refreshset', jobs: 400, seed: 59 });
  const zone = await serverTimezone(fx.dbs.sourcePool);
  const other = zone === 'Europe/Berlin' ? 'America/New_York' : 'Europe/Berlin';
  const config = (extra: Record<string, unknown>) =>
    writeConfig({ catalogUrl: fx.dbs.catalogUrl, sourceUrl: fx.dbs.sourceUrl }, extra);
  const first = await fx.spawn();
  const full = await runCliAsync(['start', '--catalog', fx.catalog, '--source', 'director', '--wait'], fx.env, {
    timeoutMs: 240_000,
  });
  assert.equal(full.code, 0, full.stderr);
  fx.fleet.kill(first);
  await first.exited;

  // The same settings: a refresh (nothing changed).
  const same = config({});
  const unchanged = await withWorkerConfig(fx, same, () => dryRefresh(fx, same));
  assert.equal(unchanged.code, 0, unchanged.stderr);
  assert.deepEqual([unchanged.plan?.refresh, unchanged.plan?.fullRebuildBecause], [true, undefined]);

  // A zone the director's own epoch column contradicts is refused (G14); the refusal names the zones that fit.
  const wrong = config({ timezone: other });
  const refused = await withWorkerConfig(fx, wrong, () => dryRefresh(fx, wrong));
  assert.equal(refused.code, 1);
  const fits = [
    ...(/director's zone, e\.g\. (.*?) \(\d+ zones fit\)/.exec(refused.stderr)?.[1] ?? '').matchAll(/"([^"]+)"/g),
  ].map((m) => m[1]);
  // Another zone that fits, named otherwise: the naive times of every job would be read in it.
  const fit = fits.find((z) => z !== zone);
  assert.ok(fit, `another zone that fits the director's times: ${refused.stderr}`);
  const zoned = config({ timezone: fit });
  const byZone = await withWorkerConfig(fx, zoned, () => dryRefresh(fx, zoned));
  assert.equal(byZone.code, 0, byZone.stderr);
  assert.deepEqual(
    [byZone.plan?.refresh, byZone.plan?.fullRebuildBecause],
    [false, `the time zone changed (${zone} → ${fit})`],
  );

  // Another legacy encoding: text that is not UTF-8 would be decoded otherwise.
  const encoded = config({ legacyEncoding: 'WIN1252' });
  const w = await fx.spawn({ CATALOG_REBUILD_CONFIG: encoded });
  const byEncoding = await dryRefresh(fx, encoded);
  assert.equal(byEncoding.code, 0, byEncoding.stderr);
  assert.deepEqual(
    [byEncoding.plan?.refresh, byEncoding.plan?.fullRebuildBecause],
    [false, 'legacyEncoding changed (LATIN1 → WIN1252)'],
  );
  // The refresh itself: a full rebuild that says why, published.
  const r = await runCliAsync(
    ['start', '--catalog', fx.catalog, '--source', 'director', '--refresh', '--wait'],
    { ...fx.env, CATALOG_REBUILD_CONFIG: encoded },
    { timeoutMs: 240_000 },
  );
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /refresh planned as a full rebuild: legacyEncoding changed \(LATIN1 → WIN1252\)/);
  const v = await fx.dbs.catalogPool.query<{ base: string | null; legacy: string | null }>(
    `SELECT base_version_id::text AS base, legacy_encoding AS legacy FROM version v
     JOIN active a ON a.version_id = v.version_id WHERE a.catalog_name = $1`,
    [fx.catalog],
  );
  assert.deepEqual(v.rows, [{ base: null, legacy: 'WIN1252' }], 'a full version, recorded with its encoding');
  fx.fleet.kill(w);
});
