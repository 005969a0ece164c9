/**
 * The demo's summary of a finished rebuild: versions, retries, reconciliation and a field-by-field
 * `catalog = source` check computed in SQL.
 */
import * as os from 'node:os';
import type { Pool } from 'pg';
import type { RebuildCatalogResult } from '../../client';
import type { PagesOfWorker } from '../../lib/catalog';
import { committedPagesByWorker } from '../../lib/catalog';
import { compareCatalogToSource } from '../verify';
import type { DemoIdentity } from './identity';
import { say } from './lines';

const step = (s: string): void => say(`==> ${s}`);
const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** The file records of both sides: counts and an order-independent digest of their fields. */
export interface FileComparison {
  equal: boolean;
  catalogRows: number;
  sourceRows: number;
  catalog: string;
  source: string;
}

/** One file record as text for the digest: file id, job id, path+name, FileIndex, DeltaSeq, LStat, MD5. */
const FILE_LINE = (
  fileId: string,
  jobId: string,
  pathName: string,
  fi: string,
  ds: string,
  lstat: string,
  md5: string,
) => `concat_ws('|', ${fileId}::text, ${jobId}::text, ${pathName}, ${fi}::text, ${ds}::text, ${lstat}, ${md5})`;

/**
 * Compares the file records of the catalog's active version (`active_files`) with the source's
 * `File` rows joined with `Path`: counts and the sum of a 64-bit hash of each record's fields
 * (order-independent, computed in SQL on both sides).
 */
export async function compareFilesToSource(
  catalogPool: Pool,
  sourcePool: Pool,
  catalog: string,
): Promise<FileComparison> {
  const digest = (line: string) => `coalesce(sum(hashtextextended(${line}, 0)::numeric), 0)::text`;
  const cat = await catalogPool.query<{ n: string; d: string }>(
    `SELECT count(*)::text AS n, ${digest(FILE_LINE('file_id', 'job_id', 'path || name', 'file_index', 'delta_seq', 'lstat', 'md5'))} AS d
       FROM active_files WHERE catalog_name = $1`,
    [catalog],
  );
  const src = await sourcePool.query<{ n: string; d: string }>(
    `SELECT count(*)::text AS n, ${digest(FILE_LINE('f.fileid', 'f.jobid', 'p.path || f.name', 'f.fileindex', 'f.deltaseq', 'f.lstat', 'f.md5'))} AS d
       FROM file f JOIN path p USING (pathid)`,
  );
  const c = cat.rows[0];
  const x = src.rows[0];
  return {
    equal: c.n === x.n && c.d === x.d,
    catalogRows: Number(c.n),
    sourceRows: Number(x.n),
    catalog: c.d,
    source: x.d,
  };
}

/** A worker the demo started: its number (1, 2) and pid. */
export interface StartedWorker {
  n: number;
  pid: number;
}

