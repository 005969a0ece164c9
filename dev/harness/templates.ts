/**
 * Template databases for tests: a migrated catalog and generated Bareos sources are built once per
 * server and cloned (`CREATE DATABASE … TEMPLATE …`) for each test instead of being migrated or
 * generated again.
 *
 * - Names carry a hash of what made them: `crt_tpl_catalog_<hash of migrations/>`, and
 *   `crt_tpl_source_<hash of the generator's files>_<hash of its options>`. A changed migration or
 *   generator gives a new name; the templates of other hashes are dropped when a new one is made
 *   (sources: those of another generator hash). Tests never drop a template.
 * - Safe across processes (test files run side by side, other work trees on the same server): a
 *   clone holds a shared advisory lock on the template's name (`pg_advisory_lock_shared`), a build
 *   or a drop the exclusive one. A template is built under a temporary name, every session to it
 *   closed, then renamed and marked `IS_TEMPLATE true ALLOW_CONNECTIONS false`, so a half-built
 *   template is never cloned and no session stays connected to one (a clone would fail).
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import format from 'pg-format';
import { createPool, migrate, migrationsDir } from '../../lib/db';
import { projectRoot } from '../../lib/paths';
import type { GenerateBareosOptions, GenerateBareosResult } from '../bareos-generator';
import { generateBareosSource } from '../bareos-generator';
import { databaseUrl } from '../env/postgres';

/** First key of every template advisory lock (the second is `hashtext(<template name>)`). */
const TEMPLATE_LOCK = 0x43525450; // 'CRTP'

/** Prefix of every template database's name. */
export const TEMPLATE_PREFIX = 'crt_tpl_';

/** How a database is created: the server's default (`template1`), or as Bareos and Bacula create theirs. */
export type DatabaseEncoding = 'default' | 'sql_ascii';

/** Options of a generated source: {@link GenerateBareosOptions} without the URL, and its database's encoding. */
export interface SourceTemplateOptions extends Omit<GenerateBareosOptions, 'databaseUrl'> {
  /**
   * `sql_ascii`: the database is created `ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE
   * template0`, so its text may hold any bytes (default: the server's default encoding).
   */
  encoding?: DatabaseEncoding;
}

/** Hex sha256 of the parts, in order, each length-prefixed. */
function digest(parts: (string | Buffer)[]): string {
  const h = createHash('sha256');
  for (const p of parts) {
    h.update(`${Buffer.byteLength(p)}:`);
    h.update(p);
  }
  return h.digest('hex');
}

/** Hash of every file of the migrations folder (names and contents). */
export function migrationsHash(dir: string = migrationsDir()): string {
  const names = fs.readdirSync(dir).sort();
  return digest(names.flatMap((n) => [n, fs.readFileSync(path.join(dir, n))]));
}

/** Source files whose contents decide what `generateBareosSource` writes. */
const GENERATOR_FILES = ['dev/bareos-generator.ts', 'dev/bareos-file-generator.ts', 'dev/bareos-schema.sql'];

/** Hash of the generator's source files (see {@link GENERATOR_FILES}). */
export function generatorHash(): string {
  return digest(GENERATOR_FILES.flatMap((f) => [f, fs.readFileSync(path.join(projectRoot(), f))]));
}

/** JSON with object keys sorted and undefined members left out: equal options give equal text. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/** Name of the migrated catalog template: `crt_tpl_catalog_<8 hex of the migrations' hash>`. */
export const catalogTemplateName = (): string => `${TEMPLATE_PREFIX}catalog_${migrationsHash().slice(0, 8)}`;

/** Name of a source template: `crt_tpl_source_<8 hex of the generator's hash>_<12 hex of the options' hash>`. */
export function sourceTemplateName(options: SourceTemplateOptions): string {
  const { encoding = 'default', ...gen } = options;
  const opts = digest([canonical({ ...gen, encoding })]).slice(0, 12);
  return `${TEMPLATE_PREFIX}source_${generatorHash().slice(0, 8)}_${opts}`;
}

