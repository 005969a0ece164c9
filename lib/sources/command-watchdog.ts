/**
 * Runs a source's command (argv after the script's own) as its child, in the process group it
 * leads, and ends that whole group when its standard input closes: the worker that started it has
 * died (SIGKILL, OOM), so no `restic ls` or `borg list` it left behind keeps running or holds a
 * repository lock. Exits with the command's status (128 + signal number when a signal ended it);
 * a command that cannot start exits 127 saying why on standard error.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';

const [cmd, ...args] = process.argv.slice(2);
const endGroup = () => {
  try {
    process.kill(-process.pid, 'SIGKILL');
  } catch {
    process.exit(137);
  }
};
const child = spawn(cmd, args, { stdio: ['ignore', 'inherit', 'inherit'] });
child.once('error', (e) => {
  process.stderr.write(`cannot be run: ${e.message}\n`);
  process.exit(127);
});
child.once('exit', (code, signal) => {
  process.exit(code ?? 128 + ((signal && constants.signals[signal]) || 0));
});
process.stdin.once('end', endGroup);
process.stdin.once('error', endGroup);
process.stdin.resume();
