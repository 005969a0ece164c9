import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { databaseLabel } from './db';
import { ConfigError, UnknownSourceError } from './errors';
import { isListingKind, LISTING_KINDS } from './sources/listing-formats';

/** Whether `s` is a postgres:// or postgresql:// URL that parses (a port up to 65535, a closed IPv6 bracket…). */
function isPostgresUrl(s: string): boolean {
  if (!/^postgres(ql)?:\/\//.test(s)) return false;
  try {
    new URL(s);
    return true;
  } catch {
    return false;
  }
}

/** What a bad database URL is told (the URL itself is never repeated: it may hold a password). */
const POSTGRES_URL_EXPECTED =
  'must be a postgres:// or postgresql:// URL that parses (postgres://user@host:port/database)';

const postgresUrl = z.string().refine(isPostgresUrl, { message: POSTGRES_URL_EXPECTED });

/** An IANA time zone name that this Node.js knows (the same tz database names PostgreSQL uses). */
const ianaZone = z
  .string()
  .min(1)
  .refine(
    (tz) => {
      try {
        new Intl.DateTimeFormat('en-US', { timeZone: tz });
        return true;
      } catch {
        return false;
      }
    },
    { message: 'must be an IANA time zone name such as Europe/Berlin or UTC' },
  );

/** Quarantined records a rebuild may have and still publish; default 0. */
const maxRejects = z.number().int().min(0).optional();

/**
 * PostgreSQL encoding names accepted for `legacyEncoding`: single-byte encodings a director's
 * `SQL_ASCII` catalog text is commonly written in. Text that is valid UTF-8 is always kept as is.
 */
export const LEGACY_ENCODINGS = [
  'LATIN1',
  'LATIN2',
  'LATIN3',
  'LATIN4',
  'LATIN5',
  'LATIN6',
  'LATIN7',
  'LATIN8',
  'LATIN9',
  'LATIN10',
  'WIN1250',
  'WIN1251',
  'WIN1252',
  'WIN1253',
  'WIN1254',
  'WIN1255',
  'WIN1256',
  'WIN1257',
  'WIN1258',
  'WIN866',
  'WIN874',
  'KOI8R',
  'KOI8U',
  'ISO_8859_5',
  'ISO_8859_6',
  'ISO_8859_7',
  'ISO_8859_8',
] as const;

/** How text that is not valid UTF-8 is decoded; default LATIN1. */
const legacyEncoding = z
  .string()
  .transform((s) => s.toUpperCase())
  .pipe(z.enum(LEGACY_ENCODINGS, { message: `must be one of ${LEGACY_ENCODINGS.join(', ')}` }))
  .optional();

/**
 * Quarantined file records a rebuild with `--files` may have and still publish; default 0.1% of
 * the version's file records and at least 100.
 */
const maxFileRejects = z.number().int().min(0).optional();

/** Page reads a worker runs against one source at once; default 4. */
const maxConcurrentReads = z.number().int().min(1).max(64).optional();

/** A Bareos or Bacula director catalog in PostgreSQL. */
export const databaseSourceSchema = z
  .object({
    kind: z.enum(['bareos', 'bacula']),
    /** Connection URL of the director's catalog database (read-only use). */
    databaseUrl: postgresUrl,
    /** IANA zone of the director's naive timestamps; default: the source database's TimeZone setting. */
    timezone: ianaZone.optional(),
    /** Per-statement timeout on source sessions (ms), default 60,000. */
    statementTimeoutMs: z.number().int().positive().optional(),
    /** Quarantined records allowed in a published rebuild (default 0). */
    maxRejects,
    /**
     * Encoding of source text that is not valid UTF-8 (a director's `SQL_ASCII` catalog holding
     * Latin-1 bytes), default `LATIN1`; valid UTF-8 is kept as it is.
     */
    legacyEncoding,
    /** Page reads (source statements) one worker runs at once against this source, default 4. */
    maxConcurrentReads,
    /** Quarantined file records allowed in a published rebuild with `--files` (default 0.1%, at least 100). */
    maxFileRejects,
  })
  .strict();

/** Placeholders a listing source's `filesCommand` may hold. */
const FILES_PLACEHOLDERS = new Set(['{id}', '{short_id}', '{archive}', '{repo}']);

/**
 * A restic (`restic snapshots --json`) or borg (`borg list --json`) listing, read from a file
 * (`path`) or from a command's standard output (`command`, an argv array run without a shell);
 * `kind` is one of the listing formats' kinds (lib/sources/listing-formats/).
 */
export const fileSourceSchema = z
  .object({
    kind: z.enum(LISTING_KINDS),
    /** Listing file; a relative path is resolved against the configuration file's folder. */
    path: z.string().min(1).optional(),
    /** Command printing the listing, as an argv array (no shell). */
    command: z
      .array(z.string().min(1), {
        error: 'must be an argv array such as ["restic", "-r", "/srv/restic", "snapshots", "--json"] (no shell)',
      })
      .min(1)
      .optional(),
    /**
     * Time limit of the command (ms), default 90,000, at most 100,000: the plan runs it inside an
     * activity with a 2-minute start-to-close timeout. Slower listings: write them to a file first.
     */
    commandTimeoutMs: z
      .number()
      .int()
      .positive()
      .max(100_000, {
        message: 'at most 100000 ms (the plan activity has 2 minutes); write slower listings to a file and use "path"',
      })
      .optional(),
    /** IANA zone of naive times (borg 1.x) and of buckets; default UTC. */
    timezone: ianaZone.optional(),
    /** Client (host) name of the jobs, for listings that do not carry one (borg); default NULL. */
    client: z.string().min(1).optional(),
    /** Quarantined records allowed in a published rebuild (default 0). */
    maxRejects,
    /** Encoding of listing text that is not valid UTF-8, default `LATIN1`; valid UTF-8 is kept as it is. */
    legacyEncoding,
    /** Quarantined file records allowed in a published rebuild with `--files` (default 0.1%, at least 100). */
    maxFileRejects,
    /**
     * Command listing one snapshot's or archive's files (`start --files`), as an argv array (no
     * shell), run per job inside its page: `["restic", "-r", "/srv/restic", "ls", "--json", "{id}"]`,
     * `["borg", "list", "--json-lines", "{repo}::{archive}"]`. Placeholders: `{id}` (snapshot or
     * archive id), `{short_id}` (restic), `{archive}` (borg archive name), `{repo}` (`repository`).
     */
    filesCommand: z
      .array(z.string().min(1), {
        error: 'must be an argv array such as ["restic", "-r", "/srv/restic", "ls", "--json", "{id}"] (no shell)',
      })
      .min(1)
      .refine(
        (argv) => argv.every((a) => (a.match(/\{[A-Za-z_-]+\}/g) ?? []).every((p) => FILES_PLACEHOLDERS.has(p))),
        {
          message: 'holds an unknown placeholder: use {id}, {short_id}, {archive} or {repo}',
        },
      )
      .optional(),
    /**
     * Time limit of one `filesCommand` (ms), default 240,000, at most 280,000: a page that lists a
     * job must finish within its start-to-close timeout (5 minutes at least).
     */
    filesCommandTimeoutMs: z
      .number()
      .int()
      .positive()
      .max(280_000, { message: 'at most 280000 ms (a page has at least 5 minutes to list its jobs and write them)' })
      .optional(),
    /** The repository `{repo}` stands for in `filesCommand` (borg: the repository URL or path). */
    repository: z.string().min(1).optional(),
  })
  .strict()
  .refine((s) => !s.filesCommand?.some((a) => a.includes('{repo}')) || s.repository !== undefined, {
    error: 'filesCommand uses {repo}: set "repository" to the repository it stands for',
  })
  .refine((s) => (s.path === undefined) !== (s.command === undefined), {
    error: (iss) =>
      `a listing source needs exactly one of "path" (a listing file) or "command" (an argv array printing the listing); ${
        (iss.input as { path?: unknown })?.path !== undefined ? 'both are given' : 'neither is given'
      }`,
  });

/** Any source: a director catalog database or a backup tool's JSON listing. */
export const sourceSchema = z.discriminatedUnion('kind', [databaseSourceSchema, fileSourceSchema], {
  error: () =>
    `kind must be one of "bareos", "bacula" (director catalog databases), ${LISTING_KINDS.map((k) => `"${k}"`).join(', ')} (listings)`,
});

/** The worker-side configuration file named by CATALOG_REBUILD_CONFIG. */
export const configSchema = z
  .object({
    catalogDatabaseUrl: postgresUrl.optional(),
    sources: z
      .record(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'source names use letters, digits, _ . -'), sourceSchema)
      .default({}),
  })
  .strict();

