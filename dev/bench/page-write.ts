/**
 * The page-write micro-benchmark, in a scratch database (no other catalog tables' traffic): one
 * page written by unnest upsert, by COPY (the first attempt's write) and by COPY into a temporary
 * table then upsert, in rotating order; then the replay of identical rows, the range checksum and
 * the source read of a page alone. Medians of time and WAL per page.
 */
import type { PoolClient, Pool } from 'pg';
import format from 'pg-format';
import { copyOrUpsertRows, partitionName, upsertRows } from '../../lib/catalog';
import { withTransaction } from '../../lib/db';
import type { BareosSource } from '../../lib/sources/bareos';
import type { SourceRow } from '../../lib/sources/types';
import { JOB_COLUMNS } from '../../lib/sources/types';
import { median } from '../harness/faults';
import type { BenchContext } from './context';
import { fmtInt } from './context';
import { copyInto, copyText, walLsn, walSince } from './tables';

type WriteMethod = (c: PoolClient, versionId: string, pageNo: number, rows: SourceRow[]) => Promise<void>;

/** The three ways of writing a page, by name. */
const METHODS: Record<string, WriteMethod> = {
  'unnest upsert': async (c, v, p, rows) => void (await upsertRows(c, v, p, rows)),
  'COPY (first attempt)': async (c, v, p, rows) => void (await copyOrUpsertRows(c, v, p, rows)),
  'COPY to temp + upsert': async (c, v, p, rows) => {
    await c.query(`CREATE TEMP TABLE IF NOT EXISTS page_in (LIKE job INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`);
    await copyInto(c, 'page_in', copyText(v, p, rows));
    const upd = JOB_COLUMNS.filter((x) => x !== 'job_id');
    await c.query(
      format(
        `INSERT INTO %I AS t SELECT * FROM page_in ON CONFLICT (version_id, job_id) DO UPDATE SET page_no = EXCLUDED.page_no, %s WHERE (%s) IS DISTINCT FROM (%s)`,
        partitionName(v),
        upd.map((x) => format('%I = EXCLUDED.%I', x, x)).join(', '),
        upd.map((x) => `t.${x}`).join(', '),
        upd.map((x) => `EXCLUDED.${x}`).join(', '),
      ),
    );
  },
};

/** The first `writePages` pages of the source, read through the product's source adapter. */
async function readPages(ctx: BenchContext, src: BareosSource): Promise<SourceRow[][]> {
  const { pageSize, o } = ctx;
  const keys = (
    await ctx.dbs.sourcePool.query<{ k: string }>(`SELECT jobid::text AS k FROM job ORDER BY jobid LIMIT $1`, [
      o.writePages * pageSize,
    ])
  ).rows.map((r) => r.k);
  const pages: SourceRow[][] = [];
  for (let i = 0; i < Math.min(o.writePages, Math.ceil(keys.length / pageSize)); i++) {
    const slice = keys.slice(i * pageSize, (i + 1) * pageSize);
    pages.push(await src.readRange(slice[0], slice[slice.length - 1]));
  }
  return pages;
}

/** Runs the micro-benchmark on the migrated `scratch` database with rows read from `src`, and prints its three figures. */
export async function runPageWrite(ctx: BenchContext, scratch: Pool, src: BareosSource): Promise<void> {
  const pages = await readPages(ctx, src);
  const names = Object.keys(METHODS);
  const versionOf = (i: number) => String(900_000_001 + i);
  for (let i = 0; i < names.length; i++) {
    await scratch.query(format('CREATE TABLE %I (LIKE job INCLUDING DEFAULTS)', partitionName(versionOf(i))));
    await scratch.query(format('ALTER TABLE %I ADD PRIMARY KEY (version_id, job_id)', partitionName(versionOf(i))));
    await scratch.query(format('CREATE INDEX ON %I (job_key)', partitionName(versionOf(i)))); // as createVersionPartition
  }
  const ms: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const wal: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const replayMs: number[] = [];
  const replayWal: number[] = [];
  const readMs: number[] = [];
  const elapsedMs = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
  for (let p = 0; p < pages.length; p++) {
    for (let k = 0; k < names.length; k++) {
      const i = (p + k) % names.length; // rotate the order page by page
      const lsn = await walLsn(scratch);
      const t0 = process.hrtime.bigint();
      await withTransaction(scratch, (c) => METHODS[names[i]](c, versionOf(i), p + 1, pages[p]));
      ms[names[i]].push(elapsedMs(t0));
      wal[names[i]].push(await walSince(scratch, lsn));
    }
    const lsn = await walLsn(scratch);
    const t0 = process.hrtime.bigint();
    await withTransaction(scratch, (c) => upsertRows(c, versionOf(0), p + 1, pages[p]));
    replayMs.push(elapsedMs(t0));
    replayWal.push(await walSince(scratch, lsn));
    const first = pages[p][0].job_key!;
    const last = pages[p][pages[p].length - 1].job_key!;
    const t2 = process.hrtime.bigint();
    await src.readRange(first, last);
    readMs.push(elapsedMs(t2));
  }
  const rows = pages[0]?.length ?? 0;
  ctx.figures.add(
    'page write (first write)',
    names.map((n) => `${n} ${median(ms[n]).toFixed(1)} ms (${fmtInt(median(wal[n]) / 1024)} KiB WAL)`).join(', ') +
      `; per page of ${fmtInt(rows)} rows, median of ${pages.length}`,
    Object.fromEntries(names.map((n) => [n, { ms: +median(ms[n]).toFixed(1), walBytes: median(wal[n]) }])),
  );
  ctx.figures.add(
    'page parts (alone)',
    `source read (readRange) ${median(readMs).toFixed(1)} ms per page of ${fmtInt(rows)} rows, median of ${pages.length}`,
    { readMs: +median(readMs).toFixed(1) },
  );
  ctx.figures.add(
    'page write (replay, identical rows)',
    `unnest upsert ${median(replayMs).toFixed(1)} ms, ${fmtInt(median(replayWal))} bytes WAL (min ${fmtInt(Math.min(...replayWal))})`,
    { ms: +median(replayMs).toFixed(1), walBytes: median(replayWal), walBytesMin: Math.min(...replayWal) },
  );
}
