/**
 * How a director's zone is named to `AT TIME ZONE` (lib/sources/zone-operand.ts): a name of UTC
 * becomes the fixed offset `INTERVAL '+00:00'`, which PostgreSQL applies without a zone lookup.
 * Proved against PostgreSQL itself: every such name converts every instant as the offset does, and
 * the row hashes a page stores are the same as with the zone's name (so `ROW_MAPPING_VERSION` holds).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { generateBareosSource } from '../dev/bareos-generator';
import { BAREOS_FROM_JOB, bareosRowHash, UTF8_MODE } from '../lib/sources/bareos-columns';
import { UTC_OFFSET, UTC_ZONE_NAMES, zoneOperand } from '../lib/sources/zone-operand';

let dbs: TestDatabases;

before(async () => {
  dbs = await testDatabases('zoneop');
  await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 300, seed: 11 });
});

after(async () => {
  await dbs?.drop();
});

/** Naive times from 1850 to 2150 every 7 days and 7 hours, the bounds the pages accept, infinities, NULL. */
const TIMES_SQL = `SELECT t FROM generate_series(timestamp '1850-01-01 00:00:00.000001', timestamp '2150-01-01', interval '7 days 7 hours') t
  UNION ALL SELECT unnest(ARRAY['0001-01-02 00:00:01', '9999-12-29 23:59:59.999999', 'infinity', '-infinity', NULL]::timestamp[])`;

test('every name of UTC converts every instant as the fixed offset does, both ways', async () => {
  assert.equal(UTC_ZONE_NAMES.size, 18);
  for (const name of UTC_ZONE_NAMES) {
    const { rows } = await dbs.sourcePool.query<{ n: string; differ: string; known: boolean }>(
      `SELECT count(*)::text AS n,
              count(*) FILTER (WHERE t AT TIME ZONE $1 IS DISTINCT FROM t AT TIME ZONE ${UTC_OFFSET}
                               OR (t AT TIME ZONE $1) AT TIME ZONE $1 IS DISTINCT FROM (t AT TIME ZONE $1) AT TIME ZONE ${UTC_OFFSET}
                               OR (t AT TIME ZONE $1) AT TIME ZONE 'UTC' IS DISTINCT FROM (t AT TIME ZONE $1) AT TIME ZONE ${UTC_OFFSET})::text AS differ,
              EXISTS (SELECT 1 FROM pg_timezone_names WHERE lower(name) = $1) AS known
       FROM (${TIMES_SQL}) s`,
      [name],
    );
    assert.ok(Number(rows[0].n) > 15_000, name);
    assert.equal(rows[0].differ, '0', `${name}: instants converted otherwise than by the offset`);
    assert.ok(rows[0].known, `${name} is a zone of PostgreSQL's zone database`);
  }
});

test('names of UTC become the offset whatever their case; any other name is quoted', () => {
  for (const name of ['UTC', 'Etc/UTC', 'etc/utc', 'ETC/GMT-0', 'Zulu', 'GMT'])
    assert.equal(zoneOperand(name), UTC_OFFSET);
  assert.equal(zoneOperand('Europe/Berlin'), `'Europe/Berlin'`);
  assert.equal(zoneOperand('Etc/GMT+5'), `'Etc/GMT+5'`); // five hours behind UTC: a name, not UTC
  assert.equal(zoneOperand(`x'; DROP TABLE job; --`), `'x''; DROP TABLE job; --'`);
});

test("row hashes equal those computed with the zone's name and 'UTC' (the stored hashes stay valid)", async () => {
  const hashes = async (expr: string) =>
    (
      await dbs.sourcePool.query<{ id: string; h: string }>(
        `SELECT j.jobid::text AS id, ${expr}::text AS h ${BAREOS_FROM_JOB} ORDER BY j.jobid`,
      )
    ).rows;
  for (const zone of ['Etc/UTC', 'UTC', 'Europe/Berlin', 'America/New_York']) {
    const before = bareosRowHash(UTF8_MODE, `'${zone}'`).replaceAll(UTC_OFFSET, `'UTC'`);
    const now = bareosRowHash(UTF8_MODE, zoneOperand(zone));
    assert.ok(before.includes(`AT TIME ZONE 'UTC'`) && !now.includes(`AT TIME ZONE 'UTC'`));
    const [a, b] = [await hashes(before), await hashes(now)];
    assert.equal(a.length, 300);
    assert.deepEqual(b, a, zone);
  }
  // The zone still matters where it is not UTC.
  assert.notDeepEqual(
    await hashes(bareosRowHash(UTF8_MODE, zoneOperand('Europe/Berlin'))),
    await hashes(bareosRowHash(UTF8_MODE, zoneOperand('Etc/UTC'))),
  );
});
