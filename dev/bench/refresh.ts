/**
 * `npm run bench -- --refresh`: after the product's full rebuild of catalog `bench`, the source is
 * changed as a director changes it, spread over the whole history (0.1 % of the jobs: a third new,
 * a third changed, a third deleted; with `--files`, 1 % new jobs with the file records of the jobs
 * they copy, and a few whose files the director purged), then, in the same run and on the same workers' build:
 * - `refresh detection`: the wall time of `start --refresh --dry-run --json` (the change detection
 *   alone, nothing written), and that time per 10^6 jobs;
 * - `refresh`: the wall time of `start --refresh --wait`, and its ratio to the full rebuild's
 *   (targets: at most 0.10, goal 0.03; dev/bench/targets.ts);
 * - `refresh: equivalence`: the refreshed `active_jobs` against the changed source, field by field.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { projectRoot } from '../../lib/paths';
import { compareCatalogToSource } from '../verify';
import type { WorkerProcess } from '../harness/harness';
import { spawnWorker, testEnv, uniqueQueue, writeConfig } from '../harness/harness';
import { within } from '../harness/wait';
import type { BenchContext } from './context';
import { fmtInt, fmtS } from './context';
import { memoryOf } from './cpu';
import { CATALOG, workersReady } from './product';
import { productWorkerEnv } from '../harness/product-worker-env';
import { judge, judgedText, REFRESH_TARGETS } from './targets';

/** What the changes did to the source. */
interface Changes {
  added: number;
  /** File records of the new jobs (with files). */
  newFiles: number;
  changed: number;
  deleted: number;
  purged: number;
}

/**
 * Changes the source, spread over its key range: new jobs above the highest id (copies of jobs
 * spread over the history), a changed comment on others, deleted ones; with files, purged files.
 */
