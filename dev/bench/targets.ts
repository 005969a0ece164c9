/**
 * The bench's targets in one place, each figure judged on the value it is printed with, three
 * decimals (0.556 misses 0.56, which two decimals printed as 0.56; 0.5596 prints 0.560 and meets it):
 * - a full rebuild's rows/s against the psql pipe (p): at 10^6 jobs at least 0.44 (hold) and 0.6
 *   (aim), at 10^7 jobs at least 0.56 and 0.7;
 * - a `--files` rebuild's file rows/s against the file pipe (pf): at least 0.94 at 10^7 file
 *   records, 0.5 below that;
 * - a refresh's time against the full rebuild's: at most 0.10 (target), 0.03 (goal).
 * docs/performance.md quotes them.
 */

import { fmtInt } from './context';

/** One bound on a ratio. */
export interface RatioTarget {
  /** `hold`, `aim`, `target` or `goal`. */
  name: string;
  /** The ratio must be at least this (ratios where more is better). */
  atLeast?: number;
  /** The ratio must be at most this (ratios where less is better). */
  atMost?: number;
}

/** A ratio judged against its targets: `value` rounded to three decimals, each bound met or not. */
export interface Judged {
  value: number;
  scale: string;
  targets: (RatioTarget & { met: boolean })[];
}

/** The (p) targets per scale: from `fromJobs` jobs, at least `hold` and, as the aim, `aim`. */
const PIPE_SCALES = [
  { fromJobs: 5_000_000, scale: '10^7 jobs', hold: 0.56, aim: 0.7 },
  { fromJobs: 500_000, scale: '10^6 jobs', hold: 0.44, aim: 0.6 },
];

/**
 * The (p) targets at the scale of `jobs`: 10^7 from 5·10^6 jobs, 10^6 from 5·10^5; none below
 * (a smoke run has no target).
 */
export function pipeTargets(jobs: number): { scale: string; targets: RatioTarget[] } {
  const at = PIPE_SCALES.find((s) => jobs >= s.fromJobs);
  if (!at) return { scale: `${fmtInt(jobs)} jobs`, targets: [] };
  return {
    scale: at.scale,
    targets: [
      { name: 'hold', atLeast: at.hold },
      { name: 'aim', atLeast: at.aim },
    ],
  };
}

/** The (pf) targets at the scale of `fileRecords`: 0.94 from 5·10^6 records, else 0.5. */
export function filePipeTargets(fileRecords: number): { scale: string; targets: RatioTarget[] } {
  return fileRecords >= 5_000_000
    ? { scale: '10^7 file records', targets: [{ name: 'target', atLeast: 0.94 }] }
    : { scale: `${fmtInt(fileRecords)} file records`, targets: [{ name: 'goal', atLeast: 0.5 }] };
}

/** The refresh's targets: refresh/full at most 0.10, goal 0.03. */
export const REFRESH_TARGETS: RatioTarget[] = [
  { name: 'target', atMost: 0.1 },
  { name: 'goal', atMost: 0.03 },
];

/** `ratio` as the bench prints it: rounded to three decimals. */
export const printedRatio = (ratio: number): number => Math.round(ratio * 1000) / 1000;

/** `ratio` rounded to three decimals ({@link printedRatio}) and judged against `targets`. */
export function judge(ratio: number, at: { scale: string; targets: RatioTarget[] }): Judged {
  const value = printedRatio(ratio);
  return {
    value,
    scale: at.scale,
    targets: at.targets.map((t) => ({
      ...t,
      met: (t.atLeast === undefined || value >= t.atLeast) && (t.atMost === undefined || value <= t.atMost),
    })),
  };
}

/** `0.556 (at 10^7 jobs: hold ≥ 0.56 MISSED, aim ≥ 0.7 MISSED)`; `0.031 (no target at 1,000 jobs)`. */
export function judgedText(j: Judged): string {
  if (!j.targets.length) return `${j.value.toFixed(3)} (no target at ${j.scale})`;
  const parts = j.targets.map(
    (t) => `${t.name} ${t.atLeast !== undefined ? `≥ ${t.atLeast}` : `≤ ${t.atMost}`} ${t.met ? 'met' : 'MISSED'}`,
  );
  return `${j.value.toFixed(3)} (at ${j.scale}: ${parts.join(', ')})`;
}
