/**
 * Every database error names the database and the setting that names it, without credentials:
 * `find`, `events`, `files` and `status`'s neighbours on an unreachable catalog database say
 * `catalog database host:port/db (catalogDatabaseUrl in <file>)`, or `(CATALOG_DATABASE_URL)` when
 * that variable overrides the file; a director database that does not exist (3D000) fails with
 * `source "<name>" database host:port/db (sources.<name>.databaseUrl)` in the message, and the
 * activity failure keeps the SQLSTATE. A statement error of the CLI (a database without the
 * catalog schema) names the database too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from '../dev/env/dev-server';
import { databaseUrl, resolveAdminUrl } from '../dev/env/postgres';
import { runCliProcess, testDatabases, writeConfig } from '../dev/harness/harness';
import { BareosSource } from '../lib/sources/bareos';
import { toFailure } from '../activities/failures';
import { createPool, withoutUserName } from '../lib/db';

test('the CLI names the unreachable catalog database and its setting, never the password', async (t) => {
  const port = await freePort();
  const url = `postgres://reader:s3cret-pw@127.0.0.1:${port}/nowhere`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-db-errors-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const configFile = path.join(dir, 'config.json');
  fs.writeFileSync(configFile, JSON.stringify({ catalogDatabaseUrl: url, sources: {} }));
  const env = { ...process.env, CATALOG_REBUILD_CONFIG: configFile, CATALOG_DATABASE_URL: '' };
  const commands = [
    ['find', '--catalog', 'c', '--path', '/etc/hosts'],
    ['events', '--catalog', 'c'],
    ['files', '--catalog', 'c', '--job', '12'],
    ['rejects', '--catalog', 'c'],
    ['rollback', '--catalog', 'c'],
  ];
  for (const args of commands) {
    const r = runCliProcess(args, env, 60_000);
    assert.equal(r.code, 1, `${args[0]}: ${r.stdout}${r.stderr}`);
    assert.match(
      r.stderr,
      new RegExp(
        `^catalog-rebuild: catalog database 127\\.0\\.0\\.1:${port}/nowhere \\(catalogDatabaseUrl in ${configFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\): connect ECONNREFUSED`,
      ),
      args[0],
    );
    assert.ok(!r.stderr.includes('s3cret'), `${args[0]} prints no password: ${r.stderr}`);
  }
  const overridden = runCliProcess(['events', '--catalog', 'c'], { ...env, CATALOG_DATABASE_URL: url }, 60_000);
  assert.equal(overridden.code, 1);
  assert.match(
    overridden.stderr,
    new RegExp(
      `^catalog-rebuild: catalog database 127\\.0\\.0\\.1:${port}/nowhere \\(CATALOG_DATABASE_URL\\): connect`,
    ),
  );
  assert.ok(!overridden.stderr.includes('s3cret'));
});

test('a director database that does not exist (3D000) names the source, its setting and the database', async () => {
  const admin = await resolveAdminUrl();
  const source = new BareosSource('director', {
    kind: 'bareos',
    databaseUrl: databaseUrl(admin, 'crt_no_such_director'),
  } as ConstructorParameters<typeof BareosSource>[1]);
  try {
    const err = (await source.textMode().then(
      () => assert.fail('the source database does not exist'),
      (e: unknown) => e,
    )) as Error & { code?: string };
    assert.equal(err.code, '3D000');
    const host = new URL(admin);
    const where = `source "director" database ${host.hostname}:${host.port || '5432'}/crt_no_such_director (sources.director.databaseUrl)`;
    assert.equal(err.message, `${where}: database "crt_no_such_director" does not exist`);
    assert.equal(
      (toFailure(err) as Error).message,
      `database error 3D000: ${where}: database "crt_no_such_director" does not exist`,
    );
  } finally {
    await source.close();
  }
});

test('an authorization error names the database, not the user of its URL', async () => {
  const admin = new URL(await resolveAdminUrl());
  admin.username = 'crt_no_such_role';
  admin.password = 'crt-s3cret';
  const pool = createPool(admin.toString(), {
    applicationName: 'catalog-rebuild:test',
    describe: 'catalog database (CATALOG_DATABASE_URL)',
  });
  try {
    const err = (await pool.query('SELECT 1').then(
      () => assert.fail('the role does not exist'),
      (e: unknown) => e,
    )) as Error & { code?: string };
    assert.match(String(err.code), /^28/, err.message);
    assert.match(err.message, /^catalog database \(CATALOG_DATABASE_URL\): .*\(the URL's user\)/);
    assert.doesNotMatch(err.message, /crt_no_such_role|crt-s3cret/);
  } finally {
    await pool.end();
  }
  assert.equal(
    withoutUserName(
      '28000',
      'no pg_hba.conf entry for host "10.0.0.1", user "bareos", database "bareos", no encryption',
    ),
    'no pg_hba.conf entry for host "10.0.0.1", user (the URL\'s user), database "bareos", no encryption',
  );
  assert.equal(withoutUserName('3D000', 'database "x" does not exist'), 'database "x" does not exist');
});

/** `events --catalog <catalog>` in a CLI process configured by a file naming `dbs`' catalog database. */
function eventsOf(dbs: Awaited<ReturnType<typeof testDatabases>>, catalog: string) {
  const configFile = writeConfig(dbs);
  const r = runCliProcess(
    ['events', '--catalog', catalog],
    { ...process.env, CATALOG_REBUILD_CONFIG: configFile, CATALOG_DATABASE_URL: '' },
    60_000,
  );
  return { ...r, configFile };
}

test('a catalog database without the catalog schema: the statement error names the database and its setting', async (t) => {
  const dbs = await testDatabases('dberr', { catalog: 'empty' });
  t.after(() => dbs.drop());
  const r = eventsOf(dbs, 'c');
  const configFile = r.configFile;
  assert.equal(r.code, 1, r.stdout);
  const u = new URL(dbs.catalogUrl);
  assert.equal(
    r.stderr.trim(),
    `catalog-rebuild: catalog database ${u.hostname}:${u.port || '5432'}${u.pathname} (catalogDatabaseUrl in ${configFile}): relation "event" does not exist`,
  );
});

test('events of a catalog never rebuilt in this catalog database: exit 1 saying so, not an empty list', async (t) => {
  const dbs = await testDatabases('dbevt');
  t.after(() => dbs.drop());
  const r = eventsOf(dbs, 'never-rebuilt');
  assert.equal(r.code, 1, r.stdout);
  assert.equal(r.stdout, '');
  assert.match(
    r.stderr,
    /^catalog-rebuild: catalog never-rebuilt has no events and no version in this catalog database: it was never rebuilt here/,
  );
});
