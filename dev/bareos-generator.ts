import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import { projectRoot } from '../lib/paths';
import type { GeneratedFiles } from './bareos-file-generator';
import { emptyBareosFiles, generateBareosFiles } from './bareos-file-generator';

/**
 * Deterministic generator of a realistic Bareos director catalog (`client`, `pool`,
 * `fileset`, `job`) in PostgreSQL, used as a source fixture for tests, demos and benches.
 *
 * Model (all times are naive director wall-clock times, handled as "UTC seconds" with
 * integer arithmetic and `getUTC*` only, so the output never depends on `TZ`):
 * - The history is a sequence of day plans; plan `d` covers `[d 06:00, d+1 06:00)`:
 *   daytime verify and restore jobs, evening backups of every client (I daily, D weekly,
 *   F monthly on the client's cycle day) run through a 10-slot concurrency queue, reruns of
 *   failed jobs, the catalog backup, night database dumps, early-morning copy (c + C) and
 *   weekly migration (g + new B, original becomes M) jobs, and admin jobs.
 * - Every plan draws from its own PRNG stream seeded by (seed, day), so plans can be
 *   counted backwards from the end date and then emitted forwards identically.
 * - "Now" is an evening instant on the end date: jobs created after it do not exist, jobs
 *   running at it have status R and NULL endtime/realendtime, queued ones status C.
 * - With `endTime` instead (a recent history, as the demo wants it), the last evening's backups
 *   all succeed and "now" is shortly after them, so the newest job of every client is a `T`
 *   backup; every time is then shifted by whole hours so that "now" falls within the hour before
 *   `endTime` (see {@link GenerateBareosOptions.endTime}).
 * - The oldest plan is cut so that exactly `jobs` rows exist; its cut jobs still consumed
 *   job ids (as if pruned), so early copy/migration rows may have dangling priorjobid.
 */

/** Options of {@link generateBareosSource}. */
export interface GenerateBareosOptions {
  /** PostgreSQL connection URL of the (existing) target database. */
  databaseUrl: string;
  /** Exact number of rows to create in `job`; integer >= 1. */
  jobs: number;
  /** PRNG seed (safe integer); same seed and options give byte-identical rows. */
  seed: number;
  /** Last day of the history, `'YYYY-MM-DD'` (director local date); default `'2026-11-01'`. Not with `endTime`. */
  endDate?: string;
  /**
   * End of a recent history, `'YYYY-MM-DD HH:MM:SS'` (director wall clock; see {@link directorWallClock}).
   * No job is scheduled, starts or ends after it, and the newest job of every client that has
   * jobs is a backup (type `B`) with status `T` that started within the 24 hours before it (with
   * 40 clients within about 8 hours); failures and warnings stay in the older history, and no job
   * runs at the end.
   * The day's schedule is shifted by whole hours to end there, so wall-clock times of day differ
   * from the schedule's. Same seed, options and `endTime` give byte-identical rows. Not with `endDate`.
   */
  endTime?: string;
  /** Number of rows in `client` (director's own `bareos-fd` included); integer 1..10000, default 40. */
  clients?: number;
  /**
   * File records too: about this many `File` rows in all (exactly, unless no job can have files),
   * with `Path` and `Version` (2230) as Bareos keeps them, and every job's `JobFiles` scaled to
   * match (dev/bareos-file-generator.ts). Integer 0..2,000,000,000; absent: no file tables are made
   * and existing `file` / `path` rows are removed.
   */
  files?: number;
  /**
   * IANA zone of the director whose wall clock the naive times are (default `UTC`): `JobTDate`, the
   * director's own epoch column, is the epoch of each job's end (else start, else schedule) time in
   * this zone, as a real director writes it. The product cross-checks the two at plan.
   */
  timezone?: string;
}

/** Summary of a generated catalog, read back from the database. */
export interface GenerateBareosResult {
  /** Rows in `job` (always equal to the requested count). */
  jobs: number;
  /** Largest `job.jobid` (greater than `jobs`: ids have gaps). */
  maxJobId: number;
  /** Rows in `client`. */
  clients: number;
  /** Oldest `job.starttime` as `'YYYY-MM-DD HH:MM:SS'`, or null when no job has started. */
  firstStart: string | null;
  /** Newest `job.starttime` as `'YYYY-MM-DD HH:MM:SS'`, or null when no job has started. */
  lastStart: string | null;
  /** The file records made, when `files` was given. */
  files?: GeneratedFiles;
}

const DAY = 86_400;
const HOUR = 3_600;
const BATCH_ROWS = 8_000;
const DEFAULT_END_DATE = '2026-11-01';
const DEFAULT_CLIENTS = 40;
const MAX_JOBS = 100_000_000;
const QUEUE_SLOTS = 10;
/** Longest run of a backup of the last evening of a recent history (s). */
const FINAL_MAX_RUN = 30 * 60;
const TWO_POW_53 = 9_007_199_254_740_992n;

// Fixed ids of the pool and fileset rows.
const POOL_FULL = 1;
const POOL_DIFF = 2;
const POOL_INCR = 3;
const POOL_OFFSITE = 5;
const POOL_ARCHIVE = 6;
const FS_SELFTEST = 1;
const FS_CATALOG = 2;
const FS_LINUX_V1 = 3;
const FS_WINDOWS = 4;
const FS_DBDUMP = 5;
const FS_MAIL = 6;
const FS_HSM = 7;
const FS_LINUX_V2 = 8;

/** A seeded PRNG returning floats in [0, 1) (mulberry32). */
type Rng = () => number;

function mulberry32(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Mixes integers into a 32-bit seed (murmur3-style finalizer per part). */
function mix(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const p of parts) {
    const lo = p | 0;
    const hi = Math.floor(p / 4_294_967_296) | 0;
    for (const v of [lo, hi]) {
      h = Math.imul(h ^ v, 0x85ebca6b);
      h ^= h >>> 13;
      h = Math.imul(h, 0xc2b2ae35);
      h ^= h >>> 16;
    }
  }
  return h >>> 0;
}

const int = (rng: Rng, lo: number, hi: number): number => lo + Math.floor(rng() * (hi - lo + 1));
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)];
const pad2 = (n: number): string => (n < 10 ? `0${n}` : String(n));

type FilesetKind = 'linux' | 'windows' | 'mail' | 'selftest' | 'hsm';

interface ClientProfile {
  id: number;
  name: string;
  host: string;
  role: string;
  uname: string;
  autoprune: number;
  fileRetention: number;
  jobRetention: number;
  /** Name of the client's backup job resource. */
  jobName: string;
  fileset: FilesetKind;
  /** Schedule time of the evening backup, seconds after midnight. */
  schedSec: number;
  /** Weekday (0 = Sunday) of the weekly differential; the first one of a month is a full. */
  cycleDay: number;
  /** Full backup size at the end date, bytes. */
  fullBytes: number;
  fullFiles: number;
  /** Relative growth of the data per year. */
  growth: number;
  /** Bytes per second. */
  throughput: number;
  /** > 0: compression ratio (readbytes = jobbytes / ratio); 0: none; -1: encryption overhead. */
  compress: number;
  /** Nightly database dump job, if any. */
  dump: { name: string; bytes: number; files: number } | null;
  hsm: boolean;
  quiet: boolean;
}

type JobValue = number | bigint;

