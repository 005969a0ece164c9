/**
 * Entrypoint of the workers that tests spawn: the production worker (`createWorker`, as
 * worker/main.ts runs it) with page hooks built from `CATALOG_REBUILD_FAULTS`, a JSON object:
 * - `slowPage: { pageNo, ms }`: attempt 1 of page `pageNo` sleeps `ms` (pg_sleep) inside its page
 *   transaction, after its rows are written, before it commits;
 * - `holdAfterRead: { pageNo, attempt, heldFile, releaseFile }`: that attempt of page `pageNo`,
 *   after reading its rows, writes its process id to `heldFile` and waits until `releaseFile` exists;
 * - `holdWhileStreaming: { pageNo, attempt, heldFile, releaseFile }`: the same, in the middle of a
 *   streamed page (its transaction open, the catalog COPY started, its first rows read from the source).
 * Without the variable it is the production worker. Production runs worker/main.ts.
 * `CATALOG_REBUILD_TEST_WORKFLOW_BUNDLE` names another workflow bundle to run (a recorded release's,
 * `.js` or `.js.gz`), as a worker of that release would.
 */
import * as fs from 'node:fs';
import { gunzipSync } from 'node:zlib';
import type { PoolClient } from 'pg';
import type { PageAttempt, PageHooks } from '../activities';
import { createWorker } from '../worker';

/** The faults a test may ask for (`CATALOG_REBUILD_FAULTS`). */
export interface Faults {
  /** Sleep this long (ms) inside one SQL statement of the page transaction of `pageNo` (first attempt only). */
  slowPage?: { pageNo: number; ms: number };
  /** Hold an attempt of `pageNo` after it read its rows until the file `releaseFile` exists; create `heldFile` while held. */
  holdAfterRead?: Hold;
  /** Hold an attempt of `pageNo` in the middle of its streamed rows, as for `holdAfterRead`. */
  holdWhileStreaming?: Hold;
}

/** Which attempt to hold, and the files that tell it is held and release it. */
export interface Hold {
  pageNo: number;
  attempt: number;
  heldFile: string;
  releaseFile: string;
}

/** Holds `page` when it is the attempt `hold` names: writes `heldFile`, waits for `releaseFile`. */
async function holdIf(hold: Hold | undefined, page: PageAttempt): Promise<void> {
  if (!hold || hold.pageNo !== page.pageNo || hold.attempt !== page.attempt) return;
  fs.writeFileSync(hold.heldFile, String(process.pid));
  while (!fs.existsSync(hold.releaseFile)) await new Promise((r) => setTimeout(r, 100));
}

/** The page hooks that implement `faults`. */
export function faultHooks(faults: Faults): PageHooks {
  const { slowPage, holdAfterRead, holdWhileStreaming } = faults;
  return {
    afterRead: (page: PageAttempt) => holdIf(holdAfterRead, page),
    whileStreaming: (page: PageAttempt) => holdIf(holdWhileStreaming, page),
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
  const bundleFile = process.env.CATALOG_REBUILD_TEST_WORKFLOW_BUNDLE;
  const bundle = bundleFile ? fs.readFileSync(bundleFile) : undefined;
  const workflowCode = bundle && (bundleFile!.endsWith('.gz') ? gunzipSync(bundle) : bundle).toString('utf8');
  const w = await createWorker(process.env, { hooks: faults ? faultHooks(faults) : undefined, workflowCode });
  console.log(
    `catalog-rebuild worker ${process.pid} polling task queue ${w.worker.options.taskQueue} as build ${w.build.buildId} of deployment ${w.build.deploymentName}`,
  );
  await w.run();
}

main().catch((err) => {
  console.error(`catalog-rebuild worker: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
