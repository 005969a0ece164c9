/**
 * A source's command (a listing command, a files command) in a process group of its own, so that
 * a timeout or a cancellation ends it and everything it started, whatever signals it ignores.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import type { Readable } from 'node:stream';

/** A command started by {@link spawnInGroup}. */
export interface GroupedCommand {
  /** The process (standard output and error piped). */
  child: ChildProcess & { stdout: Readable; stderr: Readable };
  /** Sends SIGKILL to the command's whole process group (nothing when it is gone). */
  killGroup: () => void;
}

/**
 * Starts `argv` (no shell) in a new process group. With `endWithParent`, the command runs under
 * command-watchdog.js, which ends the group should this process die (its standard input closes);
 * a command that cannot start then exits 127 instead of failing to spawn.
 */
export function spawnInGroup(argv: string[], opts: { endWithParent?: boolean } = {}): GroupedCommand {
  const [cmd, ...args] = opts.endWithParent
    ? [process.execPath, path.join(__dirname, 'command-watchdog.js'), ...argv]
    : argv;
  const child = spawn(cmd, args, {
    stdio: [opts.endWithParent ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    detached: true,
    windowsHide: true,
  }) as GroupedCommand['child'];
  const killGroup = () => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  };
  return { child, killGroup };
}