/** One job of a day plan, before id assignment and "now" handling. */
interface PlanJob {
  ord: number;
  name: string;
  type: string;
  level: string;
  clientId: number;
  poolId: number;
  filesetId: number;
  /** Final status when the job has finished (before "now" handling). */
  status: string;
  /** Creation (schedule) time; also orders job ids. */
  sched: number;
  /** Time printed in the unique job name. */
  nameAt: number;
  /** Actual run start/end; null when canceled before start. */
  runStart: number | null;
  runEnd: number | null;
  /** starttime/endtime stored once finished (copies keep the original's times). */
  catStart: number | null;
  catEnd: number | null;
  files: number;
  bytes: JobValue;
  readBytes: JobValue;
  errors: number;
  missing: number;
  prior: PlanJob | null;
  migratedBy: PlanJob | null;
  writesVolume: boolean;
  /** File retention of the client (seconds) for purgedfiles; 0 = not a backup row. */
  fileRetention: number;
  /** '' as Bareos writes it; null for jobs from before the catalog had the column. */
  comment: string | null;
  /** Copy/migration eligibility marker. */
  copyable: boolean;
  migratable: boolean;
  id: number;
}

interface Ctx {
  seed: number;
  endDay: number;
  clients: ClientProfile[];
  /** Clients in evening schedule order. */
  evening: ClientProfile[];
  verifyClients: ClientProfile[];
  migrateClients: ClientProfile[];
  /** Fileset LinuxAll v2 takes effect at this time. */
  linuxV2At: number;
  /** Jobs created before this have a NULL comment (catalog upgraded from an old Bacula). */
  commentEra: number;
  /** Recent history: the plan whose evening backups (and night dumps) all succeed, quickly; else null. */
  finalDay: number | null;
}

const ROLES: readonly (readonly [string, number])[] = [
  ['web', 6],
  ['app', 5],
  ['db', 4],
  ['mail', 2],
  ['file', 3],
  ['ldap', 1],
  ['dns', 1],
  ['git', 1],
  ['build', 2],
  ['proxy', 1],
  ['mon', 1],
  ['vpn', 1],
  ['win', 3],
  ['ts', 1],
  ['nas', 1],
  ['wiki', 1],
  ['ci', 1],
  ['log', 1],
  ['erp', 1],
];
const ROLE_TOTAL = ROLES.reduce((s, [, w]) => s + w, 0);

const LINUX_UNAMES = [
  '23.0.3 (27Mar24) Debian GNU/Linux 12 (bookworm),debian',
  '22.1.0 (21Jun23) Debian GNU/Linux 11 (bullseye),debian',
  '23.0.3 (27Mar24) Ubuntu 22.04.4 LTS,ubuntu',
  '21.1.6 (01Feb23) Red Hat Enterprise Linux release 8.7 (Ootpa),redhat',
  '22.1.3 (11Dec23) Rocky Linux release 9.3 (Blue Onyx),redhat',
];
const WINDOWS_UNAMES = [
  '22.1.0 (21Jun23) Microsoft Windows Server 2019 Standard Edition (build 17763), 64-bit,Cross-compile,Win64',
  '23.0.3 (27Mar24) Microsoft Windows Server 2022 Datacenter Edition (build 20348), 64-bit,Cross-compile,Win64',
];

function logUniform(rng: Rng, lo: number, hi: number): number {
  return Math.exp(Math.log(lo) + rng() * (Math.log(hi) - Math.log(lo)));
}

function buildClients(seed: number, count: number): ClientProfile[] {
  const rng = mulberry32(mix(seed, 0x636c69));
  const counters = new Map<string, number>();
  const out: ClientProfile[] = [];
  const retentions = [30, 60, 60, 90, 180].map((d) => d * DAY);
  const scheds = [
    20 * HOUR,
    21 * HOUR + 600,
    21 * HOUR + 600,
    21 * HOUR + 600,
    21 * HOUR + 1800,
    22 * HOUR,
    22 * HOUR + 1200,
    23 * HOUR + 300,
  ];
  for (let i = 0; i < count; i++) {
    const id = i + 1;
    let role: string;
    let name: string;
    let jobName: string | null = null;
    if (i === 0) {
      role = 'director';
      name = 'bareos-fd';
      jobName = 'backup-bareos-fd';
    } else if (i === 1) {
      role = 'hsm';
      name = 'hsm-01-fd';
    } else if (i === 9) {
      role = 'pos';
      name = 'kasse-münchen-01-fd';
    } else if (i === 13) {
      role = 'erp';
      name = 'legacy_erp_01-fd';
      jobName = 'Backup Legacy ERP';
    } else if (i === 22) {
      role = 'lab';
      name = 'labor-zürich-02-fd';
    } else {
      let r = rng() * ROLE_TOTAL;
      role = ROLES[ROLES.length - 1][0];
      for (const [n, w] of ROLES) {
        if (r < w) {
          role = n;
          break;
        }
        r -= w;
      }
      const n = (counters.get(role) ?? 0) + 1;
      counters.set(role, n);
      name = `${role}-${pad2(n)}-fd`;
    }
    const host = name.replace(/-fd$/, '');
    const windows = role === 'win' || role === 'ts';
    const fileset: FilesetKind =
      i === 0 ? 'selftest' : role === 'hsm' ? 'hsm' : windows ? 'windows' : role === 'mail' ? 'mail' : 'linux';
    const big = role === 'file' || role === 'nas' || role === 'db';
    const fullBytes = i === 0 ? logUniform(rng, 3e7, 8e7) : logUniform(rng, big ? 5e10 : 2e9, big ? 3e12 : 2e11);
    const fullFiles = i === 0 ? int(rng, 300, 900) : Math.floor(fullBytes / logUniform(rng, 2e4, 4e6)) + 5000;
    const c = rng();
    out.push({
      id,
      name,
      host,
      role,
      uname: windows ? pick(rng, WINDOWS_UNAMES) : pick(rng, LINUX_UNAMES),
      autoprune: rng() < 0.85 ? 1 : 0,
      fileRetention: pick(rng, retentions),
      jobRetention: pick(rng, [365, 730, 3650]) * DAY,
      jobName: jobName ?? (i % 11 === 5 ? `Backup_${host.replace(/-/g, '_')}` : `backup-${host}`),
      fileset,
      schedSec: i === 0 ? 21 * HOUR + 600 : role === 'hsm' ? 20 * HOUR : pick(rng, scheds),
      cycleDay: rng() < 0.75 ? 6 : pick(rng, [0, 5]),
      fullBytes,
      fullFiles: Math.min(fullFiles, 40_000_000),
      growth: 0.05 + rng() * 0.3,
      throughput: logUniform(rng, 2e7, 2.5e8),
      compress: c < 0.45 ? 0.35 + rng() * 0.45 : c < 0.55 ? -1 : 0,
      dump:
        role === 'db'
          ? { name: `dump_${host.replace(/-/g, '_')}`, bytes: logUniform(rng, 1e9, 8e10), files: int(rng, 1, 40) }
          : null,
      hsm: role === 'hsm',
      quiet: ['dns', 'vpn', 'proxy', 'ldap'].includes(role),
    });
  }
  return out;
}

/** Read bytes for written bytes, per the client's compression/encryption profile. */
function readBytesFor(c: ClientProfile, bytes: number, rng: Rng): number {
  if (bytes === 0) return 0;
  if (c.compress > 0) return Math.round(bytes / (c.compress * (0.9 + rng() * 0.2)));
  if (c.compress < 0) return Math.max(0, bytes - Math.round(bytes * 0.004 + 512));
  return bytes;
}