/** Runs `fn` on a new session of the admin connection, always closed. */
async function onAdmin<T>(adminUrl: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const c = new Client({ connectionString: adminUrl, application_name: 'catalog-rebuild:test-templates' });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Runs `fn` holding the template lock of `name` (shared or exclusive) on session `c`. */
async function withTemplateLock<T>(c: Client, name: string, mode: 'shared' | 'exclusive', fn: () => Promise<T>) {
  const fnName = mode === 'shared' ? 'pg_advisory_lock_shared' : 'pg_advisory_lock';
  await c.query(`SELECT ${fnName}($1, hashtext($2))`, [TEMPLATE_LOCK, name]);
  try {
    return await fn();
  } finally {
    const unlock = mode === 'shared' ? 'pg_advisory_unlock_shared' : 'pg_advisory_unlock';
    await c.query(`SELECT ${unlock}($1, hashtext($2))`, [TEMPLATE_LOCK, name]);
  }
}

/** Whether `name` exists and is a finished template (`datistemplate`). */
async function isTemplate(c: Client, name: string): Promise<boolean> {
  const r = await c.query('SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate', [name]);
  return !!r.rowCount;
}

/** What a template holds: its builder's result (stored as the database's comment, JSON). */
async function templateNote(c: Client, name: string): Promise<unknown> {
  const r = await c.query<{ note: string | null }>(
    `SELECT shobj_description(oid, 'pg_database') AS note FROM pg_database WHERE datname = $1`,
    [name],
  );
  const note = r.rows[0]?.note;
  return note ? JSON.parse(note) : null;
}

/** How a template is made: its database's encoding and what builds its contents. */
interface TemplateRecipe<T> {
  encoding: DatabaseEncoding;
  /** Fills the database at `url` and closes every session it opened; its result is kept with the template. */
  build(url: string): Promise<T>;
  /** Templates made obsolete by this one (names to drop once it exists). */
  obsolete(c: Client): Promise<string[]>;
}

/** `CREATE DATABASE` options of an encoding. */
const encodingClause = (e: DatabaseEncoding): string =>
  e === 'sql_ascii' ? ` ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0` : '';

/**
 * Builds template `name` under the exclusive lock unless it exists: a temporary database
 * `<name>_b<hex>` filled by `recipe.build`, then renamed and marked as a template. Leftovers of
 * builds that died (only the lock holder builds) are dropped first.
 */
async function buildTemplate<T>(c: Client, adminUrl: string, name: string, recipe: TemplateRecipe<T>): Promise<void> {
  await withTemplateLock(c, name, 'exclusive', async () => {
    if (await isTemplate(c, name)) return;
    const stale = await c.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname = $1 OR starts_with(datname, $1 || '_b')`,
      [name],
    );
    for (const r of stale.rows) await dropAny(c, r.datname);
    const tmp = `${name}_b${randomBytes(3).toString('hex')}`;
    await c.query(format('CREATE DATABASE %I', tmp) + encodingClause(recipe.encoding));
    try {
      const result = await recipe.build(databaseUrl(adminUrl, tmp));
      await c.query(format('COMMENT ON DATABASE %I IS %L', tmp, JSON.stringify(result ?? null)));
      await c.query(format('ALTER DATABASE %I RENAME TO %I', tmp, name));
      await c.query(format('ALTER DATABASE %I WITH IS_TEMPLATE true ALLOW_CONNECTIONS false', name));
    } catch (err) {
      await dropAny(c, tmp).catch(() => undefined);
      await dropAny(c, name).catch(() => undefined);
      throw err;
    }
  });
  for (const old of await recipe.obsolete(c)) if (old !== name) await dropTemplateIfIdle(c, old);
}

/** Drops database `name`, a template or not (its sessions closed). */
async function dropAny(c: Client, name: string): Promise<void> {
  await c.query(format('ALTER DATABASE %I WITH IS_TEMPLATE false', name)).catch(() => undefined);
  await c.query(format('DROP DATABASE IF EXISTS %I WITH (FORCE)', name));
}

/** Drops template `name` unless a clone or a build holds its lock now (then a later build drops it). */
async function dropTemplateIfIdle(c: Client, name: string): Promise<void> {
  const got = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [
    TEMPLATE_LOCK,
    name,
  ]);
  if (!got.rows[0].ok) return;
  try {
    await dropAny(c, name);
  } finally {
    await c.query('SELECT pg_advisory_unlock($1, hashtext($2))', [TEMPLATE_LOCK, name]);
  }
}

/**
 * Creates database `target` as a copy of template `name`, building the template first when it
 * does not exist (or was dropped meanwhile by a newer build). `target` is dropped first when it exists.
 * @returns the builder's result kept with the template.
 * @throws the build's error, or the server's (e.g. `42P04` when `target` is being created by another session).
 */
async function cloneTemplate<T>(adminUrl: string, name: string, target: string, recipe: TemplateRecipe<T>): Promise<T> {
  return onAdmin(adminUrl, async (c) => {
    await c.query(format('DROP DATABASE IF EXISTS %I WITH (FORCE)', target));
    for (let tries = 0; ; tries++) {
      const cloned = await withTemplateLock(c, name, 'shared', async () => {
        if (!(await isTemplate(c, name))) return false;
        await c.query(format('CREATE DATABASE %I TEMPLATE %I', target, name));
        return true;
      });
      if (cloned) return (await templateNote(c, name)) as T;
      if (tries >= 3) throw new Error(`template database ${name} was dropped ${tries} times while it was being cloned`);
      await buildTemplate(c, adminUrl, name, recipe);
    }
  });
}

/** Templates named `<prefix><anything>` other than those starting `<keep>`. */
async function templatesLike(c: Client, prefix: string, keep: string): Promise<string[]> {
  const r = await c.query<{ datname: string }>(
    `SELECT datname FROM pg_database WHERE datistemplate AND starts_with(datname, $1) AND NOT starts_with(datname, $2)`,
    [prefix, keep],
  );
  return r.rows.map((x) => x.datname);
}

/** How the migrated catalog template `tpl` is made: every migration of `migrations/` applied. */
function catalogRecipe(tpl: string): TemplateRecipe<{ migrations: number[] }> {
  return {
    encoding: 'default',
    async build(url) {
      const pool = createPool(url, { applicationName: 'catalog-rebuild:test-templates', max: 1 });
      try {
        return { migrations: await migrate(pool) };
      } finally {
        await pool.end();
      }
    },
    obsolete: (c) => templatesLike(c, `${TEMPLATE_PREFIX}catalog_`, tpl),
  };
}

/**
 * Builds the migrated catalog template unless it exists (e.g. once before the test files run, so
 * that none of them waits for another's build).
 * @returns its name.
 */
export async function ensureCatalogTemplate(adminUrl: string): Promise<string> {
  const tpl = catalogTemplateName();
  await onAdmin(adminUrl, (c) => buildTemplate(c, adminUrl, tpl, catalogRecipe(tpl)));
  return tpl;
}

/**
 * Creates database `name` (dropped first when it exists) as a copy of the migrated catalog
 * template, which is built (all migrations of `migrations/` applied) when missing.
 * @returns the URL of `name`.
 */
export async function catalogFromTemplate(adminUrl: string, name: string): Promise<string> {
  const tpl = catalogTemplateName();
  await cloneTemplate(adminUrl, tpl, name, catalogRecipe(tpl));
  return databaseUrl(adminUrl, name);
}

/**
 * Creates database `name` (dropped first when it exists: no session may use it) as a copy of the
 * generated source `options` describe: the same rows `generateBareosSource` would write into a new
 * database. The template is generated when missing.
 * @returns what `generateBareosSource` returned when it generated the template.
 * @throws the generator's error (RangeError for invalid options) when it builds the template; `name` then does not exist.
 */
export async function sourceFromTemplate(
  adminUrl: string,
  name: string,
  options: SourceTemplateOptions,
): Promise<GenerateBareosResult> {
  const { encoding = 'default', ...gen } = options;
  const tpl = sourceTemplateName(options);
  const code = tpl.slice(0, `${TEMPLATE_PREFIX}source_`.length + 9); // through the generator hash and '_'
  return cloneTemplate<GenerateBareosResult>(adminUrl, tpl, name, {
    encoding,
    build: (url) => generateBareosSource({ ...gen, databaseUrl: url }),
    obsolete: (c) => templatesLike(c, `${TEMPLATE_PREFIX}source_`, code),
  });
}
