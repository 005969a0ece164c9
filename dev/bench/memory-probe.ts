/**
 * A preload for the bench's worker processes that prints, every second, the process's memory as
 * Node.js reports it: `memory <epoch ms> rss=… heapTotal=… heapUsed=… external=… arrayBuffers=…`
 * (MB). The main thread's V8 heap only; `rss` covers every thread (the workflow thread's heap) and
 * the SDK's native core. Use it with `npm run bench -- --worker-node-options="--require
 * <this file, compiled>" --worker-log <file>`. The timer does not hold the process open.
 */
const mb = (bytes: number) => (bytes / 1048576).toFixed(1);

const timer = setInterval(() => {
  const m = process.memoryUsage();
  console.log(
    `memory ${Date.now()} rss=${mb(m.rss)} heapTotal=${mb(m.heapTotal)} heapUsed=${mb(m.heapUsed)} external=${mb(m.external)} arrayBuffers=${mb(m.arrayBuffers)}`,
  );
}, 1000);
timer.unref();
