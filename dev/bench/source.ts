/**
 * The bench's Bareos sources: generated (seed 7 by default) in the source database and, for (c),
 * once more in the catalog database (schema `bench_src`). Above 2M jobs a job count that is a
 * multiple of 1M is built as copies of a 1M source: 1M jobs generated once, then copied inside
 * PostgreSQL with `INSERT … SELECT`, job ids (and prior job ids) offset by 10^8 per copy, the
 * unique job name's trailing job id (`…_23.05.00_42`) with them, as a director names each job; every
 * other field, the days included, unchanged: k copies have k times the jobs per bucket.
 */
import { Client } from 'pg';
import { generateBareosSource } from '../bareos-generator';

/** Jobs of the source that larger sources are copies of. */
export const COPY_UNIT = 1_000_000;
/** Offset of job ids between two copies. */
export const COPY_ID_OFFSET = 100_000_000;

/** How a source of `jobs` jobs is built: `copies` copies of a generated source of `generated` jobs. */
export function sourcePlan(jobs: number): { generated: number; copies: number } {
  if (jobs > 2 * COPY_UNIT && jobs % COPY_UNIT === 0) return { generated: COPY_UNIT, copies: jobs / COPY_UNIT };
  return { generated: jobs, copies: 1 };
}

/** The columns of the Bareos `job` table the generator fills (dev/bareos-schema.sql). */
const JOB_TABLE_COLUMNS = [
  'jobid',
  'job',
  'name',
  'type',
  'level',
  'clientid',
  'jobstatus',
  'schedtime',
  'starttime',
  'endtime',
  'realendtime',
  'jobtdate',
  'volsessionid',
  'volsessiontime',
  'jobfiles',
  'jobbytes',
  'readbytes',
  'joberrors',
  'jobmissingfiles',
  'poolid',
  'filesetid',
  'priorjobid',
  'purgedfiles',
  'hasbase',
  'hascache',
  'reviewed',
  'comment',
];

/**
 * Adds copies 1..copies-1 of the generated jobs at `databaseUrl` (ids below 10^8) in one statement per copy.
 * @throws the pg error; Error when a generated id is not below the offset.
 */
export async function replicateJobs(databaseUrl: string, copies: number): Promise<void> {
  const c = new Client({ connectionString: databaseUrl, application_name: 'catalog-rebuild:bench:gen' });
  await c.connect();
  try {
    const max = Number((await c.query<{ m: string }>('SELECT max(jobid)::text AS m FROM job')).rows[0].m);
    if (!(max < COPY_ID_OFFSET)) throw new Error(`cannot copy a source whose job ids reach ${max}`);
    for (let k = 1; k < copies; k++) {
      const off = k * COPY_ID_OFFSET;
      const list = JOB_TABLE_COLUMNS.slice(1).map((x) =>
        x === 'priorjobid'
          ? `CASE WHEN priorjobid > 0 THEN priorjobid + ${off} ELSE priorjobid END`
          : x === 'job'
            ? `regexp_replace(job, '_[0-9]+$', '_' || (jobid + ${off})::text)`
            : x,
      );
      await c.query(
        `INSERT INTO job (${JOB_TABLE_COLUMNS.join(', ')}) SELECT jobid + ${off}, ${list.join(', ')} FROM job WHERE jobid < ${COPY_ID_OFFSET}`,
      );
    }
    await c.query(`SELECT setval(pg_get_serial_sequence('job', 'jobid'), (SELECT max(jobid) FROM job))`);
    await c.query('ANALYZE job');
  } finally {
    await c.end();
  }
}

/**
 * Generates a Bareos source of `jobs` jobs at `databaseUrl` (see {@link sourcePlan}), with `files`
 * file records when given (dev/bareos-file-generator.ts).
 * @returns the copies it is made of.
 */
export async function buildBareosSource(o: {
  databaseUrl: string;
  jobs: number;
  seed: number;
  clients: number;
  /** File records in all (Bareos File/Path); not with copies. */
  files?: number;
}): Promise<{ generated: number; copies: number }> {
  const plan = sourcePlan(o.jobs);
  if (o.files !== undefined && plan.copies > 1)
    throw new Error(
      `--files needs a generated source: at most ${2 * COPY_UNIT} jobs, or a count that is not a multiple of ${COPY_UNIT}`,
    );
  await generateBareosSource({
    databaseUrl: o.databaseUrl,
    jobs: plan.generated,
    seed: o.seed,
    clients: o.clients,
    files: o.files,
  });
  if (plan.copies > 1) await replicateJobs(o.databaseUrl, plan.copies);
  return plan;
}