/** Whether a worker identity `<pid>@<host>` names a process of this host that no longer runs. */
function goneHere(identity: string): boolean {
  const m = /^(\d+)@(.+)$/.exec(identity);
  if (!m || m[2] !== os.hostname()) return false;
  try {
    process.kill(Number(m[1]), 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * The summary's lines on who did the work (pure): the kill, the committed pages of each worker by
 * the ledger (the demo's workers by number, any other by its identity, marked as not started by the
 * demo), and other workers seen polling the demo's task queue.
 * @param identityOf the Temporal identity of a demo worker's pid (`<pid>@<host>`).
 */
export function workerLines(o: {
  killedAtPage: number | null;
  pagesTotal: number;
  pagesByWorker: PagesOfWorker[];
  started: StartedWorker[];
  identityOf: (pid: number) => string;
  /** Identities polling the task queue lately (the demo's own workers included or not). */
  pollers: string[];
  taskQueue: string;
}): string[] {
  const byIdentity = new Map(o.started.map((w) => [o.identityOf(w.pid), w]));
  const lines = [
    `  worker kill     ${o.killedAtPage === null ? 'did not happen (the rebuild ended first)' : `worker 1 SIGKILLed at page ${o.killedAtPage}/${o.pagesTotal}`}`,
  ];
  const parts = o.pagesByWorker.map((x) => {
    const w = byIdentity.get(x.workerIdentity);
    return w ? `worker ${w.n} (pid ${w.pid}) ${x.pages}` : `${x.workerIdentity} (not started by this demo) ${x.pages}`;
  });
  lines.push(`  pages by worker ${parts.length ? parts.join(', ') : 'none committed'}`);
  // Temporal lists a poller for minutes after its last poll: a process of this host that is gone
  // (an earlier demo's killed worker) is not another worker polling.
  const others = [...new Set(o.pollers)].filter((id) => !byIdentity.has(id) && !goneHere(id)).sort();
  if (others.length)
    lines.push(`  other workers   polling task queue ${o.taskQueue}, not started by this demo: ${others.join(', ')}`);
  return lines;
}

/**
 * Checks catalog = source (md5 of every field of every job, in SQL) and prints the summary of a
 * finished rebuild; returns whether it was published, is the active version and equals the source.
 */
export async function checkAndSummarize(
  catalogPool: Pool,
  sourcePool: Pool,
  r: RebuildCatalogResult,
  o: {
    identity: DemoIdentity;
    pageSize: number;
    /** The rebuild included file records: compare them too. */
    files?: boolean;
    killedAtPage: number | null;
    /** The workers the demo started and the identity of a pid on this host. */
    started: StartedWorker[];
    identityOf: (pid: number) => string;
    /** Identities seen polling the demo's task queue. */
    pollers: string[];
    rebuildMs: number;
    webUi: string;
    devServerLine: string;
  },
): Promise<boolean> {
  const { killedAtPage, rebuildMs, webUi, devServerLine, identity: id } = o;
  step('checking catalog = source (md5 of every field of every job, in SQL)');
  const v = await catalogPool.query<{
    version_id: string;
    status: string;
    source_timezone: string;
    source_rows: string;
  }>(
    `SELECT version_id::text, status, source_timezone, source_rows::text FROM version WHERE catalog_name = $1 ORDER BY version_id`,
    [id.catalog],
  );
  const mine = v.rows.find((x) => x.version_id === r.versionId);
  const active = await catalogPool.query<{ version_id: string }>(
    `SELECT version_id::text FROM active WHERE catalog_name = $1`,
    [id.catalog],
  );
  const cmp = await compareCatalogToSource(catalogPool, sourcePool, id.catalog, mine?.source_timezone ?? 'UTC');
  const retries = await catalogPool.query<{ created_at: Date; message: string }>(
    `SELECT created_at, message FROM event WHERE catalog_name = $1 AND version_id = $2 AND kind = 'page_retry' ORDER BY event_id`,
    [id.catalog, r.versionId],
  );
  const isActive = active.rows[0]?.version_id === r.versionId;
  let files: FileComparison | Error | null = null;
  if (o.files) {
    step('checking the file records: catalog = source (count and a hash of every field, in SQL)');
    files = await compareFilesToSource(catalogPool, sourcePool, id.catalog).catch((e: Error) => e);
  }
  const filesEqual = files === null || (!(files instanceof Error) && files.equal);
  const equal = r.published && isActive && cmp.equal && filesEqual;

  const pagesByWorker = await committedPagesByWorker(catalogPool, r.versionId);
  const lines: string[] = ['', 'Summary'];
  const out = (line: string): void => void lines.push(line);
  out(
    `  catalog         ${id.catalog} (database ${id.catalogDatabase}), source ${id.source} (database ${id.sourceDatabase})`,
  );
  out(`  pages           ${r.pagesTotal} of ${o.pageSize} jobs`);
  out(`  rows            ${r.rowsUpserted} upserted, ${r.rejects} rejects`);
  for (const line of workerLines({
    killedAtPage,
    pagesTotal: r.pagesTotal,
    pagesByWorker,
    started: o.started,
    identityOf: o.identityOf,
    pollers: o.pollers,
    taskQueue: id.taskQueue,
  }))
    out(line);
  out(`  retries         ${r.retries}`);
  out(
    `  duration        rebuild ${seconds(r.durationMs)} (workflow time), ${seconds(rebuildMs)} seen by the demo; ${r.runs} run(s)`,
  );
  out(
    `  versions        ${v.rows.map((x) => `version ${x.version_id} ${x.status}${x.version_id === r.versionId ? ' (this run)' : ''}`).join(', ')}` +
      (r.previousVersionId ? `; version ${r.versionId} replaced version ${r.previousVersionId}` : ''),
  );
  if (r.reconciliation) {
    const x = r.reconciliation;
    out(
      `  reconciliation  ${x.ok ? 'ok' : 'MISMATCH'}: ${x.buckets} buckets, source ${x.sourceRows} = catalog ${x.catalogRows}${x.rejects ? ` + ${x.rejects} quarantined` : ''}, ${x.sampled} records sampled, ${x.sampleMismatches} differ`,
    );
  }
  out(
    `  catalog = source ${equal ? 'yes' : 'NO'}: ${cmp.catalogRows} rows md5 ${cmp.catalog} vs source ${cmp.sourceRows} rows md5 ${cmp.source}${isActive ? '' : ` (active version is ${active.rows[0]?.version_id ?? 'none'}, not ${r.versionId})`}`,
  );
  if (files instanceof Error) out(`  files           NOT compared: ${files.message}`);
  else if (files) {
    out(
      `  files = source  ${files.equal ? 'yes' : 'NO'}: ${files.catalogRows} file records (digest ${files.catalog}) vs source ${files.sourceRows} (digest ${files.source})`,
    );
  }
  out(`  page retries    ${retries.rowCount} event(s) of type page_retry${retries.rowCount ? ':' : ''}`);
  for (const e of retries.rows) out(`    ${e.created_at.toISOString()}  ${e.message}`);
  if (killedAtPage !== null && !retries.rowCount)
    out(
      `                  none: worker 1 ran no page activity when it died (its pages counted in flight ` +
        `had completed, the next ones not started; a workflow task it held, if any, timed out and ran ` +
        `again on worker 2: see the Web UI's history), so no page had to be retried`,
    );
  out(`  Web UI          ${webUi}`);
  out(`  all rebuilds    search CatalogName='${id.catalog}' in the Web UI's workflow list`);
  out(`  dev server      ${devServerLine}`);
  for (const line of lines) say(line);
  return equal;
}
