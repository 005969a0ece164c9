/**
 * CPU time and memory of the processes a variant uses, read from /proc (Linux): process trees
 * (workers, the CLI, the Temporal server), the bench process itself and PostgreSQL backends by
 * database and application name.
 */
import * as fs from 'node:fs';
import type { Pool } from 'pg';

/** Peak and current resident set of a process (kB), from /proc/<pid>/status. */
export function memoryOf(pid: number): { hwmKb: number; rssKb: number } | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN);
    return { hwmKb: kb('VmHWM'), rssKb: kb('VmRSS') };
  } catch {
    return null;
  }
}

const CLK_TCK = 100; // Linux USER_HZ

/** Fields of /proc/<pid>/stat from field 3 (state) on, or null when the process is gone. */
function statFields(pid: number | string): string[] | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/**
 * CPU time (ms) of one process: utime + stime of the process itself (its reaped children are not
 * added: a tree's members are sampled one by one, and adding cutime would count them twice).
 */
function cpuMsOf(pid: number): number | null {
  const f = statFields(pid);
  return f ? ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK : null;
}

/** Parent and process group of every process, read once. */
function processTable(): Map<number, { ppid: number; pgid: number }> {
  const out = new Map<number, { ppid: number; pgid: number }>();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const f = statFields(e);
    if (f) out.set(Number(e), { ppid: Number(f[1]), pgid: Number(f[2]) });
  }
  return out;
}

/**
 * The process tree of `root`: every process of its process group (a detached child and what it
 * started) and every descendant by parent pid (one that moved to another group included).
 */
export function treePids(root: number, table = processTable()): number[] {
  const out = new Set<number>();
  for (const [pid, p] of table) if (p.pgid === root || pid === root) out.add(pid);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, p] of table)
      if (!out.has(pid) && out.has(p.ppid)) {
        out.add(pid);
        grew = true;
      }
  }
  return [...out];
}

/** Which PostgreSQL backends a label counts: by database, optionally by application name. */
export interface BackendClass {
  label: string;
  datname: string;
  /** Only backends whose application_name starts with this. */
  appPrefix?: string;
  /** Backends whose application_name starts with one of these are not counted. */
  excludeAppPrefixes?: string[];
}

/** Memory of one process tree over a run (kB). */
export interface TreeMemory {
  /** Sum over every process ever seen in the tree of its highest VmHWM reading. */
  hwmSumKb: number;
  /** Highest sum of VmRSS over the tree in one sample, and when (epoch ms). */
  rssSumMaxKb: number;
  rssSumMaxAt: number;
  /** Sum of VmRSS over the tree at the first sample. */
  rssSumStartKb: number;
  /** Processes ever seen in the tree. */
  processes: number;
}

/**
 * CPU time by component while a variant runs: process trees by label (workers, CLI, Temporal
 * server), the bench process itself, and PostgreSQL backends by database and application name
 * (found in pg_stat_activity every 200 ms; a backend's last sample counts, since it cannot be read
 * once gone). Also the memory of chosen process trees over time (VmHWM of each process and the
 * sum of VmRSS, every 200 ms).
 */
export class CpuSampler {
  private readonly first = new Map<string, number>();
  private readonly last = new Map<string, number>();
  private readonly kind = new Map<string, string>();
  private timer?: NodeJS.Timeout;
  private sampling?: Promise<void>;
  private readonly selfStart = process.cpuUsage();
  private readonly hwm = new Map<number, Map<number, number>>();
  readonly memory = new Map<number, TreeMemory>();
  /** Cumulative CPU ms by label at each sample, to split a run at a point in time. */
  readonly timeline: { t: number; totals: Record<string, number> }[] = [];

  /**
   * @param trees process-tree roots by label (CPU of every process in each tree).
   * @param memoryRoots roots of the process trees whose memory is followed.
   */
  constructor(
    private readonly admin: Pool,
    private readonly trees: Record<string, number[]>,
    private readonly backends: BackendClass[],
    private readonly memoryRoots: number[] = [],
  ) {}

  /** Adds a process tree to a label while sampling (e.g. a process started after `start`). */
  addTree(label: string, root: number): void {
    (this.trees[label] ??= []).push(root);
  }

  private classify(datname: string, app: string): BackendClass | undefined {
    return this.backends.find(
      (b) =>
        b.datname === datname &&
        (b.appPrefix === undefined || app.startsWith(b.appPrefix)) &&
        !(b.excludeAppPrefixes ?? []).some((x) => app.startsWith(x)),
    );
  }

