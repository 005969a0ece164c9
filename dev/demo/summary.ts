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

/**
 * Checks catalog = source (md5 of every field of every job, in SQL) and prints the summary of a
 * finished rebuild; returns whether it was published, is the active version and equals the source.
 */
export async function checkAndSummarize(
  catalogPool: Pool,
  sourcePool: Pool,
  r: RebuildCatalogResult,
  o: { pageSize: number; killedAtPage: number | null; rebuildMs: number; webUi: string; devServerLine: string },
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
  const equal = r.published && isActive && cmp.equal;

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
  console.log(`  page retries    ${retries.rowCount} event(s) of type page_retry:`);
  for (const e of retries.rows) console.log(`    ${e.created_at.toISOString()}  ${e.message}`);
  console.log(`  Web UI          ${webUi}`);
  console.log(`                  (all rebuilds of the catalog: search CatalogName='${DEMO.catalog}')`);
  console.log(`  dev server      ${devServerLine}`);
  return equal;
}
