/** Entrypoint: `npm run worker`. Exits 1 with a message naming the fix on bad configuration. */
import { createWorker } from './index';

async function main(): Promise<void> {
  const w = await createWorker();
  console.log(
    `catalog-rebuild worker ${process.pid} polling task queue ${w.worker.options.taskQueue} as build ${w.build.buildId} of deployment ${w.build.deploymentName}`,
  );
  await w.run();
}

main().catch((err) => {
  console.error(`catalog-rebuild worker: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
