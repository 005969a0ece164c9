/**
 * The demo's hand-over: the environment that lets `catalog-rebuild status`, `check`, `events` and
 * `start` reach the demo's catalog from any directory, printed as `export` lines a user pastes into
 * a shell, the commands to try next, and the backup check the demo runs with that environment.
 */
import { spawnSync } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';

/** Temporal addresses a client uses when `TEMPORAL_ADDRESS` is unset (the CLI's default, localhost:7233). */
const DEFAULT_TEMPORAL_ADDRESSES = ['localhost:7233', '127.0.0.1:7233'];

/** What the hand-over names. */
export interface HandoverOptions {
  /** Absolute path of the demo's configuration file (`.data/demo-config.json`). */
  configFile: string;
  /** Task queue of the demo's workers. */
  taskQueue: string;
  /** Worker Deployment of the demo's workers (exported as `CATALOG_REBUILD_DEPLOYMENT` when given). */
  deploymentName?: string;
  /** The demo's databases, named in the hand-over when given. */
  databases?: { catalog: string; source: string };
  /** `host:port` of the Temporal frontend the demo used. */
  temporalAddress: string;
  /** Absolute path of the project (the folder holding `bin/catalog-rebuild.js`). */
  projectRoot: string;
  /** Catalog name the commands to try name. */
  catalog: string;
  /** The demo rebuilt file records (`--files`): the commands to try include `find`. */
  files?: boolean;
  /**
   * Variables set in the user's environment that would override the hand-over (a
   * `CATALOG_DATABASE_URL`, `TEMPORAL_*` settings of another service); see {@link shadowingVariables}.
   */
  shadowing?: string[];
}

/**
 * A word for a POSIX shell: as is when it holds only characters no shell interprets, else in
 * single quotes (a single quote inside becomes `'\''`).
 */
export function shellWord(s: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** `s` in single quotes for a POSIX shell, whatever it holds. */
function quoted(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * The variables a shell needs for the CLI to reach the demo: `CATALOG_REBUILD_CONFIG` (absolute),
 * `CATALOG_REBUILD_TASK_QUEUE`, `CATALOG_REBUILD_DEPLOYMENT` when the options name a deployment (a
 * worker started in that shell then joins the demo's deployment), and `TEMPORAL_ADDRESS` only when
 * the server is not on the default address (localhost:7233 or 127.0.0.1:7233).
 * @throws Error when `configFile` is not absolute (it would only work from the project folder).
 */
export function handoverEnv(o: HandoverOptions): Record<string, string> {
  if (!path.isAbsolute(o.configFile)) throw new Error(`the configuration file must be absolute: ${o.configFile}`);
  const env: Record<string, string> = {
    CATALOG_REBUILD_CONFIG: o.configFile,
    CATALOG_REBUILD_TASK_QUEUE: o.taskQueue,
  };
  if (o.deploymentName) env.CATALOG_REBUILD_DEPLOYMENT = o.deploymentName;
  if (!DEFAULT_TEMPORAL_ADDRESSES.includes(o.temporalAddress)) env.TEMPORAL_ADDRESS = o.temporalAddress;
  return env;
}

/**
 * Names of the variables of `env` that would make the CLI ignore or bypass the hand-over: a
 * non-empty `CATALOG_DATABASE_URL` (it overrides the configuration's catalog database) and
 * `TEMPORAL_*` settings (address, namespace, API key, TLS, profile) other than `TEMPORAL_CLI_PATH`
 * and those `exported` sets itself.
 */
export function shadowingVariables(env: NodeJS.ProcessEnv, exported: Record<string, string>): string[] {
  return Object.keys(env)
    .filter((k) => env[k] && !(k in exported))
    .filter((k) => k === 'CATALOG_DATABASE_URL' || (k.startsWith('TEMPORAL_') && k !== 'TEMPORAL_CLI_PATH'))
    .sort();
}

/**
 * The environment of a process that uses the CLI as the user will after pasting the hand-over:
 * `base` without the shadowing variables, plus the hand-over's variables.
 */
export function handoverProcessEnv(base: NodeJS.ProcessEnv, o: HandoverOptions): NodeJS.ProcessEnv {
  const exported = handoverEnv(o);
  const env: NodeJS.ProcessEnv = { ...base };
  for (const k of shadowingVariables(base, exported)) delete env[k];
  return { ...env, ...exported };
}

/** The command that runs the CLI from any directory (the project's `bin/catalog-rebuild.js`). */
export function cliCommand(projectRoot: string): string {
  return `node ${shellWord(path.join(projectRoot, 'bin', 'catalog-rebuild.js'))}`;
}

/**
 * The hand-over block of the demo's summary (pure): a heading, the `export` lines (the
 * configuration file's path always single-quoted), an `unset` line for shadowing variables, and
 * the commands to try next. Lines are indented with spaces and carry no colour codes; only the
 * `export` lines start (after the indentation) with `export`.
 */
export function handoverLines(o: HandoverOptions): string[] {
  const env = handoverEnv(o);
  const lines = [
    '',
    "This checkout's demo (its names carry a hash of the checkout's path)",
    `    catalog         ${o.catalog}`,
    `    task queue      ${o.taskQueue}`,
  ];
  if (o.databases)
    lines.push(`    catalog db      ${o.databases.catalog}`, `    source db       ${o.databases.source}`);
  lines.push('', 'Next: paste these lines into any shell to reach the demo from any directory');
  for (const [k, v] of Object.entries(env)) {
    lines.push(`    export ${k}=${k === 'CATALOG_REBUILD_CONFIG' ? quoted(v) : shellWord(v)}`);
  }
  if (o.shadowing?.length) lines.push(`    unset ${o.shadowing.join(' ')}`);
  const cli = cliCommand(o.projectRoot);
  const catalog = shellWord(o.catalog);
  lines.push(
    '  then try',
    `    ${cli} status --catalog ${catalog}`,
    `    ${cli} check --catalog ${catalog}`,
    `    ${cli} events --catalog ${catalog}`,
  );
  if (o.files) lines.push(`    ${cli} find --catalog ${catalog} --path /etc/hosts --limit 5`);
  return lines;
}

/** The backup check's answer: its exit code (Nagios: 0 OK) and its status line. */
export interface CheckAnswer {
  code: number | null;
  line: string;
}

/**
 * Runs `catalog-rebuild check --catalog <catalog>` as a child process in the system's temporary
 * folder with {@link handoverProcessEnv}, as a user would after pasting the hand-over.
 * @returns the exit code (null when it was killed after `timeoutMs`) and the first line it printed
 *   (stdout, else stderr).
 */
export function runHandoverCheck(o: HandoverOptions, timeoutMs = 60_000): CheckAnswer {
  const r = spawnSync(
    process.execPath,
    [path.join(o.projectRoot, 'bin', 'catalog-rebuild.js'), 'check', '--catalog', o.catalog],
    { cwd: os.tmpdir(), env: handoverProcessEnv(process.env, o), encoding: 'utf8', timeout: timeoutMs },
  );
  const first = (s: string | null | undefined) => (s ?? '').split('\n').find((l) => l.trim()) ?? '';
  return { code: r.status, line: first(r.stdout) || first(r.stderr) || `(no output; ${r.error?.message ?? 'killed'})` };
}
