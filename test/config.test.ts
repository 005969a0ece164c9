/**
 * Bad configuration fails fast (issue 8 test 4; design.md G11, Configuration, Search attributes):
 * the real worker process (`node dist/worker/main.js`) exits 1 with a message naming the key, before
 * any workflow starts, for a source without `databaseUrl`, a non-PostgreSQL URL, an unknown key, a
 * missing or non-JSON configuration file, and a Temporal namespace without the CatalogName and
 * RebuildPhase search attributes (a private dev server started without them, on free ports). The
 * printed `temporal operator search-attribute create` command is then run and the worker starts.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Connection } from '@temporalio/client';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import { privateTemporal, spawnWorker, testDatabases, testEnv, uniqueQueue, writeConfig } from '../dev/harness/harness';
import { runWorkerToExit } from '../dev/harness/entrypoint';
import { freePort } from '../dev/env/dev-server';
import { searchAttributesListed } from '../dev/harness/observe';

let server: Awaited<ReturnType<typeof privateTemporal>> | undefined;
let address: string;
let dbs: TestDatabases;
let tmp: string;
let worker: WorkerProcess | undefined;

/** `temporal server start-dev` on free ports WITHOUT the catalog-rebuild search attributes. */
before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-config-test-'));
  server = await privateTemporal({ searchAttributes: false });
  address = server.address;
  dbs = await testDatabases('config');
});

after(async () => {
  worker?.kill();
  if (worker) await worker.exited;
  await server?.stop();
  if (server) fs.rmSync(server.dir, { recursive: true, force: true });
  await dbs?.drop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

/** Runs the worker entrypoint to its exit (60 s at most); returns exit code and output. */
const runWorker = (env: NodeJS.ProcessEnv) => runWorkerToExit(env, 60_000);

function configFile(name: string, content: unknown): string {
  const file = path.join(tmp, name);
  fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return file;
}

function envFor(file: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return testEnv({ address, configFile: file, taskQueue: uniqueQueue('config'), extra });
}

/** No workflow on the server and no version row (and, before migrations, no catalog table at all). */
async function assertNothingStarted(): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    const r = await connection.workflowService.listWorkflowExecutions({ namespace: 'default', pageSize: 10 });
    assert.equal(r.executions.length, 0, 'no workflow was started');
  } finally {
    await connection.close();
  }
  const t = await dbs.catalogPool.query<{ t: string | null }>(`SELECT to_regclass('public.version')::text AS t`);
  if (t.rows[0].t) {
    const v = await dbs.catalogPool.query<{ n: number }>('SELECT count(*)::int AS n FROM version');
    assert.equal(v.rows[0].n, 0, 'no version row was created');
  }
}

/** Asserts exit 1, the message, nothing started, and that no credential was printed. */
async function expectConfigFailure(env: NodeJS.ProcessEnv, message: RegExp): Promise<string> {
  const r = await runWorker(env);
  assert.equal(r.code, 1, `exit code (output: ${r.out})`);
  assert.match(r.out, message);
  assert.doesNotMatch(r.out, /polling task queue/);
  assert.doesNotMatch(r.out, /s3cret/, 'no password in the error');
  assert.ok(r.ms < 30_000, `failed fast (${r.ms} ms)`);
  await assertNothingStarted();
  return r.out;
}

test('a source without databaseUrl: exit 1 naming sources.<name>.databaseUrl', async () => {
  const file = configFile('no-url.json', {
    catalogDatabaseUrl: dbs.catalogUrl,
    sources: { director: { kind: 'bareos', timezone: 'Europe/Berlin' } },
  });
  await expectConfigFailure(envFor(file), /sources\.director\.databaseUrl/);
});