/** Parsed configuration: the catalog database and the named sources (with their credentials). */
export type Config = z.infer<typeof configSchema> & { catalogDatabaseUrl: string };
/** One source's settings. */
export type SourceConfig = z.infer<typeof sourceSchema>;
/** A director catalog source's settings. */
export type DatabaseSourceConfig = z.infer<typeof databaseSourceSchema>;
/** A file or command source's settings. */
export type FileSourceConfig = z.infer<typeof fileSourceSchema>;

/** True for sources staged into the catalog database at plan time (the listing kinds: restic, borg). */
export function isFileSource(c: SourceConfig): c is FileSourceConfig {
  return isListingKind(c.kind);
}

function formatIssues(err: z.ZodError, file: string): string {
  return err.issues
    .map((i) => {
      // A bad record key (a source name) carries its reason in nested issues.
      const nested =
        i.code === 'invalid_key' ? (i as { issues?: { message: string }[] }).issues?.[0]?.message : undefined;
      return `${file}: ${i.path.length ? i.path.join('.') : '(top level)'}: ${nested ?? i.message}`;
    })
    .join('; ');
}

/**
 * Loads and validates the configuration.
 * Reads the JSON file named by `CATALOG_REBUILD_CONFIG` (optional for the CLI), then applies
 * `CATALOG_DATABASE_URL` over `catalogDatabaseUrl`.
 * @throws ConfigError naming the file and key when the file is unreadable, not JSON, or invalid,
 *   or when no catalog database URL is given at all.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, opts: { requireFile?: boolean } = {}): Config {
  const file = env.CATALOG_REBUILD_CONFIG;
  let raw: unknown = {};
  if (file) {
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      const where = path.isAbsolute(file) ? '' : ` (relative to the working directory ${process.cwd()})`;
      throw new ConfigError(`CATALOG_REBUILD_CONFIG: cannot read ${file}${where}: ${(err as Error).message}`);
    }
    try {
      raw = JSON.parse(text);
    } catch (err) {
      throw new ConfigError(`CATALOG_REBUILD_CONFIG: ${file} is not valid JSON: ${(err as Error).message}`);
    }
  } else if (opts.requireFile) {
    throw new ConfigError(
      'CATALOG_REBUILD_CONFIG is not set: name the JSON configuration file that defines catalogDatabaseUrl and sources',
    );
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(formatIssues(parsed.error, file ?? 'configuration'));
  const catalogDatabaseUrl = env.CATALOG_DATABASE_URL || parsed.data.catalogDatabaseUrl;
  if (!catalogDatabaseUrl) {
    throw new ConfigError(
      'catalogDatabaseUrl: no catalog database: set CATALOG_DATABASE_URL or catalogDatabaseUrl in the CATALOG_REBUILD_CONFIG file',
    );
  }
  if (!isPostgresUrl(catalogDatabaseUrl)) {
    throw new ConfigError(`CATALOG_DATABASE_URL: ${POSTGRES_URL_EXPECTED}`);
  }
  // Listing files named relative to the configuration file, wherever the worker runs.
  const base = file ? path.dirname(path.resolve(file)) : process.cwd();
  for (const source of Object.values(parsed.data.sources)) {
    if (isFileSource(source) && source.path !== undefined) source.path = path.resolve(base, source.path);
  }
  return { ...parsed.data, catalogDatabaseUrl };
}

/**
 * Looks up a named source.
 * @throws UnknownSourceError when the configuration does not define it.
 */