function newJob(partial: Partial<PlanJob> & Pick<PlanJob, 'name' | 'type' | 'level' | 'sched'>, ord: number): PlanJob {
  return {
    ord,
    clientId: 0,
    poolId: 0,
    filesetId: 0,
    status: 'T',
    nameAt: partial.sched,
    runStart: null,
    runEnd: null,
    catStart: null,
    catEnd: null,
    files: 0,
    bytes: 0,
    readBytes: 0,
    errors: 0,
    missing: 0,
    prior: null,
    migratedBy: null,
    writesVolume: false,
    fileRetention: 0,
    comment: '',
    copyable: false,
    migratable: false,
    id: 0,
    ...partial,
  };
}

/** Final status of a backup-like job. */
function backupStatus(rng: Rng): string {
  const r = rng();
  if (r < 0.935) return 'T';
  if (r < 0.965) return 'W';
  if (r < 0.975) return 'f';
  if (r < 0.983) return 'E';
  if (r < 0.986) return 'e';
  return 'A';
}

/**
 * Fills run times, counters and status of a job that starts at `start` and would take
 * `dur` seconds to write `files`/`bytes` when successful.
 */
function settle(
  j: PlanJob,
  rng: Rng,
  status: string,
  start: number,
  dur: number,
  files: number,
  bytes: JobValue,
  read: (b: JobValue) => JobValue,
): void {
  j.status = status;
  if (status === 'A' && rng() < 0.5) {
    // canceled before it started: nothing written, no start/end
    return;
  }
  let frac = 1;
  if (status === 'f' || status === 'E' || status === 'e' || status === 'A') frac = 0.02 + rng() * 0.6;
  const runDur = Math.max(5, Math.round(dur * frac));
  j.runStart = start;
  j.runEnd = start + runDur;
  j.catStart = start;
  j.catEnd = j.runEnd;
  if (frac === 1) {
    j.files = files;
    j.bytes = bytes;
  } else {
    j.files = Math.floor(files * frac);
    j.bytes = typeof bytes === 'bigint' ? (bytes * BigInt(Math.floor(frac * 1000))) / 1000n : Math.floor(bytes * frac);
  }
  j.readBytes = status === 'f' && rng() < 0.3 ? 0 : read(j.bytes);
  if (status === 'W') {
    j.errors = int(rng, 1, 12);
    j.missing = rng() < 0.3 ? 1 : 0;
  } else if (status === 'f' || status === 'E' || status === 'e') {
    j.errors = int(rng, 1, 4);
  }
}

function dayOfMonth(day: number): number {
  return new Date(day * DAY * 1000).getUTCDate();
}

