/** Entrypoint: `npm run worker`. Exits 1 with a message naming the fix on bad configuration. */
import { createWorker } from './index';
import { heapCeilingBytes, startHeapCeiling } from './heap-ceiling';

async function main(): Promise<void> {
  const growthBytes = heapCeilingBytes();
  const w = await createWorker();
  // Holds the main thread's heap near its live size between V8's own full collections (heap-ceiling.ts).
  const stopCeiling = growthBytes > 0 ? startHeapCeiling({ growthBytes }) : () => undefined;
  console.log(
    `catalog-rebuild worker ${process.pid} polling task queue ${w.worker.options.taskQueue} as build ${w.build.buildId} of deployment ${w.build.deploymentName}`,
  );
  try {
    await w.run();
  } finally {
    stopCeiling();
  }
}

main().catch((err) => {
  console.error(`catalog-rebuild worker: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
