/**
 * The WAL of a replayed page against its first write, through the real copyPage activity (its
 * public function only) in MockActivityEnvironment on the scratch database: every page written
 * once (attempt 1); then each committed page run again three times (attempts 2–4: the replay the
 * target is about, a retry of a page that already committed), and once more after a CHECKPOINT
 * (attempt 5, full-page images); then, as a stress of the write path, each page run again with its
 * ledger row deleted by hand (attempt 6), so the attempt rewrites the page's rows (reported as not measured
 * when the activity refuses that state). WAL from pg_current_wal_insert_lsn() around each call;
 * other sessions on the same server only ever add WAL to a measurement, so the minimum over the
 * pages is the estimate with no other writer (medians are printed too).
 */
import type { Pool } from 'pg';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../../activities';
import type { SourceRegistry } from '../../lib/sources';
import type { CopyPageInput, CopyPageResult, PlanResult } from '../../workflows/definitions';
import { median } from '../harness/faults';
import type { BenchContext } from './context';
import { fmtInt } from './context';
import { walLsn, walSince } from './tables';

/** Replays of each committed page measured before the CHECKPOINT. */
const REPEATS = 3;
const noop = () => undefined;
/** Activities run in MockActivityEnvironment log retries as warnings: expected here, so not printed. */
const quiet = { logger: { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: noop } };

/** Runs the measurement on the migrated `scratch` database and prints the two `replayed page WAL` figures. */
export async function runReplayWal(ctx: BenchContext, scratch: Pool, sources: SourceRegistry): Promise<void> {
  const acts = createActivities({ pool: scratch, sources, identity: 'bench@localhost', buildId: 'bench' });
  const plan: PlanResult = await new MockActivityEnvironment({}, quiet).run(acts.planRebuild, {
    catalog: 'bench-wal',
    source: 'director',
    pageSize: ctx.pageSize,
    workflowId: 'bench-wal',
    firstRunId: 'r1',
  });
  const copy = (pageNo: number, attempt: number) =>
    new MockActivityEnvironment({ attempt, heartbeatTimeoutMs: 15_000 }, quiet).run(
      acts.copyPage as (i: CopyPageInput) => Promise<CopyPageResult>,
      { catalog: 'bench-wal', source: 'director', versionId: plan.versionId, pageNo },
    );
  const n = Math.min(ctx.o.walPages, plan.pagesTotal);
  const measure = async (pageNo: number, attempt: number): Promise<{ bytes: number; r: CopyPageResult }> => {
    const lsn = await walLsn(scratch);
    const r = (await copy(pageNo, attempt)) as CopyPageResult;
    return { bytes: await walSince(scratch, lsn), r };
  };
  const pages = Array.from({ length: n }, (_, i) => i + 1);
  const first: number[] = [];
  for (const p of pages) first.push((await measure(p, 1)).bytes);
  // Each committed page is replayed REPEATS times (attempts 2, 3, …): more windows without another writer.
  const replay: number[] = [];
  for (let k = 0; k < REPEATS; k++) for (const p of pages) replay.push((await measure(p, 2 + k)).bytes);
  await ctx.checkpoint();
  const replayCkpt: number[] = [];
  for (const p of pages) replayCkpt.push((await measure(p, 2 + REPEATS)).bytes);
  const firstMin = Math.min(...first);
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const ratio = Math.min(...replay) / firstMin;
  const ratioCkpt = Math.min(...replayCkpt) / firstMin;
  ctx.figures.add(
    'replayed page WAL',
    `${fmtInt(Math.min(...replay))} bytes vs ${fmtInt(firstMin)} bytes for its first write = ${pct(ratio)} (copyPage run again on a committed page; ` +
      `minimum over ${n} pages × ${REPEATS}, medians ${fmtInt(median(replay))} vs ${fmtInt(median(first))}; target < 1%: ${ratio < 0.01 ? 'met' : 'MISSED'}); ` +
      (ctx.canCheckpoint()
        ? `after a CHECKPOINT: ${fmtInt(Math.min(...replayCkpt))} bytes = ${pct(ratioCkpt)}`
        : 'after a CHECKPOINT: not measured (not permitted)'),
    {
      replayBytes: Math.min(...replay),
      firstBytes: firstMin,
      ratio: +ratio.toFixed(4),
      afterCheckpointBytes: Math.min(...replayCkpt),
      afterCheckpointRatio: +ratioCkpt.toFixed(4),
      medians: { first: median(first), replay: median(replay), replayAfterCheckpoint: median(replayCkpt) },
    },
  );
  await rewrittenReplay(ctx, scratch, plan.versionId, pages, firstMin, measure);
}

/** The replay of each page with its ledger row deleted by hand: the page's rows written again over identical rows. */
async function rewrittenReplay(
  ctx: BenchContext,
  scratch: Pool,
  versionId: string,
  pages: number[],
  firstMin: number,
  measure: (pageNo: number, attempt: number) => Promise<{ bytes: number; r: CopyPageResult }>,
): Promise<void> {
  const label = 'rewritten page WAL (ledger row deleted)';
  const bytes: number[] = [];
  try {
    for (const p of pages) {
      await scratch.query(`DELETE FROM page WHERE version_id = $1 AND page_no = $2`, [versionId, p]);
      const m = await measure(p, 3 + REPEATS);
      if (m.r.alreadyCommitted) throw new Error(`page ${p} was found committed: nothing was rewritten`);
      bytes.push(m.bytes);
    }
  } catch (err) {
    ctx.figures.add(label, `not measured: ${(err as Error).message.split('\n')[0]}`, null);
    return;
  }
  const ratio = Math.min(...bytes) / firstMin;
  ctx.figures.add(
    label,
    `${fmtInt(Math.min(...bytes))} bytes = ${(ratio * 100).toFixed(1)}% of the first write (minimum over ${pages.length} pages, median ${fmtInt(median(bytes))})`,
    { bytes: Math.min(...bytes), ratio: +ratio.toFixed(4), median: median(bytes) },
  );
}