/** Builds the jobs of plan `d` (window [d 06:00, d+1 06:00)), sorted by creation time. */
function buildPlan(ctx: Ctx, d: number): PlanJob[] {
  const rng = mulberry32(mix(ctx.seed, d, 1));
  const base = d * DAY;
  const wd = (((d + 4) % 7) + 7) % 7; // 1970-01-01 was a Thursday; 0 = Sunday
  const dom = dayOfMonth(d);
  const final = d === ctx.finalDay;
  const jobs: PlanJob[] = [];
  let ord = 0;
  const add = (j: PlanJob): PlanJob => {
    jobs.push(j);
    return j;
  };
  const linuxFs = (t: number): number => (t < ctx.linuxV2At ? FS_LINUX_V1 : FS_LINUX_V2);
  const filesetOf = (c: ClientProfile, t: number): number => {
    switch (c.fileset) {
      case 'selftest':
        return FS_SELFTEST;
      case 'windows':
        return FS_WINDOWS;
      case 'mail':
        return FS_MAIL;
      case 'hsm':
        return FS_HSM;
      default:
        return linuxFs(t);
    }
  };
  const growthAt = (c: ClientProfile): number => Math.max(0.15, 1 + (c.growth * (d - ctx.endDay)) / 365);
  const commentFor = (t: number, text: string): string | null => (t < ctx.commentEra ? null : text);

  // --- daytime: verify jobs ---
  for (const c of ctx.verifyClients) {
    const init = wd === 0;
    const sched = base + (init ? 6 * HOUR + 1800 : 7 * HOUR + 900);
    const j = add(
      newJob(
        {
          name: `verify-${c.host}`,
          type: 'V',
          level: init ? 'V' : 'C',
          sched,
          nameAt: sched + int(rng, 0, 2),
          clientId: c.id,
          filesetId: filesetOf(c, sched),
          comment: commentFor(sched, ''),
        },
        ord++,
      ),
    );
    const files = Math.floor(c.fullFiles * growthAt(c));
    const r = rng();
    const status = init ? 'T' : r < 0.95 ? 'T' : r < 0.99 ? 'D' : 'f';
    settle(j, rng, status, sched + int(rng, 1, 6), files / 20_000 + int(rng, 5, 40), files, 0, () => 0);
    if (status === 'D') j.errors = int(rng, 1, 30);
  }

  // --- daytime: restores ---
  const weekday = wd >= 1 && wd <= 5;
  const rr = rng();
  const restores = weekday ? (rr < 0.45 ? 0 : rr < 0.8 ? 1 : rr < 0.95 ? 2 : 3) : rr < 0.9 ? 0 : 1;
  for (let k = 0; k < restores; k++) {
    const c = ctx.clients[Math.floor(rng() * ctx.clients.length)];
    const sched = base + 8 * HOUR + Math.floor(rng() * 10 * HOUR);
    const files = Math.floor(logUniform(rng, 1, 200_000));
    const bytes = Math.floor(files * logUniform(rng, 1e4, 2e6));
    const r = rng();
    const status = r < 0.9 ? 'T' : r < 0.94 ? 'W' : r < 0.97 ? 'f' : r < 0.99 ? 'A' : 'E';
    const j = add(
      newJob(
        {
          name: 'RestoreFiles',
          type: 'R',
          level: ' ',
          sched,
          nameAt: sched + int(rng, 0, 2),
          clientId: c.id,
          filesetId: linuxFs(sched),
          comment: commentFor(sched, rng() < 0.2 ? `ticket #${int(rng, 10_000, 99_999)}` : ''),
        },
        ord++,
      ),
    );
    settle(j, rng, status, sched + int(rng, 1, 8), bytes / 1e8 + int(rng, 5, 60), files, bytes, () => 0);
  }

  // --- evening backups through the director's concurrency queue ---
  const mains: { c: ClientProfile; j: PlanJob; dur: number; files: number; bytes: JobValue; status: string }[] = [];
  for (const c of ctx.evening) {
    const sched = base + c.schedSec;
    // the last evening of a recent history runs the HSM archive's incremental (its full takes a day)
    const level = final && c.hsm ? 'I' : wd === c.cycleDay ? (dom <= 7 ? 'F' : 'D') : 'I';
    const g = growthAt(c);
    let files: number;
    let bytes: JobValue;
    let dur: number;
    if (c.hsm && level !== 'I') {
      // an HSM archive: byte counters beyond 2^53 (exact only as int8 text / BigInt)
      if (level === 'F') {
        bytes = 9_500_000_000_000_000n + BigInt(Math.floor(rng() * 2 ** 40)) * 2n + 1n;
        files = int(rng, 1_200_000_000, 1_500_000_000);
        dur = int(rng, 18 * HOUR, 26 * HOUR);
      } else {
        bytes = TWO_POW_53 + 1n + BigInt(Math.floor(rng() * 2 ** 31));
        files = int(rng, 30_000_000, 60_000_000);
        dur = int(rng, 6 * HOUR, 10 * HOUR);
      }
    } else {
      const fb = c.fullBytes * g;
      const ff = c.fullFiles * g;
      let f: number;
      if (level === 'F') f = 0.97 + rng() * 0.06;
      else if (level === 'D') f = (0.03 + rng() * 0.12) * (0.5 + Math.min(dom, 28) / 28);
      else f = (c.quiet && rng() < 0.3 ? 0 : 0.001 + rng() * 0.02) * (wd === 0 || wd === 6 ? 0.3 : 1);
      bytes = Math.floor(fb * f);
      files = f === 0 ? 0 : Math.max(1, Math.floor(ff * f * (0.5 + rng())));
      dur = bytes / c.throughput + int(rng, 3, 90);
      dur = Math.min(dur, final ? FINAL_MAX_RUN : 20 * HOUR);
    }
    const drawn = backupStatus(rng);
    const status = final ? 'T' : drawn;
    const j = newJob(
      {
        name: c.jobName,
        type: 'B',
        level,
        sched,
        nameAt: sched + int(rng, 0, 2),
        clientId: c.id,
        poolId: level === 'F' ? POOL_FULL : level === 'D' ? POOL_DIFF : POOL_INCR,
        filesetId: filesetOf(c, sched),
        writesVolume: true,
        fileRetention: c.fileRetention,
        comment: commentFor(sched, ''),
        copyable: (level === 'F' || level === 'D') && !c.hsm,
        migratable: level === 'I' && ctx.migrateClients.includes(c),
      },
      ord++,
    );
    mains.push({ c, j, dur, files, bytes, status });
  }
  const slots = new Array<number>(QUEUE_SLOTS).fill(0);
  let lastEnd = 0;
  const reruns: PlanJob[] = [];
  for (const m of mains) {
    let si = 0;
    for (let k = 1; k < QUEUE_SLOTS; k++) if (slots[k] < slots[si]) si = k;
    const start = Math.max(m.j.sched, slots[si]) + int(rng, 1, 8);
    const c = m.c;
    settle(m.j, rng, m.status, start, m.dur, m.files, m.bytes, (b) =>
      typeof b === 'bigint' ? b : readBytesFor(c, b, rng),
    );
    if (m.j.runEnd !== null) {
      slots[si] = m.j.runEnd;
      if (!c.hsm) lastEnd = Math.max(lastEnd, m.j.runEnd);
    }
    add(m.j);
    // Reschedule On Error: one rerun 30 minutes later
    if ((m.status === 'f' || m.status === 'E') && m.j.runEnd !== null && rng() < 0.6) {
      const rs = m.j.runEnd + 1800;
      if (rs < base + DAY + HOUR) {
        const r = newJob(
          {
            name: m.j.name,
            type: 'B',
            level: m.j.level,
            sched: rs,
            nameAt: rs + int(rng, 0, 2),
            clientId: c.id,
            poolId: m.j.poolId,
            filesetId: filesetOf(c, rs),
            writesVolume: true,
            fileRetention: c.fileRetention,
            comment: commentFor(rs, ''),
            copyable: m.j.copyable,
          },
          ord++,
        );
        settle(r, rng, rng() < 0.85 ? 'T' : 'f', rs + int(rng, 1, 5), m.dur, m.files, m.bytes, (b) =>
          typeof b === 'bigint' ? b : readBytesFor(c, b, rng),
        );
        reruns.push(r);
      }
    }
  }
  for (const r of reruns) add(r);

  // --- catalog backup (priority 11: waits for the backups) ---
  {
    const dir = ctx.clients[0];
    const sched = base + 23 * HOUR + 600;
    const j = add(
      newJob(
        {
          name: 'BackupCatalog',
          type: 'B',
          level: 'F',
          sched,
          nameAt: sched + int(rng, 0, 2),
          clientId: dir.id,
          poolId: POOL_FULL,
          filesetId: FS_CATALOG,
          writesVolume: true,
          fileRetention: dir.fileRetention,
          comment: commentFor(sched, ''),
          copyable: true,
        },
        ord++,
      ),
    );
    const bytes = Math.floor(
      logUniform(rng, 5e7, 8e7) * Math.max(0.1, 1 + (d - ctx.endDay) / 2000) * ctx.clients.length,
    );
    const status = rng() < 0.99 || final ? 'T' : 'W';
    settle(
      j,
      rng,
      status,
      Math.max(sched, lastEnd) + int(rng, 2, 10),
      bytes / 1.2e8 + int(rng, 20, 60),
      int(rng, 3, 5),
      bytes,
      (b) => b,
    );
  }

  // --- night database dumps (next day 01:30) ---
  for (const c of ctx.clients) {
    if (!c.dump) continue;
    const sched = base + DAY + 5400;
    const bytes = Math.floor(c.dump.bytes * growthAt(c) * (0.97 + rng() * 0.06));
    const j = add(
      newJob(
        {
          name: c.dump.name,
          type: 'B',
          level: 'F',
          sched,
          nameAt: sched + int(rng, 0, 2),
          clientId: c.id,
          poolId: POOL_FULL,
          filesetId: FS_DBDUMP,
          writesVolume: true,
          fileRetention: c.fileRetention,
          comment: commentFor(sched, ''),
        },
        ord++,
      ),
    );
    const drawn = backupStatus(rng); // draws in the order of the arguments below
    const start = sched + int(rng, 1, 30);
    const dur = bytes / 6e7 + int(rng, 10, 120);
    settle(j, rng, final ? 'T' : drawn, start, final ? Math.min(dur, FINAL_MAX_RUN) : dur, c.dump.files, bytes, (b) =>
      typeof b === 'bigint' ? b : readBytesFor(c, b, rng),
    );
  }

  // --- copies to the offsite pool (next day 03:15): control job c + new job C ---
  {
    const copySched = base + DAY + 3 * HOUR + 900;
    const sources = jobs.filter(
      (j) => j.copyable && (j.status === 'T' || j.status === 'W') && j.runEnd !== null && j.runEnd <= copySched,
    );
    sources.sort((a, b) => a.sched - b.sched || a.ord - b.ord);
    let t = copySched;
    for (let k = 0; k < sources.length && k < 14; k++) {
      const o = sources[k];
      const ctlSched = copySched + k; // spawned by the selecting job one per second
      const ctl = add(
        newJob(
          {
            name: 'copy-to-offsite',
            type: 'c',
            level: o.level,
            sched: ctlSched,
            nameAt: ctlSched,
            clientId: o.clientId,
            poolId: o.poolId,
            filesetId: o.filesetId,
            prior: o,
            comment: commentFor(ctlSched, ''),
          },
          ord++,
        ),
      );
      const start = Math.max(t, ctlSched) + int(rng, 1, 4);
      const newSched = start + int(rng, 1, 3);
      const size = typeof o.bytes === 'bigint' ? Number(o.bytes) : o.bytes;
      const dur = Math.min(2400, Math.round(size / 3e8) + int(rng, 5, 30));
      const ok = rng() < 0.98;
      const cp = add(
        newJob(
          {
            name: o.name,
            type: 'C',
            level: o.level,
            sched: newSched,
            nameAt: newSched,
            clientId: o.clientId,
            poolId: POOL_OFFSITE,
            filesetId: o.filesetId,
            prior: o,
            writesVolume: true,
            fileRetention: o.fileRetention,
            comment: commentFor(newSched, ''),
          },
          ord++,
        ),
      );
      settle(cp, rng, ok ? 'T' : 'f', newSched, dur, o.files, o.bytes, () => 0);
      if (ok) {
        cp.catStart = o.catStart;
        cp.catEnd = o.catEnd;
      }
      settle(ctl, rng, ok ? 'T' : 'f', start, 0, o.files, o.bytes, () => 0);
      ctl.runEnd = (cp.runEnd ?? newSched) + int(rng, 1, 3);
      ctl.catEnd = ctl.runEnd;
      t = ctl.runEnd;
    }
  }

  // --- weekly migration of incrementals to the archive pool (Sunday 04:30): g + new B, original -> M ---
  if (wd === 6) {
    const migSched = base + DAY + 4 * HOUR + 1800;
    const sources = jobs.filter(
      (j) => j.migratable && (j.status === 'T' || j.status === 'W') && j.runEnd !== null && j.runEnd <= migSched,
    );
    let t = migSched;
    for (let k = 0; k < sources.length && k < 6; k++) {
      const o = sources[k];
      const ctlSched = migSched + k;
      const ctl = add(
        newJob(
          {
            name: 'migrate-to-archive',
            type: 'g',
            level: o.level,
            sched: ctlSched,
            nameAt: ctlSched,
            clientId: o.clientId,
            poolId: o.poolId,
            filesetId: o.filesetId,
            prior: o,
            comment: commentFor(ctlSched, ''),
          },
          ord++,
        ),
      );
      const start = Math.max(t, ctlSched) + int(rng, 1, 4);
      const newSched = start + int(rng, 1, 3);
      const size = typeof o.bytes === 'bigint' ? Number(o.bytes) : o.bytes;
      const mg = add(
        newJob(
          {
            name: o.name,
            type: 'B',
            level: o.level,
            sched: newSched,
            nameAt: newSched,
            clientId: o.clientId,
            poolId: POOL_ARCHIVE,
            filesetId: o.filesetId,
            prior: o,
            writesVolume: true,
            fileRetention: o.fileRetention,
            comment: commentFor(newSched, ''),
          },
          ord++,
        ),
      );
      settle(mg, rng, 'T', newSched, Math.round(size / 2e8) + int(rng, 5, 20), o.files, o.bytes, () => 0);
      mg.catStart = o.catStart;
      mg.catEnd = o.catEnd;
      o.migratedBy = mg;
      settle(ctl, rng, 'T', start, 0, o.files, o.bytes, () => 0);
      ctl.runEnd = (mg.runEnd ?? newSched) + int(rng, 1, 3);
      ctl.catEnd = ctl.runEnd;
      t = ctl.runEnd;
    }
  }

  // --- admin jobs (next day 05:00 daily; Sunday night log rotation without a client) ---
  {
    const sched = base + DAY + 5 * HOUR;
    const j = add(
      newJob(
        {
          name: 'housekeeping',
          type: 'D',
          level: ' ',
          sched,
          nameAt: sched + int(rng, 0, 2),
          clientId: ctx.clients[0].id,
          comment: commentFor(sched, ''),
        },
        ord++,
      ),
    );
    settle(j, rng, rng() < 0.98 ? 'T' : 'W', sched + int(rng, 1, 4), int(rng, 2, 40), 0, 0, () => 0);
    if (wd === 0) {
      const s2 = base + DAY + 5 * HOUR + 1800;
      const a = add(
        newJob(
          {
            name: 'rotate-logs',
            type: 'D',
            level: ' ',
            sched: s2,
            nameAt: s2,
            clientId: 0,
            comment: commentFor(s2, ''),
          },
          ord++,
        ),
      );
      settle(a, rng, 'T', s2 + int(rng, 1, 3), int(rng, 1, 10), 0, 0, () => 0);
    }
  }

  jobs.sort((a, b) => a.sched - b.sched || a.ord - b.ord);
  return jobs;
}

