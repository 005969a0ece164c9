/** Progress formatting and the database fallback of `status`. */
import { Pool } from 'pg';
import { RebuildProgress } from '../workflows/definitions';

/** One-line human summary of a progress answer. */
export function formatProgress(p: RebuildProgress): string {
  const pct = p.pagesTotal ? Math.floor((100 * p.pagesDone) / p.pagesTotal) : 0;
  const eta = p.etaSeconds === null ? '?' : `${p.etaSeconds}s`;
  return (
    `${p.catalog}: ${p.phase}${p.paused ? ' (paused)' : ''}${p.draining ? ' (draining)' : ''} · version ${p.versionId ?? '-'} · ` +
    `page ${p.pagesDone}/${p.pagesTotal} (${pct}%) · checkpoint ${p.checkpoint} · ${p.rowsUpserted} rows · ` +
    `${p.rowsPerSecond} rows/s · eta ${eta} · ${p.retries} retries · ${p.rejects} rejects\nlast event: ${p.lastEvent}`
  );
}

/** What the catalog database says about a catalog's latest rebuild (when no worker answers). */
export interface DatabaseStatus {
  catalog: string;
  activeVersionId: string | null;
  latest: null | {
    versionId: string;
    status: string;
    pagesTotal: number;
    pagesCommitted: number;
    rows: number;
    lastCommitAt: string | null;
    /** Seconds since the last committed page. */
    secondsSinceProgress: number | null;
  };
  lastEvent: string | null;
}

/** Reads a catalog's latest version and ledger counts from the catalog database. */
export async function catalogStatusFromDatabase(pool: Pool, catalog: string): Promise<DatabaseStatus> {
  const active = await pool.query<{ version_id: string }>(`SELECT version_id::text FROM active WHERE catalog_name = $1`, [catalog]);
  const v = await pool.query<{ version_id: string; status: string; pages_total: number; committed: number; rows: string; last: Date | null; age: number | null }>(
    `SELECT v.version_id::text, v.status, v.pages_total,
            count(p.committed_at)::int AS committed, coalesce(sum(p.rows), 0)::text AS rows,
            max(p.committed_at) AS last, extract(epoch FROM now() - max(p.committed_at))::float8 AS age
     FROM version v LEFT JOIN page p ON p.version_id = v.version_id
     WHERE v.catalog_name = $1 GROUP BY v.version_id ORDER BY v.version_id DESC LIMIT 1`,
    [catalog],
  );
  const e = await pool.query<{ message: string }>(`SELECT message FROM event WHERE catalog_name = $1 ORDER BY event_id DESC LIMIT 1`, [catalog]);
  const l = v.rows[0];
  return {
    catalog,
    activeVersionId: active.rows[0]?.version_id ?? null,
    latest: l
      ? {
          versionId: l.version_id,
          status: l.status,
          pagesTotal: l.pages_total,
          pagesCommitted: l.committed,
          rows: Number(l.rows),
          lastCommitAt: l.last ? l.last.toISOString() : null,
          secondsSinceProgress: l.age === null ? null : Math.round(l.age),
        }
      : null,
    lastEvent: e.rows[0]?.message ?? null,
  };
}
