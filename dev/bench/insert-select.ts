/**
 * Variant (c), one `INSERT … SELECT` inside PostgreSQL: a second copy of the same source generated
 * in the catalog database (schema `bench_src`), copied into an equivalent table `bench_c` by one
 * statement: the ceiling of this server. The mapping is that of `BAREOS_JOB_SELECT`, written
 * typed: naive times become timestamptz in the source's zone without a round trip through text.
 */
import { Client as PgClient } from 'pg';
import format from 'pg-format';
import { JOB_COLUMNS } from '../../lib/sources/types';
import type { BenchContext } from './context';
import { fmtInt, fmtS } from './context';
import { createEquivalentTable } from './tables';

/** Runs (c) and prints its rate; returns its rows per second. */
export async function runInsertSelect(ctx: BenchContext): Promise<number> {
  const tz = ctx.tz;
  await createEquivalentTable(ctx.dbs.catalogPool, 'bench_c');
  await ctx.checkpoint();
  const started = Date.now();
  const c = new PgClient({ connectionString: ctx.dbs.catalogUrl, application_name: 'catalog-rebuild:bench:c' });
  await c.connect();
  try {
    await c.query(
      format(
        `INSERT INTO bench_c (version_id, page_no, %I)
         SELECT 1, 0, j.jobid, j.jobid::text, j.job, j.name, c.name, NULLIF(j.type::text, ''), NULLIF(j.level::text, ''), NULLIF(j.jobstatus::text, ''),
                j.schedtime AT TIME ZONE %L, j.starttime AT TIME ZONE %L, j.endtime AT TIME ZONE %L, j.realendtime AT TIME ZONE %L,
                j.jobfiles, j.jobbytes, j.readbytes, j.joberrors, p.name, f.fileset, NULLIF(j.priorjobid, 0)::text, j.jobtdate,
                j.volsessionid, j.volsessiontime, j.comment, j.starttime::date, NULL::jsonb
         FROM bench_src.job j
         LEFT JOIN bench_src.client c ON c.clientid = j.clientid
         LEFT JOIN bench_src.pool p ON p.poolid = j.poolid
         LEFT JOIN bench_src.fileset f ON f.filesetid = j.filesetid
         ORDER BY j.jobid`,
        JOB_COLUMNS,
        tz,
        tz,
        tz,
        tz,
      ),
    );
  } finally {
    await c.end();
  }
  const ms = Date.now() - started;
  const rate = ctx.o.jobs / (ms / 1000);
  ctx.figures.add(
    '(c) INSERT … SELECT in PostgreSQL',
    `${fmtInt(rate)} rows/s (${fmtInt(ctx.o.jobs)} rows in ${fmtS(ms)})`,
    { rowsPerSecond: Math.round(rate), ms },
  );
  return rate;
}
