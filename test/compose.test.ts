/**
 * docker-compose.yml, Dockerfile and deploy/config.example.json cannot run here (no Docker engine):
 * this test reads them and checks service names, ports and variables against the documented
 * interfaces and the configuration schema. No YAML library is installed, so the compose file is
 * read by indentation (two spaces per level, as the file is written).
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadConfig } from '../lib/config';
import { projectRoot } from '../lib/paths';

const root = projectRoot();
const composeText = fs.readFileSync(path.join(root, 'docker-compose.yml'), 'utf8');
const lines = composeText.split('\n').filter((l) => !/^\s*#/.test(l));

const indent = (l: string): number => l.length - l.trimStart().length;

/** Lines of a mapping entry `key:` at `level` spaces inside `within`, up to the next sibling. */
function block(within: string[], key: string, level: number): string[] | null {
  const start = within.findIndex(
    (l) => indent(l) === level && new RegExp(`^\\s*${key.replace(/[.-]/g, '\\$&')}:\\s*(#.*)?$`).test(l),
  );
  if (start < 0) return null;
  const out: string[] = [];
  for (const l of within.slice(start + 1)) {
    if (l.trim() && indent(l) <= level) break;
    out.push(l);
  }
  return out;
}

const services = block(lines, 'services', 0);

function service(name: string): string[] {
  assert.ok(services, 'docker-compose.yml has a top-level services: mapping');
  const s = block(services, name, 2);
  assert.ok(s, `service ${name} is defined`);
  return s;
}

