/**
 * The demo's summary of a finished rebuild: versions, retries, reconciliation and a field-by-field
 * `catalog = source` check computed in SQL.
 */
import type { Pool } from 'pg';
import type { RebuildCatalogResult } from '../../client';
import { compareCatalogToSource } from '../verify';
import { DEMO } from './settings';

const step = (s: string): void => console.log(`==> ${s}`);
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
export async function compareFilesToSource(catalogPool: Pool, sourcePool: Pool): Promise<FileComparison> {
  const digest = (line: string) => `coalesce(sum(hashtextextended(${line}, 0)::numeric), 0)::text`;
  const cat = await catalogPool.query<{ n: string; d: string }>(
    `SELECT count(*)::text AS n, ${digest(FILE_LINE('file_id', 'job_id', 'path || name', 'file_index', 'delta_seq', 'lstat', 'md5'))} AS d
       FROM active_files WHERE catalog_name = $1`,
    [DEMO.catalog],
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

/**
 * Checks catalog = source (md5 of every field of every job, in SQL) and prints the summary of a
 * finished rebuild; returns whether it was published, is the active version and equals the source.
 */
export async function checkAndSummarize(
  catalogPool: Pool,
  sourcePool: Pool,
  r: RebuildCatalogResult,
  o: {
    pageSize: number;
    /** The rebuild included file records: compare them too. */
    files?: boolean;
    killedAtPage: number | null;
    rebuildMs: number;
    webUi: string;
    devServerLine: string;
  },
): Promise<boolean> {
  const { killedAtPage, rebuildMs, webUi, devServerLine } = o;
  step('checking catalog = source (md5 of every field of every job, in SQL)');
  const v = await catalogPool.query<{
    version_id: string;
    status: string;
    source_timezone: string;
    source_rows: string;
  }>(
    `SELECT version_id::text, status, source_timezone, source_rows::text FROM version WHERE catalog_name = $1 ORDER BY version_id`,
    [DEMO.catalog],
  );
  const mine = v.rows.find((x) => x.version_id === r.versionId);
  const active = await catalogPool.query<{ version_id: string }>(
    `SELECT version_id::text FROM active WHERE catalog_name = $1`,
    [DEMO.catalog],
  );
  const cmp = await compareCatalogToSource(catalogPool, sourcePool, DEMO.catalog, mine?.source_timezone ?? 'UTC');
  const retries = await catalogPool.query<{ created_at: Date; message: string }>(
    `SELECT created_at, message FROM event WHERE catalog_name = $1 AND version_id = $2 AND kind = 'page_retry' ORDER BY event_id`,
    [DEMO.catalog, r.versionId],
  );
  const isActive = active.rows[0]?.version_id === r.versionId;
  let files: FileComparison | Error | null = null;
  if (o.files) {
    step('checking the file records: catalog = source (count and a hash of every field, in SQL)');
    files = await compareFilesToSource(catalogPool, sourcePool).catch((e: Error) => e);
  }
  const filesEqual = files === null || (!(files instanceof Error) && files.equal);
  const equal = r.published && isActive && cmp.equal && filesEqual;

  console.log('');
  console.log('Summary');
  console.log(
    `  catalog         ${DEMO.catalog} (database ${DEMO.catalogDatabase}), source ${DEMO.source} (database ${DEMO.sourceDatabase})`,
  );
  console.log(`  pages           ${r.pagesTotal} of ${o.pageSize} jobs`);
  console.log(`  rows            ${r.rowsUpserted} upserted, ${r.rejects} rejects`);
  console.log(
    `  worker kill     ${killedAtPage === null ? 'did not happen (the rebuild ended first)' : `worker 1 SIGKILLed at page ${killedAtPage}/${r.pagesTotal}; worker 2 finished the rebuild`}`,
  );
  console.log(`  retries         ${r.retries}`);
  console.log(
    `  duration        rebuild ${seconds(r.durationMs)} (workflow time), ${seconds(rebuildMs)} seen by the demo; ${r.runs} run(s)`,
  );
  console.log(
    `  versions        ${v.rows.map((x) => `version ${x.version_id} ${x.status}${x.version_id === r.versionId ? ' (this run)' : ''}`).join(', ')}` +
      (r.previousVersionId ? `; version ${r.versionId} replaced version ${r.previousVersionId}` : ''),
  );
  if (r.reconciliation) {
    const x = r.reconciliation;
    console.log(
      `  reconciliation  ${x.ok ? 'ok' : 'MISMATCH'}: ${x.buckets} buckets, source ${x.sourceRows} = catalog ${x.catalogRows}${x.rejects ? ` + ${x.rejects} quarantined` : ''}, ${x.sampled} records sampled, ${x.sampleMismatches} differ`,
    );
  }
  console.log(
    `  catalog = source ${equal ? 'yes' : 'NO'}: ${cmp.catalogRows} rows md5 ${cmp.catalog} vs source ${cmp.sourceRows} rows md5 ${cmp.source}${isActive ? '' : ` (active version is ${active.rows[0]?.version_id ?? 'none'}, not ${r.versionId})`}`,
  );
  if (files instanceof Error) console.log(`  files           NOT compared: ${files.message}`);
  else if (files) {
    console.log(
      `  files = source  ${files.equal ? 'yes' : 'NO'}: ${files.catalogRows} file records (digest ${files.catalog}) vs source ${files.sourceRows} (digest ${files.source})`,
    );
  }
  console.log(`  page retries    ${retries.rowCount} event(s) of type page_retry:`);
  for (const e of retries.rows) console.log(`    ${e.created_at.toISOString()}  ${e.message}`);
  console.log(`  Web UI          ${webUi}`);
  console.log(`                  (all rebuilds of the catalog: search CatalogName='${DEMO.catalog}')`);
  console.log(`  dev server      ${devServerLine}`);
  return equal;
}
