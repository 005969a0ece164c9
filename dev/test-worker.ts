/**
 * Entrypoint of the workers that tests spawn: the production worker (`createWorker`, as
 * worker/main.ts runs it) with page hooks built from `CATALOG_REBUILD_FAULTS`, a JSON object:
 * - `slowPage: { pageNo, ms }`: attempt 1 of page `pageNo` sleeps `ms` (pg_sleep) inside its page
 *   transaction, after the version fence, before its rows are written;
 * - `holdAfterRead: { pageNo, attempt, heldFile, releaseFile }`: that attempt of page `pageNo`,
 *   after reading its rows, writes its process id to `heldFile` and waits until `releaseFile` exists.
 * Without the variable it is the production worker. Production runs worker/main.ts.
 */
import * as fs from 'node:fs';
import type { PoolClient } from 'pg';
import type { PageAttempt, PageHooks } from '../activities';
import { createWorker } from '../worker';

/** The faults a test may ask for (`CATALOG_REBUILD_FAULTS`). */
export interface Faults {
  /** Sleep this long (ms) inside one SQL statement of the page transaction of `pageNo` (first attempt only). */
  slowPage?: { pageNo: number; ms: number };
  /** Hold an attempt of `pageNo` after it read its rows until the file `releaseFile` exists; create `heldFile` while held. */
  holdAfterRead?: { pageNo: number; attempt: number; heldFile: string; releaseFile: string };
}

/** The page hooks that implement `faults`. */
export function faultHooks(faults: Faults): PageHooks {
  const { slowPage, holdAfterRead } = faults;
  return {
    async afterRead(page: PageAttempt) {
      if (!holdAfterRead || holdAfterRead.pageNo !== page.pageNo || holdAfterRead.attempt !== page.attempt) return;
      fs.writeFileSync(holdAfterRead.heldFile, String(process.pid));
      while (!fs.existsSync(holdAfterRead.releaseFile)) await new Promise((r) => setTimeout(r, 100));
    },
    async insideTransaction(page: PageAttempt, db: PoolClient) {
      if (!slowPage || slowPage.pageNo !== page.pageNo || page.attempt !== 1) return;
      await db.query('SELECT pg_sleep($1)', [slowPage.ms / 1000]);
    },
  };
}

async function main(): Promise<void> {
  const faults: Faults | undefined = process.env.CATALOG_REBUILD_FAULTS
    ? (JSON.parse(process.env.CATALOG_REBUILD_FAULTS) as Faults)
    : undefined;
  const w = await createWorker(process.env, { hooks: faults ? faultHooks(faults) : undefined });
  console.log(`catalog-rebuild worker ${process.pid} polling task queue ${w.worker.options.taskQueue}`);
  await w.run();
}

main().catch((err) => {
  console.error(`catalog-rebuild worker: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
