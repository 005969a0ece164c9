/**
 * Waiting in tests, benches and the demo: polling a condition with a deadline, a promise with a
 * deadline, and a plain pause (only where the pause itself is the point, e.g. "nothing happens for 2 s").
 */

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Options of {@link waitFor}. */
export interface WaitOptions {
  /** Give up after this long (ms, default 60,000). */
  timeoutMs?: number;
  /** Pause between two calls of the condition (ms, default 50). */
  intervalMs?: number;
  /** A call that throws ends the wait with its error (default: it counts as "not yet"). */
  rethrow?: boolean;
  /** What to add to the timeout's message (e.g. a process's output), read when the wait gives up. */
  detail?: () => string;
}

/**
 * Calls `fn` every `intervalMs` until it returns a value other than undefined, null or false, and
 * returns that value. A call that throws counts as "not yet" (its error is named on timeout), unless
 * `rethrow` is set.
 * @throws Error `timed out after <ms> ms waiting for <what>` (with the last error and `detail()`) after `timeoutMs`.
 */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  opts: WaitOptions = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== null && v !== false) return v;
    } catch (err) {
      if (opts.rethrow) throw err;
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ''}` +
          (opts.detail ? `\n${opts.detail()}` : ''),
      );
    }
    await sleep(opts.intervalMs ?? 50);
  }
}

/** `p`'s value, or the string 'timeout' after `ms` milliseconds (the timer never outlives the race). */
export async function within<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `p`'s value or rejection; after `ms` milliseconds instead an Error whose message is `message()`
 * (called only then, so it can describe the state at that moment).
 */
export async function withDeadline<T>(p: Promise<T>, ms: number, message: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message())), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