/** Plan times (director wall clock as UTC seconds), shifted by `shift`, as timestamp and job-name text. */
class TimeFormat {
  private readonly days = new Map<number, string>();

  /** @param shift seconds added to every time before it is formatted (and to epoch values, see `epoch`). */
  constructor(readonly shift = 0) {}

  /** Epoch seconds of plan time `t`, shifted. */
  epoch(t: number): number {
    return t + this.shift;
  }

  private date(day: number): string {
    let s = this.days.get(day);
    if (s === undefined) {
      const dt = new Date(day * DAY * 1000);
      s = `${String(dt.getUTCFullYear()).padStart(4, '0')}-${pad2(dt.getUTCMonth() + 1)}-${pad2(dt.getUTCDate())}`;
      this.days.set(day, s);
    }
    return s;
  }

  private parts(plan: number, dateTimeSep: string, timeSep: string): string {
    const t = plan + this.shift;
    const day = Math.floor(t / DAY);
    const r = t - day * DAY;
    const h = Math.floor(r / HOUR);
    const m = Math.floor((r - h * HOUR) / 60);
    const s = r - h * HOUR - m * 60;
    return `${this.date(day)}${dateTimeSep}${pad2(h)}${timeSep}${pad2(m)}${timeSep}${pad2(s)}`;
  }

  /** SQL timestamp text. */
  ts(t: number | null): string | null {
    return t === null ? null : this.parts(t, ' ', ':');
  }

  /** Time part of a unique job name: YYYY-MM-DD_HH.MM.SS. */
  jobName(t: number): string {
    return this.parts(t, '_', '.');
  }
}

const JOB_COLUMNS: readonly (readonly [string, string])[] = [
  ['jobid', 'int'],
  ['job', 'text'],
  ['name', 'text'],
  ['type', 'text'],
  ['level', 'text'],
  ['clientid', 'int'],
  ['jobstatus', 'text'],
  ['schedtime', 'timestamp'],
  ['starttime', 'timestamp'],
  ['endtime', 'timestamp'],
  ['realendtime', 'timestamp'],
  ['jobtdate', 'bigint'],
  ['volsessionid', 'int'],
  ['volsessiontime', 'int'],
  ['jobfiles', 'int'],
  ['jobbytes', 'bigint'],
  ['readbytes', 'bigint'],
  ['joberrors', 'int'],
  ['jobmissingfiles', 'smallint'],
  ['poolid', 'int'],
  ['filesetid', 'int'],
  ['priorjobid', 'int'],
  ['purgedfiles', 'smallint'],
  ['hasbase', 'smallint'],
  ['hascache', 'smallint'],
  ['reviewed', 'smallint'],
  ['comment', 'text'],
];

const INSERT_JOBS = `INSERT INTO job (${JOB_COLUMNS.map(([c]) => c).join(', ')})
SELECT * FROM unnest(${JOB_COLUMNS.map(([, t], i) => `$${i + 1}::${t}[]`).join(', ')})`;

type Cell = string | number | null;

function emptyBatch(): Cell[][] {
  return JOB_COLUMNS.map(() => []);
}

const asText = (v: JobValue): string => (typeof v === 'bigint' ? v.toString() : String(Math.round(v)));

/** Director state carried across plans while emitting rows. */
interface EmitState {
  nextId: number;
  seq: number;
  sessId: number;
  sessTime: number;
  maxId: number;
  emitted: number;
}

