/** A cross-process lock on a file, for the embedded PostgreSQL's one-time setup and start. */
import * as fs from 'node:fs';

/**
 * Runs `fn` holding a cross-process lock: `file` created exclusively, holding the holder's pid; a
 * lock whose holder is gone is stale and taken over.
 * @throws Error after 120 s of waiting for a live holder.
 */
export async function withLock<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let holder = 0;
      try {
        holder = Number(fs.readFileSync(file, 'utf8')) || 0;
      } catch {
        continue; // released meanwhile
      }
      let alive = false;
      if (!holder) {
        // Just created, pid not written yet; an empty file older than 5 s is stale.
        alive = Date.now() - (fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0) < 5_000;
      } else {
        try {
          process.kill(holder, 0);
          alive = true;
        } catch (e) {
          alive = (e as NodeJS.ErrnoException).code === 'EPERM';
        }
      }
      if (!alive) {
        fs.rmSync(file, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for the lock ${file} held by process ${holder}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(file, { force: true });
  }
}