export function getSource(config: Config, name: string): SourceConfig {
  const s = config.sources[name];
  if (!s) throw new UnknownSourceError(name, Object.keys(config.sources));
  return s;
}

/** Task queue of the workers: `CATALOG_REBUILD_TASK_QUEUE`, default `catalog-rebuild`. */
export function taskQueue(env: NodeJS.ProcessEnv = process.env): string {
  return env.CATALOG_REBUILD_TASK_QUEUE || 'catalog-rebuild';
}

/**
 * The catalog database as errors name it (pure): `catalog database host:port/db (<setting>)`,
 * where the setting is `CATALOG_DATABASE_URL` when that variable is set, else `catalogDatabaseUrl in
 * <CATALOG_REBUILD_CONFIG file>`; no credentials.
 */
export function catalogDatabaseDescription(url: string, env: NodeJS.ProcessEnv = process.env): string {
  const setting = env.CATALOG_DATABASE_URL
    ? 'CATALOG_DATABASE_URL'
    : `catalogDatabaseUrl in ${env.CATALOG_REBUILD_CONFIG ?? 'the configuration file'}`;
  return `catalog database ${databaseLabel(url)} (${setting})`;
}

/** A database source as errors name it (pure): `source "<name>" database host:port/db (sources.<name>.databaseUrl)`. */
export function sourceDatabaseDescription(name: string, url: string): string {
  return `source "${name}" database ${databaseLabel(url)} (sources.${name}.databaseUrl)`;
}

/**
 * Removes the password from a connection URL so it can appear in logs and errors.
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}
