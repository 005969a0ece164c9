/**
 * A source's command (a listing command, a files command) in a process group of its own, so that
 * a timeout or a cancellation ends it and everything it started, whatever signals it ignores.
 */
import type { ChildProcessByStdio } from 'node:child_process';
import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';

/** A command started by {@link spawnInGroup}. */
export interface GroupedCommand {
  /** The process: standard input ignored, standard output and error piped. */
  child: ChildProcessByStdio<null, Readable, Readable>;
  /** Sends SIGKILL to the command's whole process group (nothing when it is gone). */
  killGroup: () => void;
}

/** Starts `argv` (no shell) as the leader of a new process group. */
export function spawnInGroup(argv: string[]): GroupedCommand {
  const [cmd, ...args] = argv;
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, windowsHide: true });
  const killGroup = () => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  };
  return { child, killGroup };
}