/** `image:` of a service. */
function image(s: string[]): string {
  const l = s.find((x) => indent(x) === 4 && /^\s*image:/.test(x));
  return l ? l.replace(/^\s*image:\s*/, '').replace(/^["']|["']$/g, '') : '';
}

/** Entries of a list under `key:` (e.g. ports, volumes), unquoted. */
function listOf(s: string[], key: string): string[] {
  const b = block(s, key, 4) ?? [];
  return b
    .filter((l) => /^\s*-\s/.test(l))
    .map((l) =>
      l
        .replace(/^\s*-\s*/, '')
        .trim()
        .replace(/^["']|["']$/g, ''),
    );
}

/** `environment:` as a map, in list (`- K=V`) or mapping (`K: V`) form. */
function envOf(s: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const l of block(s, 'environment', 4) ?? []) {
    const t = l.trim();
    let m = /^-\s*["']?([A-Za-z_][A-Za-z0-9_]*)=(.*?)["']?$/.exec(t);
    if (!m) m = /^([A-Za-z_][A-Za-z0-9_]*):\s*["']?(.*?)["']?$/.exec(t);
    if (m) env[m[1]] = m[2];
  }
  return env;
}

test('docker-compose.yml defines the documented services with their images', () => {
  assert.match(image(service('postgresql')), /^postgres:15/);
  assert.match(image(service('temporal')), /^temporalio\/(auto-setup|server):/);
  assert.match(image(service('temporal-admin-tools')), /^temporalio\/admin-tools:/);
  assert.match(image(service('temporal-ui')), /^temporalio\/ui:/);
  const worker = service('worker');
  assert.ok(
    worker.some((l) => /^\s{4}build:\s*\.\s*$/.test(l)),
    'the worker is built from this repository (build: .)',
  );
  assert.ok(
    worker.some((l) => /^\s{4}command:.*npm.*run.*worker/.test(l)),
    'the worker runs `npm run worker`',
  );
});

test('Temporal uses the postgres12 driver on the postgresql service and publishes gRPC 7233; the Web UI publishes 8080', () => {
  const temporal = service('temporal');
  const env = envOf(temporal);
  assert.equal(env.DB, 'postgres12');
  assert.equal(env.POSTGRES_SEEDS, 'postgresql');
  assert.ok(listOf(temporal, 'ports').includes('7233:7233'), 'temporal publishes 7233:7233');
  const ui = service('temporal-ui');
  assert.ok(listOf(ui, 'ports').includes('8080:8080'), 'temporal-ui publishes 8080:8080');
  assert.equal(envOf(ui).TEMPORAL_ADDRESS, 'temporal:7233');
});

test('the admin-tools step waits for the server and creates both keyword search attributes', () => {
  const admin = service('temporal-admin-tools');
  const text = admin.join('\n');
  assert.equal(envOf(admin).TEMPORAL_ADDRESS, 'temporal:7233');
  assert.match(text, /until temporal operator/, 'waits for the server before creating');
  const create = /temporal operator search-attribute create --namespace default((?:\s+--name \w+ --type \w+)+)/.exec(
    text.replace(/\s+/g, ' '),
  );
  assert.ok(create, 'runs temporal operator search-attribute create --namespace default');
  const pairs = [...create[1].matchAll(/--name (\w+) --type (\w+)/g)].map((m) => `${m[1]}=${m[2]}`);
  assert.deepEqual(pairs.sort(), ['CatalogName=Keyword', 'RebuildPhase=Keyword']);
});

test('the worker gets the documented variables and the example config file', () => {
  const worker = service('worker');
  const env = envOf(worker);
  assert.equal(env.TEMPORAL_ADDRESS, 'temporal:7233');
  assert.equal(env.CATALOG_REBUILD_TASK_QUEUE, 'catalog-rebuild');
  assert.ok(env.CATALOG_REBUILD_CONFIG, 'CATALOG_REBUILD_CONFIG is set');
  const mount = listOf(worker, 'volumes').find((v) => v.split(':')[1] === env.CATALOG_REBUILD_CONFIG);
  assert.ok(mount, `a volume mounts a file at ${env.CATALOG_REBUILD_CONFIG}`);
  assert.equal(mount.split(':')[0], './deploy/config.example.json');
  if (env.CATALOG_DATABASE_URL)
    assert.match(
      env.CATALOG_DATABASE_URL,
      /^postgres(ql)?:\/\/[^@]+@postgresql:5432\//,
      'the catalog override points at the postgresql service',
    );
});

test('deploy/config.example.json passes loadConfig, alone and with the compose overrides', () => {
  const file = path.join(root, 'deploy', 'config.example.json');
  const base: NodeJS.ProcessEnv = { ...process.env, CATALOG_REBUILD_CONFIG: file };
  delete base.CATALOG_DATABASE_URL;
  const config = loadConfig(base, { requireFile: true });
  assert.match(config.catalogDatabaseUrl, /^postgres(ql)?:\/\//);
  const sources = Object.entries(config.sources);
  assert.equal(sources.length, 1);
  assert.equal(sources[0][1].kind, 'bareos');
  const raw = fs.readFileSync(file, 'utf8');
  assert.doesNotMatch(raw, /127\.0\.0\.1|localhost/, 'placeholder hosts only');
  for (const m of raw.matchAll(/postgres(?:ql)?:\/\/[^:@/]+:([^@]*)@/g))
    assert.equal(m[1], 'CHANGE_ME', 'no real passwords');

  const composeEnv = envOf(service('worker'));
  const withCompose = loadConfig(
    { ...base, CATALOG_DATABASE_URL: composeEnv.CATALOG_DATABASE_URL ?? '' },
    { requireFile: true },
  );
  assert.equal(withCompose.catalogDatabaseUrl, composeEnv.CATALOG_DATABASE_URL ?? config.catalogDatabaseUrl);
});

test('Dockerfile builds the worker on node:20-slim from the product sources only', () => {
  const text = fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8');
  assert.match(text, /^FROM node:20-slim\s*$/m);
  assert.match(text, /^RUN npm ci\b/m);
  assert.match(text, /^RUN npx tsc -p tsconfig\.build\.json && node dist\/worker\/build-bundle\.js\s*$/m);
  assert.doesNotMatch(text, /^COPY .*\b(dev|test|scripts)\b/m, 'no development tooling or tests in the image');
  assert.match(text, /^CMD \["node",\s*"dist\/worker\/main\.js"\]\s*$/m);
  for (const dir of ['migrations', 'workflows', 'activities', 'worker', 'lib']) {
    assert.match(text, new RegExp(`^COPY .*\\b${dir}\\b`, 'm'), `the image contains ${dir}/`);
  }
});
