/**
 * How a plan sizes its pages when `--page-size` does not fix them: from the source's measured cost
 * (rows at the watermark and the average bytes of a row's text), a target size per page activity, a
 * ceiling on page completions per second, and the cores to fill. Pure; unit-tested.
 */

/** The constants of the sizing rule (see {@link autoPageSize}). */
export const PAGE_SIZING = {
  /** Row text per page (bytes): about 16 MiB, which a page streams in about 1–3 s. */
  targetPageBytes: 16 * 1024 * 1024,
  /** Rows per second one rebuild is expected to copy (all pages in flight together). */
  expectedRowsPerSecond: 150_000,
  /** Page completions per second per rebuild at most, at the expected rate (each costs a Temporal round trip). */
  maxCompletionsPerSecond: 10,
  /** Pages per page in flight at least, so a small source still fills every slot (and the cores). */
  minPagesPerSlot: 4,
  /** Fewest rows per page. */
  minRows: 1_000,
  /** Most rows per page (the same bound as `--page-size`). */
  maxRows: 100_000,
  /** Row width assumed when none could be measured (bytes). */
  fallbackRowBytes: 256,
} as const;

/** What {@link autoPageSize} measured from. */
export interface PageSizingInput {
  /**
   * Source rows at or below the watermark. May be capped at {@link sizingRowsThatMatter}: any
   * count from there on gives the same size.
   */
  rows: number;
  /** Average bytes of one row's text (the page's row as the source reads it); null when not measured. */
  avgRowBytes: number | null;
  /** Pages in flight (the rebuild's concurrency), 1..64. */
  concurrency: number;
}

/** Which part of the rule decided the page size. */
export type PageSizeLimit = 'bytes' | 'completions' | 'cores' | 'minimum' | 'maximum';

/** The size chosen by {@link autoPageSize}. */
export interface PageSizeChoice {
  /** Rows per page, {@link PAGE_SIZING}.minRows..maxRows. */
  rowsPerPage: number;
  /** The part of the rule that decided it. */
  limitedBy: PageSizeLimit;
}

/**
 * Rows per page sized from measured cost. The rule, in order:
 * 1. **bytes**: as many rows as make `targetPageBytes` (16 MiB) of row text:
 *    `floor(16 MiB / avgRowBytes)` (256 bytes assumed when unmeasured);
 * 2. **completions**: at least `expectedRowsPerSecond / maxCompletionsPerSecond` rows
 *    (150,000 / 10 = 15,000), so page completions stay under 10 per second per rebuild;
 * 3. **cores**: at most `ceil(rows / (minPagesPerSlot × concurrency))` rows, so the plan has at least
 *    4 pages per page in flight and a small source still fills every slot (this wins over 2: such a
 *    source has at most 4 × concurrency pages in all);
 * 4. clamped to 1,000..100,000 rows (**minimum**, **maximum**).
 * @param m the measurements; `rows` ≥ 0, `avgRowBytes` > 0 or null, `concurrency` ≥ 1.
 * @returns rows per page and which step decided it.
 */
export function autoPageSize(m: PageSizingInput): PageSizeChoice {
  const s = PAGE_SIZING;
  const width = m.avgRowBytes && m.avgRowBytes > 0 ? m.avgRowBytes : s.fallbackRowBytes;
  let rows = Math.floor(s.targetPageBytes / width);
  let limitedBy: PageSizeLimit = 'bytes';
  const completionFloor = Math.ceil(s.expectedRowsPerSecond / s.maxCompletionsPerSecond);
  if (rows < completionFloor) {
    rows = completionFloor;
    limitedBy = 'completions';
  }
  const fill = Math.ceil(Math.max(0, m.rows) / (s.minPagesPerSlot * Math.max(1, m.concurrency)));
  if (fill < rows) {
    rows = fill;
    limitedBy = 'cores';
  }
  if (rows < s.minRows) return { rowsPerPage: s.minRows, limitedBy: 'minimum' };
  if (rows > s.maxRows) return { rowsPerPage: s.maxRows, limitedBy: 'maximum' };
  return { rowsPerPage: rows, limitedBy };
}

/**
 * Source rows beyond which the count no longer changes {@link autoPageSize}'s answer for this
 * concurrency (`minPagesPerSlot × concurrency × maxRows`): a plan may count rows up to this bound
 * only, so the count stays bounded at any size.
 */
export function sizingRowsThatMatter(concurrency: number): number {
  return PAGE_SIZING.minPagesPerSlot * Math.max(1, concurrency) * PAGE_SIZING.maxRows;
}

/** `n` with thousands separators (en-US). */
const num = (n: number): string => Math.round(n).toLocaleString('en-US');

/**
 * Why {@link autoPageSize} chose its size, in words for the `planned` event, e.g.
 * `about 16 MiB of row text per page at 212 bytes a row`.
 */
export function describePageSize(choice: PageSizeChoice, m: PageSizingInput): string {
  const s = PAGE_SIZING;
  const width = m.avgRowBytes ? `${num(m.avgRowBytes)} bytes a row` : 'row width not measured';
  switch (choice.limitedBy) {
    case 'bytes':
      return `about ${s.targetPageBytes / 1024 / 1024} MiB of row text per page at ${width}`;
    case 'completions':
      return `at most ${s.maxCompletionsPerSecond} page completions per second at ${num(s.expectedRowsPerSecond)} rows/s (${width})`;
    case 'cores':
      return `${s.minPagesPerSlot} pages per page in flight (${m.concurrency}) over ${num(m.rows)} rows`;
    case 'minimum':
      return `the minimum of ${num(s.minRows)} rows per page (${num(m.rows)} rows, ${width})`;
    case 'maximum':
      return `the maximum of ${num(s.maxRows)} rows per page (${width})`;
  }
}