async function changeSource(ctx: BenchContext): Promise<Changes> {
  const db = ctx.dbs.sourcePool;
  const { rows } = await db.query<{ n: string; max: string }>(
    `SELECT count(*)::text AS n, max(jobid)::text AS max FROM job`,
  );
  const jobs = Number(rows[0].n);
  const files = ctx.o.files !== undefined;
  const share = files ? 0.01 : 0.001;
  const each = Math.max(1, Math.round((jobs * share) / (files ? 1 : 3)));
  const step = Math.max(2, Math.floor(jobs / each));
  const pick = (offset: number) =>
    `SELECT jobid FROM (SELECT jobid, row_number() OVER (ORDER BY jobid) AS n FROM job) s WHERE n % ${step} = ${offset}`;
  // New jobs: copies of jobs spread over the history, under the next ids; with files, with their
  // JobFiles and a copy of their File rows (new FileIds), as a director writes a new backup's.
  const added = await db.query(
    `WITH src AS (SELECT jobid AS old, $1::bigint + row_number() OVER (ORDER BY jobid) AS new FROM job
                  WHERE jobid IN (${pick(1)})),
          ins AS (
       INSERT INTO job (jobid, job, name, type, level, clientid, jobstatus, schedtime, starttime, endtime, realendtime,
                        jobtdate, volsessionid, volsessiontime, jobfiles, jobbytes, readbytes, joberrors, poolid, filesetid,
                        priorjobid, purgedfiles, comment)
       SELECT s.new, j.job || '.refreshed', j.name, j.type, j.level, j.clientid, j.jobstatus, j.schedtime, j.starttime,
              j.endtime, j.realendtime, j.jobtdate, j.volsessionid, j.volsessiontime, ${files ? 'j.jobfiles' : '0'},
              j.jobbytes, j.readbytes, j.joberrors, j.poolid, j.filesetid, j.priorjobid, j.purgedfiles, j.comment
       FROM job j JOIN src s ON s.old = j.jobid RETURNING jobid)
     ${
       files
         ? `INSERT INTO file (fileindex, jobid, pathid, deltaseq, markid, fhinfo, fhnode, lstat, md5, name)
            SELECT f.fileindex, s.new, f.pathid, f.deltaseq, f.markid, f.fhinfo, f.fhnode, f.lstat, f.md5, f.name
            FROM file f JOIN src s ON s.old = f.jobid WHERE EXISTS (SELECT 1 FROM ins)`
         : 'SELECT 1 FROM ins'
     }`,
    [rows[0].max],
  );
  const newJobs = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM job WHERE jobid > $1::bigint`, [
    rows[0].max,
  ]);
  const newFiles = files ? (added.rowCount ?? 0) : 0;
  const changed = files
    ? { rowCount: 0 }
    : await db.query(`UPDATE job SET comment = 'changed' WHERE jobid IN (${pick(2)})`);
  const deleted = files ? { rowCount: 0 } : await db.query(`DELETE FROM job WHERE jobid IN (${pick(3)})`);
  let purged = 0;
  if (files) {
    const p = await db.query<{ id: string }>(
      `UPDATE job SET purgedfiles = 1 WHERE jobid IN (SELECT jobid FROM file GROUP BY jobid ORDER BY jobid LIMIT 5) RETURNING jobid::text AS id`,
    );
    await db.query(`DELETE FROM file WHERE jobid = ANY ($1::bigint[])`, [p.rows.map((r) => r.id)]);
    purged = p.rowCount ?? 0;
  }
  await db.query('VACUUM ANALYZE job');
  return {
    added: Number(newJobs.rows[0].n),
    newFiles,
    changed: changed.rowCount ?? 0,
    deleted: deleted.rowCount ?? 0,
    purged,
  };
}

/** Runs the CLI with `args`; its exit code, output and wall time (ms). */
function cli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string; ms: number }> {
  const t0 = Date.now();
  const child = spawn(process.execPath, [path.join(projectRoot(), 'bin/catalog-rebuild.js'), ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, output, ms: Date.now() - t0 })));
}

/**
 * The refresh variant (see the module comment), after the full rebuild that took `fullMs`.
 * @throws Error when a command fails or the refreshed catalog differs from the source.
 */
export async function runRefresh(ctx: BenchContext, temporalAddress: string, fullMs: number): Promise<void> {
  const changes = await changeSource(ctx);
  ctx.log(
    `source changed: ${fmtInt(changes.added)} new jobs (${fmtInt(changes.newFiles)} file records), ${fmtInt(changes.changed)} changed, ${fmtInt(changes.deleted)} deleted jobs, ${changes.purged} jobs' files purged`,
  );
  const env = testEnv({
    address: temporalAddress,
    configFile: writeConfig(ctx.dbs),
    taskQueue: uniqueQueue('bench-refresh'),
    extra: ctx.o.workerNodeOptions ? { NODE_OPTIONS: ctx.o.workerNodeOptions } : {},
  });
  const workers: WorkerProcess[] = [];
  try {
    for (let i = 0; i < ctx.o.workers; i++) workers.push(await spawnWorker(env, { entry: 'product' }));
    await workersReady(workers);
    const files = ctx.o.files !== undefined ? ['--files'] : [];
    const base = ['start', '--catalog', CATALOG, '--source', 'director', '--refresh', ...files];
    await ctx.checkpoint();
    const dry = await cli([...base, '--dry-run', '--json'], env);
    if (dry.code !== 0) throw new Error(`refresh dry run exited ${dry.code}: ${dry.output}`);
    const plan = JSON.parse(dry.output.trim().split('\n').pop()!) as {
      jobs: Record<string, number>;
      refresh: boolean;
      detectionMs?: Record<string, number>;
    };
    const perMillion = (dry.ms / ctx.o.jobs) * 1_000_000;
    ctx.figures.add(
      'refresh detection',
      `${fmtS(dry.ms)} for ${fmtInt(ctx.o.jobs)} jobs (start --refresh --dry-run: the change detection alone) = ${fmtS(perMillion)} per 10^6 jobs; found ${fmtInt(plan.jobs.new)} new, ${fmtInt(plan.jobs.changed)} changed, ${fmtInt(plan.jobs.gone)} gone; in the worker (ms): ${JSON.stringify(plan.detectionMs ?? {})}`,
      { ms: dry.ms, msPerMillionJobs: Math.round(perMillion), ...plan.jobs, detectionMs: plan.detectionMs ?? {} },
    );
    await ctx.checkpoint();
    const run = await cli([...base, '--wait'], env);
    if (run.code !== 0) throw new Error(`refresh exited ${run.code}: ${run.output}`);
    const ratio = run.ms / fullMs;
    const judged = judge(ratio, { scale: `${fmtInt(ctx.o.jobs)} jobs`, targets: REFRESH_TARGETS });
    ctx.figures.add(
      'refresh',
      `${fmtS(run.ms)} (start --refresh --wait) against ${fmtS(fullMs)} for the full rebuild: refresh/full ${judgedText(judged)}`,
      { ms: run.ms, fullMs, ratio: judged.value, targets: judged.targets },
    );
    // The dry run and the refresh ran on these workers: their detection and their pages.
    const peaks = workers.map((w) => ({ pid: w.pid, mb: Math.round((memoryOf(w.pid)?.hwmKb ?? NaN) / 1024) }));
    const peak = Math.max(...peaks.map((p) => p.mb));
    ctx.figures.add(
      'refresh: worker peak RSS',
      `${peak} MB (VmHWM of each worker process after the dry run and the refresh; MALLOC_ARENA_MAX=${productWorkerEnv(process.env).MALLOC_ARENA_MAX} as deployed; target < 300 MB: ${peak < 300 ? 'met' : 'MISSED'}) — ${peaks.map((p) => `pid ${p.pid}: ${p.mb} MB`).join('; ')}`,
      { maxMb: Number.isFinite(peak) ? peak : null, workers: peaks },
    );
    const cmp = await compareCatalogToSource(ctx.dbs.catalogPool, ctx.dbs.sourcePool, CATALOG, ctx.tz);
    const equal = cmp.equal;
    ctx.figures.add(
      'refresh: equivalence',
      `${equal ? 'equal' : 'DIFFERENT'}: active_jobs ${fmtInt(cmp.catalogRows)} rows md5 ${cmp.catalog.slice(0, 8)}… vs source ${fmtInt(cmp.sourceRows)} rows md5 ${cmp.source.slice(0, 8)}…`,
      { equal, rows: cmp.catalogRows },
    );
    if (!equal) throw new Error('the refreshed catalog differs from the changed source');
    if (files.length) {
      // The file records of the refreshed catalog against the source's (of the jobs it has), counted.
      const [cat, src] = await Promise.all([
        ctx.dbs.catalogPool.query<{ n: string }>(
          `SELECT count(*)::text AS n FROM active_files WHERE catalog_name = $1`,
          [CATALOG],
        ),
        ctx.dbs.sourcePool.query<{ n: string }>(
          `SELECT count(*)::text AS n FROM file f WHERE EXISTS (SELECT 1 FROM job j WHERE j.jobid = f.jobid)`,
        ),
      ]);
      const same = cat.rows[0].n === src.rows[0].n;
      ctx.figures.add(
        'refresh: file records',
        `${same ? 'equal' : 'DIFFERENT'}: active_files ${fmtInt(Number(cat.rows[0].n))} vs source ${fmtInt(Number(src.rows[0].n))}`,
        { equal: same, catalog: Number(cat.rows[0].n), source: Number(src.rows[0].n) },
      );
      if (!same) throw new Error('the refreshed catalog has other file records than the changed source');
    }
  } finally {
    // The refresh's workers' output (memory probe lines included) follows the full rebuild's.
    if (ctx.o.workerLog)
      fs.appendFileSync(
        ctx.o.workerLog,
        workers.map((w) => `\n# refresh worker pid ${w.pid}\n${w.output()}`).join('\n'),
      );
    for (const w of workers) w.kill('SIGTERM');
    for (const w of workers) await within(w.exited, 10_000).catch(() => undefined);
  }
}
