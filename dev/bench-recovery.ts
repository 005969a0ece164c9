/**
 * `npm run bench:recovery`: recovery from worker deaths with default settings (heartbeat timeout
 * 15 s, pages sized by the plan, 4 pages in flight). On a private Temporal dev server (free ports) and fresh
 * databases, two workers rebuild a generated Bareos source while the bench SIGKILLs a worker inside a
 * page transaction (found through pg_stat_activity, frozen with SIGSTOP, checked, killed) at least
 * `--kills` times, starting a replacement right after each kill. It prints per kill the time from
 * SIGKILL to the commit of each page the dead worker had in flight (ledger `committed_at` of the
 * retry minus the kill time) and the rows written again, then median and max.
 *
 * Options: --jobs N (default 200,000), --kills N (default 3), --pause-ms N (pause between page
 * starts, default 300: stretches the copy phase so that every kill lands inside it), --page-size N
 * (fixes rows per page; default: the plan sizes them).
 */
import { Command } from 'commander';
import { getProgress, startRebuild, waitForResult } from '../client';
import { generateBareosSource } from './bareos-generator';
import { LIMITS } from '../workflows/definitions';
import {
  compareCatalogToSource,
  privateTemporal,
  temporalClient,
  testDatabases,
  testEnv,
  uniqueQueue,
  writeConfig,
} from './harness/harness';
import { events, killInsidePageTransaction, ledger, median, pageAttempts, WorkerFleet } from './harness/faults';
import { waitFor } from './harness/wait';

interface KillRecord {
  n: number;
  identity: string;
  at: number;
  state: string;
}

