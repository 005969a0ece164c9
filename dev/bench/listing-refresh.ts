/**
 * `node dist/dev/bench/listing-refresh.js --snapshots N`: a listing source's refresh against its full
 * rebuild, in one process on fresh databases: a restic `snapshots --json` listing file of N records
 * (ids, hosts and times generated, seed-free and deterministic) is rebuilt, then 0.1% of it changes
 * spread over the whole listing (0.05% forgotten, 0.03% new, 0.02% changed in place), and the
 * refresh and a full rebuild of the changed listing run through the real activities (plan, pages one
 * after the other, seal, reconcile, publish; no Temporal). Prints `label: value` lines: each run's
 * seconds, the detection (the listing compared with the active version) alone, and refresh / full.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Command } from 'commander';
import { activityFixture, runActivity } from '../harness/activity-env';
import type { ActivityFixture } from '../harness/activity-env';
import type { SourceConfig } from '../../lib/config';

/** One generated restic snapshot record; `host` changes it in place. */
function snapshot(i: number, host = `host-${i % 50}`) {
  const t = new Date(Date.UTC(2020, 0, 1) + i * 600_000).toISOString();
  return { id: i.toString(16).padStart(64, '0'), time: t, paths: ['/srv'], hostname: host, tags: ['daily'] };
}

/** Plans, copies, seals, reconciles and publishes `catalog`; @returns seconds and the plan. */
async function rebuild(fx: ActivityFixture, catalog: string, run: string, refresh: boolean) {
  const t0 = performance.now();
  const steps: Record<string, number> = {};
  let mark = t0;
  const step = (name: string) => {
    const now = performance.now();
    steps[name] = Math.round(now - mark);
    mark = now;
  };
  const plan = await runActivity(fx.acts.planRebuild, {
    catalog,
    source: 'listing',
    ...(refresh ? { refresh: true } : {}),
    workflowId: `bench-${catalog}-${run}`,
    firstRunId: 'r1',
  });
  step('plan');
  if (!plan.upToDate) {
    for (let p = 1; p <= plan.pagesTotal; p++)
      await runActivity(fx.acts.copyPage, { catalog, source: 'listing', versionId: plan.versionId, pageNo: p });
    step('pages');
    await runActivity(fx.acts.sealVersion, { versionId: plan.versionId });
    step('seal');
    const r = await runActivity(fx.acts.reconcile, { catalog, source: 'listing', versionId: plan.versionId, round: 1 });
    if (!r.ok) throw new Error(`${catalog}: reconciliation failed: ${JSON.stringify(r)}`);
    step('reconcile');
    await runActivity(fx.acts.publishVersion, { catalog, versionId: plan.versionId, allowShrink: false });
    step('publish');
  }
  return { seconds: (performance.now() - t0) / 1000, plan, steps };
}

async function main(): Promise<void> {
  const opts = new Command()
    .requiredOption('--snapshots <n>', 'listing records', (v) => Number(v))
    .parse()
    .opts<{ snapshots: number }>();
  const n = opts.snapshots;
  if (!Number.isInteger(n) || n < 10_000) throw new Error('--snapshots must be a whole number ≥ 10000');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-bench-listing-'));
  const file = path.join(dir, 'snapshots.json');
  const config: SourceConfig = { kind: 'restic-json', path: file };
  const fx = await activityFixture('blisting', { jobs: 1, seed: 7, source: () => config });
  try {
    const all = Array.from({ length: n }, (_, i) => snapshot(i));
    fs.writeFileSync(file, JSON.stringify(all));
    const first = await rebuild(fx, 'lr', '1', true);
    // 0.1% changed, spread evenly: every 2,000th forgotten, every 5,000th changed in place, 0.03% new.
    const changed = all
      .filter((_, i) => i % 2_000 !== 1_000)
      .map((s, i) => (i % 5_000 === 2_500 ? snapshot(Number.parseInt(s.id, 16), 'moved') : s));
    for (let i = 0; i < Math.round(n * 0.0003); i++) changed.push(snapshot(n + i));
    fs.writeFileSync(file, JSON.stringify(changed));
    const refresh = await rebuild(fx, 'lr', '2', true);
    const full = await rebuild(fx, 'lf', '1', false);
    const { rows } = await fx.dbs.catalogPool.query<{ d: Record<string, number> }>(
      `SELECT details->'detectionMs' AS d FROM event WHERE version_id = $1 AND kind = 'planned'`,
      [refresh.plan.versionId],
    );
    const r = refresh.plan.refresh;
    const lines: [string, string][] = [
      ['listing records', `${n} → ${changed.length}`],
      ['first rebuild', `${first.seconds.toFixed(1)} s`],
      ['refresh changes', `${r?.newJobs} new, ${r?.changedJobs} changed, ${r?.deletedJobs} gone`],
      ['refresh', `${refresh.seconds.toFixed(2)} s`],
      ['refresh steps (ms)', JSON.stringify(refresh.steps)],
      ['full rebuild steps (ms)', JSON.stringify(full.steps)],
      ['refresh detection (listing compared)', `${rows[0]?.d?.listing ?? '?'} ms`],
      ['full rebuild of the changed listing', `${full.seconds.toFixed(2)} s`],
      ['refresh / full', (refresh.seconds / full.seconds).toFixed(3)],
    ];
    for (const [k, v] of lines) console.log(`${k}: ${v}`);
  } finally {
    await fx.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(1);
});
