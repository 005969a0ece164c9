/**
 * The per-row fallback of a page whose COPY failed on a value: rows held in the worker, upserted so
 * that exactly the rows the catalog refuses are quarantined.
 */
import { log } from '@temporalio/activity';
import type { PoolClient } from 'pg';
import { upsertRows } from '../lib/catalog';
import { isDataError, withSavepoint } from '../lib/db';
import { fingerprintRow } from '../lib/fingerprint';
import type { SourceRow } from '../lib/sources/types';
import type { RejectRecord } from '../lib/validate';

/**
 * Upserts `rows` (unique by job id) so that a row the catalog refuses with a data error (SQLSTATE
 * class 22 or 54000) is quarantined alone: the batch is tried in a savepoint, and a refused batch is
 * split in halves until the refused rows stand alone (about k·log2(n) statements for k bad rows).
 * Each refused row is appended to `rejects` with the database's reason.
 * @returns rows written.
 * @throws any error that is not a data error.
 */
export async function upsertQuarantining(
  c: PoolClient,
  versionId: string,
  pageNo: number,
  rows: SourceRow[],
  rejects: RejectRecord[],
): Promise<number> {
  if (!rows.length) return 0;
  try {
    await withSavepoint(c, 'page_rows', () => upsertRows(c, versionId, pageNo, rows));
    return rows.length;
  } catch (err) {
    if (!isDataError(err)) throw err;
    if (rows.length === 1) {
      const r = rows[0];
      const e = err as Error & { code: string };
      log.warn('row quarantined: the catalog refused it', { pageNo, jobKey: r.job_key, code: e.code });
      rejects.push({
        jobKey: r.job_key!,
        jobId: r.job_id,
        bucket: r.bucket,
        fingerprintRow: fingerprintRow(r),
        reason: `catalog refused the row: database error ${e.code}: ${e.message}`,
        raw: JSON.stringify(r),
      });
      return 0;
    }
    const half = Math.ceil(rows.length / 2);
    return (
      (await upsertQuarantining(c, versionId, pageNo, rows.slice(0, half), rejects)) +
      (await upsertQuarantining(c, versionId, pageNo, rows.slice(half), rejects))
    );
  }
}