async function main(): Promise<void> {
  const o = new Command('bench-recovery')
    .option('--jobs <n>', 'jobs in the generated source', (v) => Number(v), 200_000)
    .option('--kills <n>', 'kills inside page transactions', (v) => Number(v), 3)
    .option('--page-size <n>', 'rows per page (default: sized by the plan)', (v) => Number(v))
    .option('--pause-ms <n>', 'pause between page starts (ms)', (v) => Number(v), 300)
    .parse()
    .opts<{ jobs: number; kills: number; pauseMs: number; pageSize?: number }>();
  const heartbeatTimeoutMs = LIMITS.heartbeatTimeoutMs.default;
  const log = (s: string) => console.log(s);

  const temporal = await privateTemporal();
  const dbs = await testDatabases('benchrec');
  let fleet: WorkerFleet | undefined;
  let closeClient: (() => Promise<void>) | undefined;
  try {
    log(`source: generating ${o.jobs.toLocaleString('en-US')} Bareos jobs`);
    await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: o.jobs, seed: 5 });
    const taskQueue = uniqueQueue('benchrec');
    fleet = new WorkerFleet(testEnv({ address: temporal.address, configFile: writeConfig(dbs), taskQueue }));
    await Promise.all([fleet.spawn(), fleet.spawn()]);
    const tc = await temporalClient(temporal.address);
    closeClient = tc.close;
    const catalog = 'bench-recovery';
    // Defaults: page size, concurrency and heartbeat timeout are not set.
    const { handle } = await startRebuild(
      tc.client,
      { catalog, source: 'director', pauseBetweenPagesMs: o.pauseMs, ...(o.pageSize ? { pageSize: o.pageSize } : {}) },
      { taskQueue },
    );
    const versionId = await waitFor('the plan', async () => (await getProgress(handle)).versionId, { intervalMs: 50 });
    const planned = await getProgress(handle);
    const pageSize = `${planned.pageSize ?? '?'} rows (${planned.pageSizing ?? '?'})`;
    const started = Date.now();
    log(
      `rebuild: version ${versionId}, ${planned.pagesTotal} pages of ${pageSize}, ${LIMITS.concurrency.default} pages in flight, ` +
        `heartbeat timeout ${heartbeatTimeoutMs} ms (default), sticky schedule-to-start 3 s, ${o.pauseMs} ms between page starts, 2 workers`,
    );

    const kills: KillRecord[] = [];
    for (let i = 1; i <= o.kills; i++) {
      // Spread the kills: wait for a page committed after the previous kill.
      const since = kills.length ? kills[kills.length - 1].at : 0;
      await waitFor(
        'a page committed since the last kill',
        async () => (await ledger(dbs.catalogPool, versionId)).some((r) => (r.committedAt ?? 0) > since + 500),
        {
          timeoutMs: 120_000,
          intervalMs: 20,
        },
      );
      // Only a worker that holds no retry: each kill's recovery is then measured on its own.
      const candidates = async () => {
        const busy = await dbs.catalogPool.query<{ worker_identity: string }>(
          `SELECT DISTINCT a.worker_identity FROM page_attempt a
           LEFT JOIN page p ON p.version_id = a.version_id AND p.page_no = a.page_no
           WHERE a.version_id = $1 AND a.attempt >= 2 AND p.page_no IS NULL`,
          [versionId],
        );
        const holdingRetries = new Set(busy.rows.map((r) => r.worker_identity));
        return fleet!.live().filter((w) => !holdingRetries.has(w.identity));
      };
      const { worker, session, at } = await killInsidePageTransaction(dbs.catalogPool, fleet, candidates, 120_000);
      kills.push({
        n: i,
        identity: worker.identity,
        at,
        state: `${session.state}: ${session.query.replace(/\s+/g, ' ').slice(0, 40)}`,
      });
      log(
        `kill ${i}: SIGKILL ${worker.identity} at +${((at - started) / 1000).toFixed(1)} s inside a page transaction (${kills[i - 1].state})`,
      );
      await fleet.spawn(); // the replacement, right away
    }
    const result = await waitForResult(handle);
    if (!result.published) throw new Error(`rebuild ended unpublished: ${JSON.stringify(result)}`);
    const cmp = await compareCatalogToSource(dbs.catalogPool, dbs.sourcePool, catalog);
    if (cmp.catalog !== cmp.source) throw new Error(`catalog differs from the source: ${cmp.catalog} vs ${cmp.source}`);

    const rows = await ledger(dbs.catalogPool, versionId);
    const byPage = new Map(rows.map((r) => [r.pageNo, r]));
    const attempts = await pageAttempts(dbs.catalogPool, versionId);
    const retryEvents = await events(dbs.catalogPool, versionId, 'page_retry');
    const recoveries: number[] = [];
    const rewritten: number[] = [];
    log('');
    log(
      'kill  worker            lost pages: SIGKILL → commit of the next attempt (retry start)              rows written again',
    );
    for (const k of kills) {
      const mine = attempts.filter((a) => a.workerIdentity === k.identity);
      const lost = [...new Set(mine.map((a) => a.pageNo))].filter((p) => byPage.get(p)?.workerIdentity !== k.identity);
      const parts: string[] = [];
      let worst: number | null = null;
      let rowsAgain = 0;
      for (const p of lost) {
        const r = byPage.get(p)!;
        const killedAttempt = Math.max(...mine.filter((a) => a.pageNo === p).map((a) => a.attempt));
        const retry = attempts.find((a) => a.pageNo === p && a.attempt === killedAttempt + 1);
        const startS = retry ? `${((retry.startedAt - k.at) / 1000).toFixed(2)} s` : 'n/a';
        rowsAgain += r.rows;
        if (r.attempt === killedAttempt + 1) {
          const ms = r.committedAt! - k.at;
          worst = Math.max(worst ?? 0, ms);
          parts.push(`page ${p} attempt ${r.attempt}: ${(ms / 1000).toFixed(2)} s (${startS})`);
        } else {
          // The retry itself was lost (its worker was killed later): only its start measures this kill.
          parts.push(
            `page ${p} attempt ${killedAttempt + 1} started after ${startS}, lost too; committed by attempt ${r.attempt}`,
          );
        }
      }
      if (!lost.length) parts.push('none');
      if (worst !== null) recoveries.push(worst);
      rewritten.push(rowsAgain);
      const named = retryEvents.filter((e) => e.details.lastWorkerIdentity === k.identity).length;
      log(
        `${String(k.n).padStart(4)}  ${k.identity.padEnd(16)}  ${parts.join(', ').padEnd(70)}  ${rowsAgain} (${lost.length} page(s)); ${named} page_retry event(s) name it`,
      );
    }
    const target = heartbeatTimeoutMs + 3_000;
    log('');
    log(
      `recovery over ${recoveries.length} kills (SIGKILL → lost page committed by its retry): median ${(median(recoveries) / 1000).toFixed(2)} s, ` +
        `max ${(Math.max(...recoveries) / 1000).toFixed(2)} s; target < ${target / 1000} s (heartbeat timeout + 3 s): ${Math.max(...recoveries) < target ? 'met' : 'MISSED'}`,
    );
    log(
      `work lost per kill: median ${median(rewritten)} rows, max ${Math.max(...rewritten)} rows (pages of ${pageSize}; at most one page per page in flight)`,
    );
    log(
      `rebuild: published version ${result.versionId}, ${result.pagesTotal} pages, ${result.rowsUpserted} rows, ${result.retries} retries, ${(result.durationMs / 1000).toFixed(1)} s; catalog equals source (${cmp.rows} rows)`,
    );
  } finally {
    await fleet?.stopAll();
    await closeClient?.().catch(() => undefined);
    await temporal.stop();
    await dbs.drop();
  }
}

main().catch((err) => {
  console.error(`bench-recovery: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