test('a bad URL: exit 1 naming catalogDatabaseUrl (and sources.<name>.databaseUrl), without echoing the URL', async () => {
  const file = configFile('bad-url.json', {
    catalogDatabaseUrl: 'mysql://user:s3cret@x/db',
    sources: { director: { kind: 'bareos', databaseUrl: dbs.sourceUrl } },
  });
  await expectConfigFailure(envFor(file), /catalogDatabaseUrl: must be a postgres:\/\/ or postgresql:\/\/ URL/);
  const file2 = configFile('bad-source-url.json', {
    catalogDatabaseUrl: dbs.catalogUrl,
    sources: { director: { kind: 'bareos', databaseUrl: 'mysql://u:s3cret@x/db' } },
  });
  await expectConfigFailure(envFor(file2), /sources\.director\.databaseUrl: must be a postgres/);
  // The environment override is checked too, and named.
  const good = writeConfig(dbs);
  await expectConfigFailure(
    envFor(good, { CATALOG_DATABASE_URL: 'mysql://u:s3cret@x/db' }),
    /CATALOG_DATABASE_URL: must be a postgres/,
  );
  // A postgres:// URL that does not parse (a port above 65535, an open IPv6 bracket) is named too,
  // in the variable and in the file, not left to a bare "Invalid URL".
  for (const url of ['postgres://postgres:s3cret@127.0.0.1:99999/x', 'postgres://u:s3cret@[::1:1/x']) {
    await expectConfigFailure(
      envFor(good, { CATALOG_DATABASE_URL: url }),
      /CATALOG_DATABASE_URL: must be a postgres:\/\/ or postgresql:\/\/ URL that parses/,
    );
    const inFile = configFile('unparsed-url.json', {
      catalogDatabaseUrl: url,
      sources: { director: { kind: 'bareos', databaseUrl: dbs.sourceUrl } },
    });
    await expectConfigFailure(
      envFor(inFile),
      /catalogDatabaseUrl: must be a postgres:\/\/ or postgresql:\/\/ URL that parses/,
    );
  }
});

test('an unknown key: exit 1 naming it (top level and inside a source)', async () => {
  const file = configFile('unknown-key.json', {
    catalogDatabaseUrl: dbs.catalogUrl,
    catalogDatabseUrl: 'x',
    sources: { director: { kind: 'bareos', databaseUrl: dbs.sourceUrl } },
  });
  await expectConfigFailure(envFor(file), /catalogDatabseUrl/);
  const file2 = configFile('unknown-source-key.json', {
    catalogDatabaseUrl: dbs.catalogUrl,
    sources: { director: { kind: 'bareos', databaseUrl: dbs.sourceUrl, timeZone: 'UTC' } },
  });
  await expectConfigFailure(envFor(file2), /sources\.director.*timeZone/);
});

test('source kinds and listing sources: an unknown kind, path and command together, an unknown time zone, a filesCommand placeholder: exit 1 naming the key', async () => {
  const bad = (name: string, source: Record<string, unknown>) =>
    configFile(name, { catalogDatabaseUrl: dbs.catalogUrl, sources: { fleet: source } });
  await expectConfigFailure(
    envFor(bad('kind.json', { kind: 'restic', path: '/x.json' })),
    /sources\.fleet\.kind: kind must be one of "bareos", "bacula".*"restic-json", "borg-json"/,
  );
  await expectConfigFailure(
    envFor(bad('both.json', { kind: 'restic-json', path: '/x.json', command: ['restic', 'snapshots', '--json'] })),
    /sources\.fleet: a listing source needs exactly one of "path".*or "command".*; both are given/,
  );
  await expectConfigFailure(
    envFor(bad('tz.json', { kind: 'borg-json', path: '/x.json', timezone: 'Europe/Berln' })),
    /sources\.fleet\.timezone: must be an IANA time zone name/,
  );
  await expectConfigFailure(
    envFor(
      bad('placeholder.json', { kind: 'restic-json', path: '/x.json', filesCommand: ['restic', 'ls', '{snapshot}'] }),
    ),
    /sources\.fleet\.filesCommand: holds an unknown placeholder: use \{id\}, \{short_id\}, \{archive\} or \{repo\}/,
  );
  await expectConfigFailure(
    envFor(
      bad('repo.json', { kind: 'borg-json', path: '/x.json', filesCommand: ['borg', 'list', '{repo}::{archive}'] }),
    ),
    /sources\.fleet: filesCommand uses \{repo\}: set "repository" to the repository it stands for/,
  );
});

