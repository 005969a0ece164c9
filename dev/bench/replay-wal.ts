/**
 * The WAL of a replayed page against its first write, through the real copyPage activity in
 * MockActivityEnvironment on the scratch database: every page written once, then again with its
 * ledger row deleted (so the attempt writes instead of finding the page committed), then again
 * after a CHECKPOINT (full-page images). Minimum and median over the pages, since other sessions on
 * the same server only ever add WAL to a measurement.
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

const noop = () => undefined;
/** Activities run in MockActivityEnvironment log retries as warnings: expected here, so not printed. */
const quiet = { logger: { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: noop } };

/** Runs the measurement on the migrated `scratch` database and prints the `replayed page WAL` figure. */
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
      {
        catalog: 'bench-wal',
        source: 'director',
        versionId: plan.versionId,
        pageNo,
      },
    );
  const n = Math.min(ctx.o.walPages, plan.pagesTotal);
  const first: number[] = [];
  const replay: number[] = [];
  const replayCkpt: number[] = [];
  const measure = async (pageNo: number, attempt: number, deleteLedger: boolean): Promise<number> => {
    if (deleteLedger)
      await scratch.query(`DELETE FROM page WHERE version_id = $1 AND page_no = $2`, [plan.versionId, pageNo]);
    const lsn = await walLsn(scratch);
    const r = (await copy(pageNo, attempt)) as CopyPageResult;
    const bytes = await walSince(scratch, lsn);
    if (r.alreadyCommitted)
      throw new Error(`page ${pageNo} attempt ${attempt} found the page committed: nothing was replayed`);
    return bytes;
  };
  for (let p = 1; p <= n; p++) first.push(await measure(p, 1, false));
  for (let p = 1; p <= n; p++) replay.push(await measure(p, 2, true));
  await ctx.checkpoint();
  for (let p = 1; p <= n; p++) replayCkpt.push(await measure(p, 3, true));
  // Other sessions only ever add WAL to a measurement: the minimum over pages is the best estimate of each.
  const firstMin = Math.min(...first);
  const ratio = Math.min(...replay) / firstMin;
  const ratioCkpt = Math.min(...replayCkpt) / firstMin;
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  ctx.figures.add(
    'replayed page WAL',
    `${fmtInt(Math.min(...replay))} bytes vs ${fmtInt(firstMin)} bytes for its first write = ${pct(ratio)} (copyPage with its ledger row deleted; minimum over ${n} pages, medians ${fmtInt(median(replay))} vs ${fmtInt(median(first))}; target < 10%: ${ratio < 0.1 ? 'met' : 'MISSED'}); ` +
      (ctx.canCheckpoint()
        ? `replayed after a CHECKPOINT: ${fmtInt(Math.min(...replayCkpt))} bytes = ${pct(ratioCkpt)}`
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
}