  async sampleOnce(): Promise<void> {
    const table = processTable();
    const seen: [string, string, number][] = [];
    for (const [label, roots] of Object.entries(this.trees))
      for (const root of roots) for (const pid of treePids(root, table)) seen.push([`p${pid}`, label, pid]);
    if (this.backends.length) {
      const { rows } = await this.admin.query<{ pid: number; datname: string; app: string }>(
        `SELECT pid, datname, coalesce(application_name, '') AS app FROM pg_stat_activity WHERE datname = ANY($1::text[])`,
        [[...new Set(this.backends.map((b) => b.datname))]],
      );
      for (const r of rows) {
        const b = this.classify(r.datname, r.app);
        if (b) seen.push([`b${r.pid}`, b.label, r.pid]);
      }
    }
    for (const [key, label, pid] of seen) {
      const ms = cpuMsOf(pid);
      if (ms === null) continue;
      // A process or backend first seen while sampling started during the run: all its CPU counts.
      if (!this.first.has(key)) this.first.set(key, this.timer ? 0 : ms);
      this.last.set(key, ms);
      this.kind.set(key, label);
    }
    if (this.timer) this.timeline.push({ t: Date.now(), totals: this.totals() });
    for (const root of this.memoryRoots) this.sampleMemory(root, table);
  }

  private sampleMemory(root: number, table: Map<number, { ppid: number; pgid: number }>): void {
    const hwm = this.hwm.get(root) ?? new Map<number, number>();
    this.hwm.set(root, hwm);
    let rssSum = 0;
    let any = false;
    for (const pid of treePids(root, table)) {
      const m = memoryOf(pid);
      if (!m || !Number.isFinite(m.hwmKb)) continue; // gone, or a zombie
      any = true;
      hwm.set(pid, Math.max(hwm.get(pid) ?? 0, m.hwmKb));
      rssSum += m.rssKb;
    }
    if (!any) return;
    const hwmSumKb = [...hwm.values()].reduce((a, b) => a + b, 0);
    const prev = this.memory.get(root);
    if (!prev)
      this.memory.set(root, {
        hwmSumKb,
        rssSumMaxKb: rssSum,
        rssSumMaxAt: Date.now(),
        rssSumStartKb: rssSum,
        processes: hwm.size,
      });
    else {
      prev.hwmSumKb = hwmSumKb;
      prev.processes = hwm.size;
      if (rssSum > prev.rssSumMaxKb) Object.assign(prev, { rssSumMaxKb: rssSum, rssSumMaxAt: Date.now() });
    }
  }

  async start(): Promise<void> {
    await this.sampleOnce(); // baselines of what already runs
    this.timer = setInterval(() => {
      if (!this.sampling)
        this.sampling = this.sampleOnce()
          .catch(() => undefined)
          .finally(() => (this.sampling = undefined));
    }, 200);
  }

  private totals(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const label of [...Object.keys(this.trees), ...this.backends.map((b) => b.label)]) out[label] = 0;
    for (const [key, label] of this.kind) out[label] = (out[label] ?? 0) + (this.last.get(key)! - this.first.get(key)!);
    const self = process.cpuUsage(this.selfStart);
    out.bench = (self.user + self.system) / 1000;
    return out;
  }

  /** CPU ms by label from the start to the last sample at or before `t` (epoch ms). */
  totalsAt(t: number): Record<string, number> {
    let best: Record<string, number> = {};
    for (const x of this.timeline) if (x.t <= t) best = x.totals;
    return best;
  }

  /** CPU ms by label (plus `bench` for this process). */
  async stop(): Promise<Record<string, number>> {
    await this.sampling;
    await this.sampleOnce();
    clearInterval(this.timer);
    this.timer = undefined;
    return this.totals();
  }
}

/** `label a.b s (x%)` for each component, largest first. */
export function cpuText(cpu: Record<string, number>, rows: number): string {
  const total = Object.values(cpu).reduce((a, b) => a + b, 0);
  const parts = Object.entries(cpu)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s (${total > 0 ? ((v / total) * 100).toFixed(0) : 0}%)`);
  return `${(total / 1000).toFixed(1)} CPU s = ${((total / rows) * 1000).toFixed(1)} CPU µs per row: ${parts.join(', ')}`;
}

/**
 * The component with the most CPU among `components` (by default every label but `bench`, the
 * measuring process), and its share of their total.
 */
export function dominant(cpu: Record<string, number>, components?: string[]): { label: string; share: number } {
  const entries = Object.entries(cpu).filter(([k]) => (components ? components.includes(k) : k !== 'bench'));
  const total = entries.reduce((a, [, v]) => a + v, 0);
  const [label, v] = entries.sort((a, b) => b[1] - a[1])[0] ?? ['none', 0];
  return { label, share: total > 0 ? v / total : 0 };
}
