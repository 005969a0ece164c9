import { Context } from '@temporalio/activity';

/**
 * Runs `fn` while a timer heartbeats every heartbeat timeout / 4 (at least every 250 ms,
 * 2,500 ms when the activity has no heartbeat timeout), so one long SQL statement or a slow
 * source read keeps the activity's lease. `details()` supplies the progress hint sent with each
 * heartbeat (for humans only: a retried page starts again at its first key).
 */
export async function withHeartbeat<T>(details: () => unknown, fn: () => Promise<T>): Promise<T> {
  const ctx = Context.current();
  const timeoutMs = ctx.info.heartbeatTimeoutMs;
  const everyMs = timeoutMs ? Math.max(250, Math.floor(timeoutMs / 4)) : 2_500;
  ctx.heartbeat(details());
  const timer = setInterval(() => ctx.heartbeat(details()), everyMs);
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}
