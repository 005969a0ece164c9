/**
 * The worker thread of files-command.ts: runs a page's files commands and maps their listings to
 * COPY text ({@link listedCopyText}), posting each batch (its memory moved, not copied) and waiting
 * for the page to take it before it reads on, and each job found gone from the repository as it is
 * found; then `end`, or the error with its code.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { CommandJob, GoneNotice, ThreadMessage, ThreadSettings } from './files-command';
import { listedCopyText } from './files-command';

const port = parentPort!;
const { settings, jobs } = workerData as { settings: ThreadSettings; jobs: CommandJob[] };

/** Resolves when the page has taken the last batch. */
function taken(): Promise<void> {
  return new Promise((resolve) => port.once('message', () => resolve()));
}

void (async () => {
  let reply: ThreadMessage = { type: 'end' };
  try {
    const gone: GoneNotice = (job, message) => port.postMessage({ type: 'gone', job, message } satisfies ThreadMessage);
    for await (const batch of listedCopyText(settings, jobs, gone)) {
      // A batch owns its ArrayBuffer (files-command.ts allocates one per batch): it is moved.
      const m: ThreadMessage = {
        type: 'data',
        buffer: batch.buffer as ArrayBuffer,
        offset: batch.byteOffset,
        length: batch.length,
      };
      port.postMessage(m, [m.buffer]);
      await taken();
    }
  } catch (err) {
    reply = { type: 'error', message: (err as Error).message, code: (err as { code?: string }).code };
  }
  port.postMessage(reply);
})();