/** `'YYYY-MM-DD'` or `'YYYY-MM-DD HH:MM:SS'` as seconds since 1970 (wall clock read as UTC); NaN when invalid. */
function wallSeconds(text: string, withTime: boolean): number {
  const m = (withTime ? /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/ : /^(\d{4})-(\d{2})-(\d{2})$/).exec(text);
  if (!m) return NaN;
  const [y, mo, d, h, mi, se] = m.slice(1).map(Number);
  const ms = Date.UTC(y, mo - 1, d, h || 0, mi || 0, se || 0);
  const back = new Date(ms);
  const same =
    back.getUTCFullYear() === y &&
    back.getUTCMonth() + 1 === mo &&
    back.getUTCDate() === d &&
    back.getUTCHours() === (h || 0) &&
    back.getUTCMinutes() === (mi || 0) &&
    back.getUTCSeconds() === (se || 0);
  return same ? ms / 1000 : NaN;
}

function validate(opts: GenerateBareosOptions): { endDay: number; endTime: number | null; clients: number } {
  if (!opts || typeof opts.databaseUrl !== 'string' || opts.databaseUrl === '') {
    throw new TypeError('generateBareosSource: databaseUrl is required');
  }
  if (!Number.isSafeInteger(opts.jobs) || opts.jobs < 1 || opts.jobs > MAX_JOBS) {
    throw new RangeError(`generateBareosSource: jobs must be an integer from 1 to ${MAX_JOBS}, got ${opts.jobs}`);
  }
  if (!Number.isSafeInteger(opts.seed)) {
    throw new RangeError(`generateBareosSource: seed must be a safe integer, got ${opts.seed}`);
  }
  if (opts.files !== undefined && (!Number.isSafeInteger(opts.files) || opts.files < 0 || opts.files > 2e9)) {
    throw new RangeError(`generateBareosSource: files must be an integer from 0 to 2000000000, got ${opts.files}`);
  }
  const clients = opts.clients ?? DEFAULT_CLIENTS;
  if (!Number.isSafeInteger(clients) || clients < 1 || clients > 10_000) {
    throw new RangeError(`generateBareosSource: clients must be an integer from 1 to 10000, got ${clients}`);
  }
  if (opts.endTime !== undefined) {
    if (opts.endDate !== undefined) throw new RangeError('generateBareosSource: give endDate or endTime, not both');
    const endTime = wallSeconds(opts.endTime, true);
    if (Number.isNaN(endTime)) {
      throw new RangeError(
        `generateBareosSource: endTime must be a valid 'YYYY-MM-DD HH:MM:SS' time, got '${opts.endTime}'`,
      );
    }
    const endDay = Math.floor(endTime / DAY);
    if (endDay < 366 || endDay > 24_800) {
      throw new RangeError(
        `generateBareosSource: endTime must be between 1971-01-02 and 2037-11-26, got '${opts.endTime}'`,
      );
    }
    return { endDay, endTime, clients };
  }
  const endDate = opts.endDate ?? DEFAULT_END_DATE;
  const seconds = wallSeconds(endDate, false);
  if (Number.isNaN(seconds)) {
    throw new RangeError(`generateBareosSource: endDate must be a valid 'YYYY-MM-DD' date, got '${endDate}'`);
  }
  const endDay = seconds / DAY;
  if (endDay < 365 || endDay > 24_800) {
    throw new RangeError(`generateBareosSource: endDate must be between 1971-01-01 and 2037-11-26, got '${endDate}'`);
  }
  return { endDay, endTime: null, clients };
}

/**
 * The wall clock of time zone `timeZone` at `instant`, as `'YYYY-MM-DD HH:MM:SS'`: what a director
 * whose catalog is read in that zone (a source's `timezone`) writes for that instant. Use it to
 * turn "now" into {@link GenerateBareosOptions.endTime}.
 * @throws RangeError for a zone this Node.js does not know.
 */
export function directorWallClock(instant: Date, timeZone: string): string {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  }).formatToParts(instant);
  const p = (type: Intl.DateTimeFormatPartTypes): string => parts.find((x) => x.type === type)?.value ?? '';
  return `${p('year').padStart(4, '0')}-${p('month')}-${p('day')} ${p('hour')}:${p('minute')}:${p('second')}`;
}

function pickClients(clients: ClientProfile[], roles: string[], fallback: number[], max: number): ClientProfile[] {
  const out = clients.filter((c) => roles.includes(c.role)).slice(0, max);
  if (out.length) return out;
  return fallback
    .filter((i) => i < clients.length)
    .map((i) => clients[i])
    .slice(0, max);
}

/** The plans' context for a history whose last plan is day `endDay`. */
function makeCtx(seed: number, profiles: ClientProfile[], endDay: number, finalDay: number | null): Ctx {
  return {
    seed,
    endDay,
    clients: profiles,
    evening: [...profiles].sort((a, b) => a.schedSec - b.schedSec || a.id - b.id),
    verifyClients: pickClients(profiles, ['ldap', 'vpn'], [2, 3], 2),
    migrateClients: pickClients(profiles, ['file', 'nas'], [2], 8),
    linuxV2At: (endDay - 45) * DAY + 14 * HOUR + 202,
    commentEra: (endDay - 2000) * DAY + 10 * HOUR + 1234,
    finalDay,
  };
}

/** How a history ends: its context, last plan, "now" (plan time, s) and the shift of every emitted time (s). */
interface HistoryEnd {
  ctx: Ctx;
  lastPlan: PlanJob[];
  now: number;
  shift: number;
}

/** `endDate` histories: "now" is an evening instant on the end date at which at least one job is running. */
function eveningEnd(seed: number, profiles: ClientProfile[], endDay: number): HistoryEnd {
  const ctx = makeCtx(seed, profiles, endDay, null);
  const lastPlan = buildPlan(ctx, endDay);
  const now0 = endDay * DAY + 22 * HOUR + 900 + Math.floor(mulberry32(mix(seed, 0x6e6f77))() * 1800);
  let now = now0;
  if (!lastPlan.some((j) => j.runStart !== null && j.runEnd !== null && j.runStart <= now0 && j.runEnd > now0)) {
    let latest = -Infinity;
    for (const j of lastPlan) if (j.runStart !== null && j.runStart <= now0) latest = Math.max(latest, j.runStart);
    if (latest > -Infinity) now = latest + 1;
  }
  return { ctx, lastPlan, now, shift: 0 };
}

/**
 * `endTime` histories: the last plan's backups all succeed, quickly (see `finalDay`), its night
 * copies, migrations and admin jobs are left out, and "now" is a few minutes after the last of its
 * jobs ended. Of the plans of the day of `endTime` and the day before, the one needing the smaller
 * shift is taken; every emitted time is shifted by the whole hours that put "now" within the hour
 * before `endTime`.
 */
function recentEnd(seed: number, profiles: ClientProfile[], endTime: number): HistoryEnd {
  let best: HistoryEnd | null = null;
  for (const day of [Math.floor(endTime / DAY) - 1, Math.floor(endTime / DAY)]) {
    const ctx = makeCtx(seed, profiles, day, day);
    const copiesAt = (day + 1) * DAY + 3 * HOUR + 900;
    const lastPlan = buildPlan(ctx, day).filter((j) => j.sched < copiesAt);
    let last = day * DAY;
    for (const j of lastPlan) last = Math.max(last, j.sched, j.runEnd ?? j.sched);
    const now = last + 60 + (mix(seed, day, 4) % 840);
    const shift = Math.floor((endTime - now) / HOUR) * HOUR;
    if (!best || Math.abs(shift) < Math.abs(best.shift)) best = { ctx, lastPlan, now, shift };
  }
  return best!;
}

