/**
 * Variant (b), a plain streaming copy without Temporal, what an operator writes by hand: one
 * read-only transaction on the source with a server-side cursor (`DECLARE … CURSOR` /
 * `FETCH 10000`), the rows COPYed (pg-copy-streams, text format) into an equivalent table `bench_b`
 * (same columns and primary key as a version partition) in the catalog database; no checkpoints,
 * no verification.
 */
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { Client as PgClient } from 'pg';
import format from 'pg-format';
import { from as copyFrom } from 'pg-copy-streams';
import type { SourceRow } from '../../lib/sources/types';
import type { BenchContext } from './context';
import { fmtInt, fmtS } from './context';
import { CpuSampler, cpuText } from './cpu';
import { COPY_COLUMNS, copyText, createEquivalentTable, SELECT_JOBS_AS_TEXT } from './tables';

/** Streams every source row through a cursor into `bench_b` with COPY, in one transaction on each side. */
async function streamCopy(ctx: BenchContext, sampler: CpuSampler): Promise<void> {
  const src = new PgClient({ connectionString: ctx.dbs.sourceUrl, application_name: 'catalog-rebuild:bench:b' });
  const dst = new PgClient({ connectionString: ctx.dbs.catalogUrl, application_name: 'catalog-rebuild:bench:b' });
  await Promise.all([src.connect(), dst.connect()]);
  try {
    await src.query('BEGIN READ ONLY');
    await src.query(`DECLARE jobs NO SCROLL CURSOR FOR ${SELECT_JOBS_AS_TEXT}`, [ctx.tz]);
    await dst.query('BEGIN');
    const stream = dst.query(copyFrom(format('COPY bench_b (%I) FROM STDIN', COPY_COLUMNS)));
    const done = finished(stream);
    done.catch(() => undefined);
    for (;;) {
      const { rows } = await src.query<SourceRow>('FETCH 10000 FROM jobs');
      if (!rows.length) break;
      if (!stream.write(copyText('1', 0, rows))) await Promise.race([once(stream, 'drain'), done]);
    }
    stream.end();
    await done;
    await dst.query('COMMIT');
    await src.query('COMMIT');
  } finally {
    await sampler.sampleOnce().catch(() => undefined);
    await Promise.all([src.end(), dst.end()]);
  }
}

/** Runs (b), prints its rate and CPU; returns its rows per second. */
export async function runCursorCopy(ctx: BenchContext): Promise<number> {
  await createEquivalentTable(ctx.dbs.catalogPool, 'bench_b');
  await ctx.checkpoint();
  const sampler = new CpuSampler(ctx.admin, {}, [
    { label: 'PostgreSQL catalog backend', datname: ctx.catalogDb, appPrefix: 'catalog-rebuild:bench:b' },
    { label: 'PostgreSQL source backend', datname: ctx.sourceDb, appPrefix: 'catalog-rebuild:bench:b' },
  ]);
  await sampler.start();
  const started = Date.now();
  await streamCopy(ctx, sampler);
  const ms = Date.now() - started;
  const cpu = await sampler.stop();
  const rate = ctx.o.jobs / (ms / 1000);
  ctx.figures.add(
    '(b) streaming copy (cursor + COPY)',
    `${fmtInt(rate)} rows/s (${fmtInt(ctx.o.jobs)} rows in ${fmtS(ms)})`,
    { rowsPerSecond: Math.round(rate), ms },
  );
  ctx.figures.add('(b) CPU', cpuText(cpu, ctx.o.jobs), cpu);
  return rate;
}
