/**
 * A ceiling on the growth of the worker's main-thread heap between full garbage collections.
 *
 * Every page leaves objects that outlive a scavenge: the COPY chunks waiting for the catalog, the
 * page's figures and its digest maps, about 740 KB a page. V8 collects them only in a full
 * collection. With Node's default heap limit (4 GB on a machine of 16 GB or more), V8 lets the old
 * generation grow to up to 4 times the live heap first. At 10^7 jobs, the worker's RSS then went up
 * and down between about 250 and 321 MB, depending on where the last full collection fell.
 *
 * A smaller heap limit (`--max-old-space-size=1024`) held that run to 243 MB. But it made V8 collect
 * nine times as often, and the worker used 40–60 % more CPU (docs/performance.md). This ceiling
 * instead asks for one full collection whenever the heap outside the young generation has grown by
 * `growthBytes` since the last one. In a 10^7-job rebuild, the main thread then ran 56 full
 * collections against 12 without the ceiling, V8 adding its own after each forced one. The worker
 * used about 3 CPU s more and peaked at 260 MB against 290 MB (docs/performance.md).
 */
import * as v8 from 'node:v8';
import * as vm from 'node:vm';

/** What the ceiling reads and does; the defaults are V8's. */
export interface HeapCeilingDeps {
  /** Bytes of the heap in use now, outside the young generation (default: {@link oldHeapUsed}). */
  usedHeap: () => number;
  /** Runs a full, synchronous garbage collection (default: V8's `gc`, exposed for this). */
  collect: () => void;
}

/** The ceiling's settings. */
export interface HeapCeilingOptions {
  /** Growth of the heap's use outside the young generation (bytes) since the last full collection that triggers one; default 32 MiB. */
  growthBytes?: number;
  /** How often the used heap is read (ms); default 1,000. */
  everyMs?: number;
  /** Called after each collection this ceiling ran: the use it read (bytes) before and after it. */
  onCollect?: (before: number, after: number) => void;
}

/** Default growth of the used heap (bytes) that triggers a full collection. */
export const HEAP_CEILING_GROWTH_BYTES = 32 * 1024 * 1024;

/**
 * The ceiling's growth (bytes) from `CATALOG_REBUILD_HEAP_CEILING_MB`: a whole number of MiB, 0 for
 * no ceiling (V8's own collections only); unset or empty, {@link HEAP_CEILING_GROWTH_BYTES}.
 * @throws Error naming the variable when it is not a non-negative whole number.
 */
export function heapCeilingBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.CATALOG_REBUILD_HEAP_CEILING_MB;
  if (raw === undefined || raw.trim() === '') return HEAP_CEILING_GROWTH_BYTES;
  if (!/^\d+$/.test(raw.trim()))
    throw new Error(
      `CATALOG_REBUILD_HEAP_CEILING_MB must be a whole number of MiB (0: no ceiling), not ${JSON.stringify(raw)}`,
    );
  return Number(raw.trim()) * 1024 * 1024;
}

/** V8's spaces of the young generation: they fill and empty many times a second as objects are allocated. */
const YOUNG_SPACES = new Set(['new_space', 'new_large_object_space']);

/**
 * Bytes in use in V8's spaces outside the young generation: what survived scavenges and waits
 * for a full collection. The whole heap's use is no measure of that: the young generation (up to
 * 32 MiB here) fills and empties between two readings. Counting it made a first version collect
 * every second or so: 103 full collections in a 10^7-job rebuild, against 12 of V8's own.
 */
export function oldHeapUsed(): number {
  let used = 0;
  for (const s of v8.getHeapSpaceStatistics()) if (!YOUNG_SPACES.has(s.space_name)) used += s.space_used_size;
  return used;
}

/**
 * V8's full collection, made callable without `--expose-gc` on the command line: the flag is set,
 * and a fresh context hands out its `gc` function (as Jest's leak detector does).
 */
function v8Collect(): () => void {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  return () => gc();
}

/**
 * Starts reading the heap's use outside the young generation every `everyMs`. When it has grown
 * by `growthBytes` or more since the lowest reading after the last collection, it runs one full
 * collection. The timer does not keep
 * the process alive.
 * @returns a function that stops the ceiling.
 */
export function startHeapCeiling(o: HeapCeilingOptions = {}, deps?: Partial<HeapCeilingDeps>): () => void {
  const growth = o.growthBytes ?? HEAP_CEILING_GROWTH_BYTES;
  const usedHeap = deps?.usedHeap ?? oldHeapUsed;
  const collect = deps?.collect ?? v8Collect();
  let base = usedHeap();
  const timer = setInterval(() => {
    const used = usedHeap();
    if (used < base) base = used;
    if (used - base < growth) return;
    collect();
    base = usedHeap();
    o.onCollect?.(used, base);
  }, o.everyMs ?? 1_000);
  timer.unref();
  return () => clearInterval(timer);
}
