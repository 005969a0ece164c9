/**
 * The CLI process's own input and output: its end (after stdout and stderr have drained, so piped
 * output is never cut), a reader closing the pipe early (`| head -1`: a quiet end), and the raw
 * bytes of its arguments (Node turns bytes that are not UTF-8 into U+FFFD; Linux keeps them in
 * `/proc/self/cmdline`).
 */
import * as fs from 'node:fs';

/** Resolves once everything written to `stream` so far has been handed to the operating system. */
function drained(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || !stream.writable) return Promise.resolve();
  // Writes complete in order: the callback of an empty write runs after every earlier write.
  return new Promise((resolve) => stream.write('', () => resolve()));
}

/**
 * Ends the process with `code` once stdout and stderr have drained. `process.exit()` right after
 * the last write would drop what a pipe has not taken yet (a pipe's writes are asynchronous: a
 * slow reader got the first 64 KiB only).
 */
export function endProcess(code: number): void {
  process.exitCode = code;
  void Promise.all([drained(process.stdout), drained(process.stderr)]).then(() => process.exit(code));
}

/**
 * A reader that closes its end early (`catalog-rebuild files … | head -1`) ends the process quietly
 * with exit code 0 (EPIPE on stdout or stderr), not with a stack trace; other stream errors are
 * thrown as before.
 */
export function quietOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(0);
      throw err;
    });
  }
}

/**
 * The exact bytes of this process's arguments after the script (`process.argv.slice(2)`), read
 * from `/proc/self/cmdline`; undefined where that file does not exist (not Linux) or does not line
 * up with `process.argv`.
 */
export function rawArgv(cmdlinePath = '/proc/self/cmdline'): Buffer[] | undefined {
  let raw: Buffer;
  try {
    raw = fs.readFileSync(cmdlinePath);
  } catch {
    return undefined;
  }
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === 0) {
      parts.push(raw.subarray(start, i));
      start = i + 1;
    }
  }
  if (start < raw.length) parts.push(raw.subarray(start));
  const args = process.argv.slice(2);
  if (parts.length < args.length) return undefined;
  const tail = parts.slice(parts.length - args.length);
  // Each raw argument must decode to what Node made of it; else the two do not line up.
  return tail.every((b, i) => b.toString('utf8') === args[i]) ? tail : undefined;
}