test('a worker without CATALOG_REBUILD_CONFIG, with a catalog database that does not exist or that does not answer, exits 1 saying which and what to do', async () => {
  const env = envFor(writeConfig(dbs));
  await expectConfigFailure(
    { ...env, CATALOG_REBUILD_CONFIG: '', CATALOG_DATABASE_URL: dbs.catalogUrl },
    /CATALOG_REBUILD_CONFIG is not set: name the JSON configuration file/,
  );
  const missingDb = dbs.catalogUrl.replace(/\/[^/?]+(\?|$)/, '/catalog_rebuild_no_such_db$1');
  await expectConfigFailure(
    { ...env, CATALOG_DATABASE_URL: missingDb },
    /^catalog-rebuild worker: catalog database [^ ]+\/catalog_rebuild_no_such_db \(CATALOG_DATABASE_URL\): database "catalog_rebuild_no_such_db" does not exist: create it \(e\.g\. createdb/m,
  );
  // A server that does not answer (a closed port), with a password in the URL: the error names the
  // database and the setting, never the password (expectConfigFailure).
  const port = await freePort();
  const closed = `postgres://postgres:s3cret-pw@127.0.0.1:${port}/nowhere`;
  await expectConfigFailure(
    { ...env, CATALOG_DATABASE_URL: closed },
    new RegExp(
      `^catalog-rebuild worker: catalog database 127\\.0\\.0\\.1:${port}/nowhere \\(CATALOG_DATABASE_URL\\): connect ECONNREFUSED`,
      'm',
    ),
  );
});

test('a bad source name and a command given as a string: the messages say what is expected', async () => {
  const names = configFile('bad-name.json', {
    catalogDatabaseUrl: dbs.catalogUrl,
    sources: { 'my source': { kind: 'restic-json', path: '/x.json' } },
  });
  await expectConfigFailure(envFor(names), /sources\.my source: source names use letters, digits, _ \. -/);
  const cmd = configFile('cmd-string.json', {
    catalogDatabaseUrl: dbs.catalogUrl,
    sources: { fleet: { kind: 'restic-json', command: 'restic snapshots --json' } },
  });
  await expectConfigFailure(envFor(cmd), /sources\.fleet\.command: must be an argv array such as \["restic"/);
});

test('CATALOG_REBUILD_CONFIG naming a missing file or invalid JSON: exit 1 naming the variable and the file', async () => {
  const missing = path.join(tmp, 'does-not-exist.json');
  await expectConfigFailure(
    envFor(missing),
    new RegExp(`CATALOG_REBUILD_CONFIG: cannot read ${missing.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: ENOENT`),
  );
  // A relative name is read from the working directory, which the message names.
  await expectConfigFailure(
    envFor('no-such-folder/config.json'),
    /CATALOG_REBUILD_CONFIG: cannot read no-such-folder\/config\.json \(relative to the working directory \/[^)]*\): ENOENT/,
  );
  const broken = configFile('broken.json', '{ "catalogDatabaseUrl": "postgres://x", ');
  await expectConfigFailure(envFor(broken), /CATALOG_REBUILD_CONFIG: .*broken\.json is not valid JSON/);
});

test('unregistered search attributes: exit 1 printing the create command; running it lets the worker start', async () => {
  const env = envFor(writeConfig(dbs));
  const out = await expectConfigFailure(
    env,
    /search attributes missing on namespace default: CatalogName, RebuildPhase/,
  );
  const m = /(temporal operator search-attribute create [^\n]*)/.exec(out);
  assert.ok(m, out);
  assert.match(m[1], /--name CatalogName --type Keyword/);
  assert.match(m[1], /--name RebuildPhase --type Keyword/);
  // The printed command is the fix: run it (the CLI reads TEMPORAL_ADDRESS like the worker does).
  const args = m[1].trim().split(/\s+/).slice(1);
  const fix = await new Promise<{ code: number | null; out: string }>((resolve) => {
    const c = spawn(server!.cli, args, {
      env: { ...process.env, TEMPORAL_ADDRESS: address },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let o = '';
    c.stdout!.on('data', (d) => (o += d));
    c.stderr!.on('data', (d) => (o += d));
    c.on('exit', (code) => resolve({ code, out: o }));
  });
  assert.equal(fix.code, 0, fix.out);
  // Search attributes become visible asynchronously on the dev server: once the namespace lists
  // them (what the worker's check reads), the worker starts and polls.
  const connection = await Connection.connect({ address });
  try {
    await searchAttributesListed(connection);
  } finally {
    await connection.close();
  }
  worker = await spawnWorker(env).catch((err: unknown) => assert.fail(`worker did not start after the fix: ${err}`));
  assert.ok(worker);
});