/**
 * Creates (if missing) the Bareos catalog tables of `dev/bareos-schema.sql` in the
 * target database, empties `job`, `client`, `pool` and `fileset` (TRUNCATE ... RESTART
 * IDENTITY) and fills them with a deterministic, realistic director history of exactly
 * `opts.jobs` jobs ending on `opts.endDate`, or at `opts.endTime` (see the module comment for
 * the model); with `opts.files`, also the `file`, `path` and `version` tables of Bareos schema 2230
 * (dev/bareos-file-generator.ts).
 *
 * Everything after the schema runs in one transaction, so a failure leaves the previous
 * contents. Rows are inserted in batches with `INSERT ... SELECT * FROM unnest(...)`; int8
 * values are passed as decimal text (some exceed 2^53). Uses one `pg.Client` with
 * `application_name` `catalog-rebuild-gen`, always closed.
 *
 * @param opts target database and history shape.
 * @returns counts and the first/last job start time, read back from the database.
 * @throws TypeError when `databaseUrl` is missing; RangeError when `jobs`, `seed`,
 *   `clients`, `endDate` or `endTime` are invalid (or both are given), or when the history
 *   would begin before 1970; the `pg` error (e.g. code `3D000` for a missing database) on any database failure.
 */
export async function generateBareosSource(opts: GenerateBareosOptions): Promise<GenerateBareosResult> {
  const v = validate(opts);
  const clientCount = v.clients;
  const seed = opts.seed;
  const profiles = buildClients(seed, clientCount);
  const { ctx, lastPlan, now, shift } =
    v.endTime === null ? eveningEnd(seed, profiles, v.endDay) : recentEnd(seed, profiles, v.endTime);
  const endDay = ctx.endDay;
  const existing = (plan: PlanJob[]): number => {
    let n = 0;
    for (const j of plan) if (j.sched <= now) n++;
    return n;
  };

  // count backwards to find the first plan and how many of its jobs to cut
  let firstDay = endDay;
  let trim = 0;
  {
    let acc = 0;
    for (let d = endDay; ; d--) {
      if (d < 1) {
        throw new RangeError(
          `generateBareosSource: ${opts.jobs} jobs with ${clientCount} clients would start before 1970; use more clients or a later endDate`,
        );
      }
      const n = existing(d === endDay ? lastPlan : buildPlan(ctx, d));
      if (acc + n >= opts.jobs) {
        firstDay = d;
        trim = acc + n - opts.jobs;
        break;
      }
      acc += n;
    }
  }

  const schema = fs.readFileSync(path.join(projectRoot(), 'dev/bareos-schema.sql'), 'utf8');
  const fmt = new TimeFormat(shift);
  const client = new Client({ connectionString: opts.databaseUrl, application_name: 'catalog-rebuild-gen' });
  await client.connect();
  let files: GeneratedFiles | undefined;
  try {
    await client.query(schema);
    await client.query('BEGIN');
    try {
      await client.query('TRUNCATE job, client, pool, fileset RESTART IDENTITY');
      await insertReferenceRows(client, ctx, firstDay, fmt);

      const st: EmitState = { nextId: 1, seq: 0, sessId: 0, sessTime: 0, maxId: 0, emitted: 0 };
      let batch = emptyBatch();
      let pending: Promise<unknown> | null = null;
      const flush = async (): Promise<void> => {
        if (pending) await pending;
        pending = null;
        if (batch[0].length) {
          const p = client.query(INSERT_JOBS, batch);
          p.catch(() => undefined); // awaited by the next flush; never an unhandled rejection
          pending = p;
          batch = emptyBatch();
        }
      };
      for (let d = firstDay; d <= endDay; d++) {
        const plan = d === endDay ? lastPlan : buildPlan(ctx, d);
        const idRng = mulberry32(mix(seed, d, 2));
        if (d === firstDay || mix(seed, d, 3) % 41 === 0) {
          // storage daemon (and director) (re)start this morning: new session time, seq restarts
          st.sessTime = d * DAY + 6 * HOUR - 600 + Math.floor(idRng() * 300);
          st.sessId = 0;
          st.seq = 0;
        }
        let skip = d === firstDay ? trim : 0;
        for (const j of plan) {
          if (j.sched > now) continue; // not created yet
          if (idRng() < 0.004) st.nextId += 1 + Math.floor(idRng() * 4); // ids lost to deleted/failed creations
          j.id = st.nextId++;
          st.seq = (st.seq + 1) % 100;
          const started = j.runStart !== null && j.runStart <= now;
          const sess = j.writesVolume && started ? ++st.sessId : 0;
          if (skip > 0) {
            skip--; // pruned before the catalog was dumped: consumed an id, no row
            continue;
          }
          appendRow(batch, j, now, st.seq, sess, st.sessTime, fmt);
          st.maxId = j.id;
          st.emitted++;
          if (batch[0].length >= BATCH_ROWS) await flush();
        }
      }
      await flush();
      await flush();
      if (st.emitted !== opts.jobs) {
        throw new Error(`generateBareosSource: internal error: emitted ${st.emitted} jobs, expected ${opts.jobs}`);
      }
      await client.query(`SELECT setval(pg_get_serial_sequence('job', 'jobid'), $1::int)`, [st.maxId]);
      if (opts.timezone && opts.timezone !== 'UTC') {
        // The rows carry the epoch of the naive times read as UTC: a director in another zone wrote
        // the epoch of its local wall clock.
        await client.query(
          `UPDATE job SET jobtdate = extract(epoch FROM coalesce(endtime, starttime, schedtime) AT TIME ZONE $1)::bigint
           WHERE jobtdate <> 0`,
          [opts.timezone],
        );
      }
      if (opts.files !== undefined) files = await generateBareosFiles(client, opts.files, seed);
      else await emptyBareosFiles(client);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
    await client.query(`ANALYZE job, client, pool, fileset${files ? ', file, path' : ''}`);
    const { rows } = await client.query<{
      jobs: string;
      max_jobid: number | null;
      clients: string;
      first_start: string | null;
      last_start: string | null;
    }>(
      `SELECT (SELECT count(*) FROM job)::text AS jobs,
              (SELECT max(jobid) FROM job) AS max_jobid,
              (SELECT count(*) FROM client)::text AS clients,
              (SELECT to_char(min(starttime), 'YYYY-MM-DD HH24:MI:SS') FROM job) AS first_start,
              (SELECT to_char(max(starttime), 'YYYY-MM-DD HH24:MI:SS') FROM job) AS last_start`,
    );
    const r = rows[0];
    return {
      jobs: Number(r.jobs),
      maxJobId: r.max_jobid ?? 0,
      clients: Number(r.clients),
      firstStart: r.first_start,
      lastStart: r.last_start,
      ...(files ? { files } : {}),
    };
  } finally {
    await client.end();
  }
}

/** Appends one job row (after "now" handling) to the column arrays of a batch. */
function appendRow(
  b: Cell[][],
  j: PlanJob,
  now: number,
  seq: number,
  sessId: number,
  sessTime: number,
  fmt: TimeFormat,
): void {
  let status = j.status;
  let start = j.catStart;
  let end = j.catEnd;
  let realEnd = j.runEnd;
  let files = j.files;
  let bytes: JobValue = j.bytes;
  let read: JobValue = j.readBytes;
  let errors = j.errors;
  let missing = j.missing;
  let vsId = sessId;
  let vsTime = sessId ? fmt.epoch(sessTime) : 0;
  let purged = 0;
  const runStart = j.runStart;
  if (runStart !== null && j.runEnd !== null && j.runEnd > now) {
    // not finished at "now": running (R) or still queued (C, not started)
    status = runStart <= now ? 'R' : 'C';
    start = runStart <= now ? runStart : null;
    end = null;
    realEnd = null;
    files = 0;
    bytes = 0;
    read = 0;
    errors = 0;
    missing = 0;
    vsId = 0;
    vsTime = 0;
  } else if (j.fileRetention > 0 && j.runEnd !== null && j.runEnd < now - j.fileRetention) {
    purged = 1;
  }
  const type = j.migratedBy && j.migratedBy.runEnd !== null && j.migratedBy.runEnd <= now ? 'M' : j.type;
  const tdate = end ?? start ?? j.sched;
  // Bareos replaces spaces of the resource name in the unique job name
  const unique = `${j.name.replace(/ /g, '_')}.${fmt.jobName(j.nameAt)}_${pad2(seq)}`;
  b[0].push(j.id);
  b[1].push(unique);
  b[2].push(j.name);
  b[3].push(type);
  b[4].push(j.level);
  b[5].push(j.clientId);
  b[6].push(status);
  b[7].push(fmt.ts(j.sched));
  b[8].push(fmt.ts(start));
  b[9].push(fmt.ts(end));
  b[10].push(fmt.ts(realEnd));
  b[11].push(String(fmt.epoch(tdate)));
  b[12].push(vsId);
  b[13].push(vsTime);
  b[14].push(files);
  b[15].push(asText(bytes));
  b[16].push(asText(read));
  b[17].push(errors);
  b[18].push(missing);
  b[19].push(j.poolId);
  b[20].push(j.filesetId);
  b[21].push(j.prior ? j.prior.id : 0);
  b[22].push(purged);
  b[23].push(0);
  b[24].push(0);
  b[25].push(0);
  b[26].push(j.comment);
}

/** Inserts the client, pool and fileset rows (explicit ids) and sets their sequences. */
async function insertReferenceRows(client: Client, ctx: Ctx, firstDay: number, fmt: TimeFormat): Promise<void> {
  const cs = ctx.clients;
  await client.query(
    `INSERT INTO client (clientid, name, uname, autoprune, fileretention, jobretention)
     SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::smallint[], $5::bigint[], $6::bigint[])`,
    [
      cs.map((c) => c.id),
      cs.map((c) => c.name),
      cs.map((c) => c.uname),
      cs.map((c) => c.autoprune),
      cs.map((c) => String(c.fileRetention)),
      cs.map((c) => String(c.jobRetention)),
    ],
  );

  const rng = mulberry32(mix(ctx.seed, 0x706f6f));
  const G = 1_000_000_000;
  //            name,          type,      label,          volret(d), maxvols, maxvolbytes, maxvoljobs, nextpool
  const pools: [string, string, string, number, number, number, number, number][] = [
    ['Full', 'Backup', 'Full-', 365, 100, 50 * G, 0, POOL_OFFSITE],
    ['Differential', 'Backup', 'Differential-', 90, 100, 10 * G, 0, POOL_OFFSITE],
    ['Incremental', 'Backup', 'Incremental-', 30, 100, G, 0, POOL_ARCHIVE],
    ['Scratch', 'Scratch', '*', 0, 0, 0, 0, 0],
    ['Offsite', 'Backup', 'Offsite-', 365, 200, 50 * G, 0, 0],
    ['Tape-Archive', 'Backup', 'LTO8-', 3650, 0, 0, 0, 0],
  ];
  await client.query(
    `INSERT INTO pool (poolid, name, numvols, maxvols, useonce, usecatalog, acceptanyvolume, volretention,
                       voluseduration, maxvoljobs, maxvolfiles, maxvolbytes, autoprune, recycle, actiononpurge,
                       pooltype, labeltype, labelformat, enabled, scratchpoolid, recyclepoolid, nextpoolid)
     SELECT p.id, p.name, p.numvols, p.maxvols, 0, 1, 0, p.volret, 0, p.maxvoljobs, 0, p.maxvolbytes,
            1, 1, 0, p.pooltype, 0, p.label, 1, 0, 0, p.nextpool
     FROM unnest($1::int[], $2::text[], $3::int[], $4::int[], $5::bigint[], $6::int[], $7::bigint[], $8::text[], $9::text[], $10::int[])
       AS p(id, name, numvols, maxvols, volret, maxvoljobs, maxvolbytes, pooltype, label, nextpool)`,
    [
      pools.map((_, i) => i + 1),
      pools.map((p) => p[0]),
      pools.map((p) => (p[4] ? int(rng, 5, p[4]) : int(rng, 0, 40))),
      pools.map((p) => p[4]),
      pools.map((p) => String(p[3] * DAY)),
      pools.map((p) => p[6]),
      pools.map((p) => String(p[5])),
      pools.map((p) => p[1]),
      pools.map((p) => p[2]),
      pools.map((p) => p[7]),
    ],
  );

  const md5 = (): string => {
    const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    let s = '';
    for (let i = 0; i < 22; i++) s += abc[Math.floor(rng() * 64)];
    return s;
  };
  const v1At = Math.min(firstDay * DAY - HOUR - 1234, ctx.linuxV2At - 30 * DAY);
  const text = (name: string, include: string, extra = ''): string =>
    `FileSet {\n  Name = "${name}"\n  Include {\n    Options {\n      Signature = MD5\n${extra}    }\n    File = ${include}\n  }\n}\n`;
  const filesets: [number, string, string, number][] = [
    [FS_SELFTEST, 'SelfTest', text('SelfTest', '"/usr/sbin"'), v1At],
    [FS_CATALOG, 'Catalog', text('Catalog', '"/var/lib/bareos/bareos.sql"'), v1At + 60],
    [FS_LINUX_V1, 'LinuxAll', text('LinuxAll', '/', '      One FS = No\n'), v1At + 120],
    [FS_WINDOWS, 'Windows All Drives', text('Windows All Drives', '/', '      Drive Type = fixed\n'), v1At + 180],
    [FS_DBDUMP, 'DatabaseDump', text('DatabaseDump', '"\\\\|/usr/lib/bareos/scripts/dump-databases"'), v1At + 240],
    [FS_MAIL, 'MailSpool', text('MailSpool', '"/var/vmail"', '      Compression = LZ4\n'), v1At + 300],
    [FS_HSM, 'HSM-Archive', text('HSM-Archive', '"/hsm"'), v1At + 360],
    [
      FS_LINUX_V2,
      'LinuxAll',
      text('LinuxAll', '/', '      One FS = No\n      Exclude = yes\n      WildDir = "/var/cache/*"\n'),
      ctx.linuxV2At,
    ],
  ];
  await client.query(
    `INSERT INTO fileset (filesetid, fileset, filesettext, md5, createtime)
     SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::timestamp[])`,
    [
      filesets.map((f) => f[0]),
      filesets.map((f) => f[1]),
      filesets.map((f) => f[2]),
      filesets.map(() => md5()),
      filesets.map((f) => fmt.ts(f[3])),
    ],
  );
  await client.query(`SELECT setval(pg_get_serial_sequence('client', 'clientid'), $1::int)`, [cs.length]);
  await client.query(`SELECT setval(pg_get_serial_sequence('pool', 'poolid'), $1::int)`, [pools.length]);
  await client.query(`SELECT setval(pg_get_serial_sequence('fileset', 'filesetid'), $1::int)`, [filesets.length]);
}
