/**
 * CPU time and memory of the processes a variant uses, read from /proc (Linux): process groups
 * (worker, Temporal server), the bench process itself and PostgreSQL backends by database and
 * application name.
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

/** CPU time (ms) of one process (utime + stime + reaped children), or null when it is gone. */
function cpuMsOf(pid: number): number | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' '); // fields from 3 (state) on
    return ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / CLK_TCK;
  } catch {
    return null;
  }
}

/** Pids of a process group (a detached child and everything it started). */
function groupPids(pgid: number): number[] {
  const out: number[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const s = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      if (Number(f[2]) === pgid) out.push(Number(e));
    } catch {
      /* gone */
    }
  }
  return out;
}

/**
 * CPU time by component while a variant runs: process groups (worker, Temporal server), the bench
 * process itself, and PostgreSQL backends of given databases and application names (found in
 * pg_stat_activity every 200 ms; a backend's last sample counts, since it cannot be read once gone).
 * Also the peak RSS of chosen pids over time.
 */
export class CpuSampler {
  private readonly first = new Map<string, number>();
  private readonly last = new Map<string, number>();
  private readonly kind = new Map<string, string>();
  private timer?: NodeJS.Timeout;
  private sampling?: Promise<void>;
  private readonly selfStart = process.cpuUsage();
  readonly rss = new Map<number, { startKb: number; peakKb: number; maxRssKb: number; maxRssAt: number }>();
  /** Cumulative CPU ms by label at each sample, to split a run at a point in time. */
  readonly timeline: { t: number; totals: Record<string, number> }[] = [];

  constructor(
    private readonly admin: Pool,
    private readonly groups: Record<string, number>,
    private readonly backends: { label: string; datname: string; appPrefix: string }[],
    private readonly rssPids: number[] = [],
  ) {}

  async sampleOnce(): Promise<void> {
    const seen: [string, string, number][] = [];
    for (const [label, pgid] of Object.entries(this.groups))
      for (const pid of groupPids(pgid)) seen.push([`p${pid}`, label, pid]);
    const { rows } = await this.admin.query<{ pid: number; datname: string; app: string }>(
      `SELECT pid, datname, application_name AS app FROM pg_stat_activity WHERE datname = ANY($1::text[])`,
      [this.backends.map((b) => b.datname)],
    );
    for (const r of rows) {
      const b = this.backends.find((x) => x.datname === r.datname && r.app.startsWith(x.appPrefix));
      if (b) seen.push([`b${r.pid}`, b.label, r.pid]);
    }
    for (const [key, label, pid] of seen) {
      const ms = cpuMsOf(pid);
      if (ms === null) continue;
      if (!this.first.has(key)) this.first.set(key, this.timer ? (key.startsWith('b') ? 0 : ms) : ms);
      this.last.set(key, ms);
      this.kind.set(key, label);
    }
    if (this.timer) this.timeline.push({ t: Date.now(), totals: this.totals() });
    for (const pid of this.rssPids) {
      const m = memoryOf(pid);
      if (!m) continue;
      const r = this.rss.get(pid);
      if (!r) this.rss.set(pid, { startKb: m.rssKb, peakKb: m.hwmKb, maxRssKb: m.rssKb, maxRssAt: Date.now() });
      else {
        r.peakKb = Math.max(r.peakKb, m.hwmKb);
        if (m.rssKb > r.maxRssKb) Object.assign(r, { maxRssKb: m.rssKb, maxRssAt: Date.now() });
      }
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
    return this.totals();
  }
}

/** `label a.b s (x%)` for each component, largest first. */
export function cpuText(cpu: Record<string, number>, rows: number): string {
  const total = Object.values(cpu).reduce((a, b) => a + b, 0);
  const parts = Object.entries(cpu)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s (${((v / total) * 100).toFixed(0)}%)`);
  return `${(total / 1000).toFixed(1)} CPU s = ${((total / rows) * 1000).toFixed(1)} CPU µs per row: ${parts.join(', ')}`;
}
