/**
 * A preload for the bench's worker processes that samples the main thread's allocations with
 * V8's sampling heap profiler, keeping objects that a scavenge promoted and a later full GC
 * collected (`includeObjectsCollectedByMajorGC`): the garbage that makes the old generation, and the
 * worker's RSS, grow between full GCs. Every 10 s it writes the profile so far (a `.heapprofile`,
 * which Chrome DevTools opens) to `CATALOG_REBUILD_HEAP_PROFILE`, and a summary of the allocation
 * sites by bytes to the same path + `.txt`. Use it with `npm run bench -- --worker-node-options="--require
 * <this file, compiled>"` and that variable in the bench's environment.
 */
import * as fs from 'node:fs';
import { Session } from 'node:inspector';
import { isMainThread } from 'node:worker_threads';

interface Node {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: Node[];
}

/** Bytes per allocation site (function, file, line), with the two callers above it. */
function summary(head: Node): string {
  const sites = new Map<string, number>();
  const walk = (n: Node, path: string[]) => {
    const f = n.callFrame;
    const here = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*node_modules\//, '')}:${f.lineNumber + 1}`;
    const p = [...path, here];
    if (n.selfSize) {
      const key = p.slice(-3).reverse().join(' < ');
      sites.set(key, (sites.get(key) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c, p);
  };
  walk(head, []);
  return [...sites.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 40)
    .map(([k, v]) => `${(v / 1048576).toFixed(1)} MB  ${k}`)
    .join('\n');
}

const out = process.env.CATALOG_REBUILD_HEAP_PROFILE;
if (out && isMainThread) {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.enable', () =>
    session.post(
      'HeapProfiler.startSampling',
      { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: false },
      () => undefined,
    ),
  );
  const timer = setInterval(() => {
    session.post('HeapProfiler.getSamplingProfile', (err, r) => {
      if (err || !r) return;
      fs.writeFileSync(out, JSON.stringify(r.profile));
      fs.writeFileSync(`${out}.txt`, summary(r.profile.head as unknown as Node));
    });
  }, 10_000);
  timer.unref();
}
