/**
 * Activities of catalog-rebuild, built by `createActivities(deps)` from the worker's
 * dependencies (catalog pool, named sources, Temporal client). Workflows import only the type.
 */
import { activityInfo, ApplicationFailure, Context, log } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { Pool, PoolClient } from 'pg';
import format from 'pg-format';
import {
  catalogBucketStats,
  CATALOG_ROW_AS_TEXT,
  copyOrUpsertRows,
  createVersionPartition,
  partitionName,
  rangeChecksum,
  appendEvent as recordEvent,
  upsertRows,
  writeRejects,
} from '../lib/catalog';
import { withTransaction } from '../lib/db';

const PUBLISH_LOCK_SQL = `SELECT pg_advisory_xact_lock(hashtext('catalog-rebuild:publish:' || $1))`;
import { CatalogRebuildError, FailureType, isTransientDbError, NotPublishableError, VersionFencedError } from '../lib/errors';
import { SourceRegistry } from '../lib/sources';
import { BucketStat, JOB_COLUMNS, SourceRow } from '../lib/sources/types';
import { KNOWN_CODES, RejectRecord, validateRows, ValidatedRows } from '../lib/validate';
import type {
  CopyPageInput,
  CopyPageResult,
  PlanResult,
  PublishCatalogResult,
  ReconcileSummary,
  RepairBucketInput,
  RepairBucketResult,
} from '../workflows/definitions';
import { withHeartbeat } from './heartbeat';

/** Fault injection for tests; never set in production. */
export interface Faults {
  /** Sleep this long (ms) inside one SQL statement of the page transaction of `pageNo` (first attempt only). */
  slowPage?: { pageNo: number; ms: number };
  /** Hold an attempt of `pageNo` after it read its rows until the file `releaseFile` exists; create `heldFile` while held. */
  holdAfterRead?: { pageNo: number; attempt: number; heldFile: string; releaseFile: string };
}

/** What the activities need; built once per worker process. */
export interface ActivityDeps {
  /** Pool on the catalog database. */
  pool: Pool;
  /** Named sources from the worker's configuration. */
  sources: SourceRegistry;
  /** Temporal client, to read a retried page's previous failure; optional. */
  client?: Client;
  /** Worker identity recorded in the ledger and events. */
  identity: string;
  /** Build id of this worker, recorded on events. */
  buildId: string;
  /** Test-only fault injection. */
  faults?: Faults;
  /** Called after each committed page (metrics). */
  onPageCommitted?: (r: CopyPageResult) => void;
}

/** Turns an error into a Temporal failure: permanent ones non-retryable, transient ones retryable. */
function toFailure(err: unknown): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof CatalogRebuildError) {
    return err.retryable
      ? ApplicationFailure.retryable(err.message, err.code)
      : ApplicationFailure.create({ message: err.message, type: err.code, nonRetryable: true, cause: err });
  }
  if (isTransientDbError(err)) {
    return ApplicationFailure.retryable(`transient database error: ${(err as Error).message}`, FailureType.DB_TRANSIENT);
  }
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
    return ApplicationFailure.create({
      message: `database error ${code}: ${(err as Error).message}`,
      type: FailureType.DB_ERROR,
      nonRetryable: true,
    });
  }
  return err;
}

async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toFailure(err);
  }
}

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** A permanent failure to read from a source: `message` names what could not be read, `detail` why. */
class SourceUnreadable extends Error {
  constructor(readonly what: string, readonly detail: string, options?: { cause?: unknown }) {
    super(`${what} is unreadable: ${detail}`, options);
  }
}

/**
 * Runs one source read. A transient failure (connection loss, timeout, restart) stays retryable and
 * names what was read; any other failure becomes SourceUnreadable, so the caller can name the
 * bucket and never mistake an unreadable bucket for an empty one.
 */
async function readSource<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof CatalogRebuildError || err instanceof ApplicationFailure) throw err;
    const code = (err as { code?: unknown } | null)?.code;
    const detail = `${(err as Error)?.message ?? String(err)}${typeof code === 'string' ? ` (${/^[0-9A-Z]{5}$/.test(code) ? 'SQLSTATE ' : ''}${code})` : ''}`;
    if (isTransientDbError(err)) throw ApplicationFailure.retryable(`${what}: transient source read failure, retrying: ${detail}`, FailureType.DB_TRANSIENT);
    throw new SourceUnreadable(what, detail, { cause: err });
  }
}

interface VersionRow {
  version_id: string;
  catalog_name: string;
  source_name: string;
  status: string;
  watermark_key: string | null;
  pages_total: number;
  workflow_id: string;
}

/**
 * Builds the activity functions over their dependencies.
 * Every activity takes one input object and returns one result object with ids and counts only.
 */
export function createActivities(deps: ActivityDeps) {
  const { pool, sources } = deps;

  async function loadVersion(versionId: string): Promise<VersionRow> {
    const { rows } = await pool.query<VersionRow>(
      `SELECT version_id::text, catalog_name, source_name, status, watermark_key::text, pages_total, workflow_id
       FROM version WHERE version_id = $1`,
      [versionId],
    );
    if (!rows.length) throw new NotPublishableError(`version ${versionId} does not exist`);
    return rows[0];
  }

  /**
   * Drops the rows of versions of `catalog` (retired beyond retention, abandoned, failed, or marked
   * dropped by an interrupted attempt whose table is still there). Each version is first claimed
   * under the publish lock by marking it `dropped`, so a rollback (same lock, re-activates only
   * `retired` versions) can never re-activate a version whose table is being detached or dropped;
   * then its partition is detached (CONCURRENTLY, with lock_timeout) and dropped outside any
   * transaction. A version that became active again before the claim is skipped.
   * @returns the version ids whose rows were dropped now.
   */
  async function dropVersions(catalog: string, versionIds: string[]): Promise<string[]> {
    const dropped: string[] = [];
    for (const id of versionIds) {
      const table = partitionName(id);
      const claim = await withTransaction(pool, async (c) => {
        await c.query(PUBLISH_LOCK_SQL, [catalog]);
        const v = await c.query<{ status: string }>(
          `SELECT status FROM version WHERE version_id = $1 AND catalog_name = $2 FOR UPDATE`,
          [id, catalog],
        );
        const status = v.rows[0]?.status;
        if (status !== 'retired' && status !== 'abandoned' && status !== 'failed' && status !== 'dropped') return null;
        if (status !== 'dropped') await c.query(`UPDATE version SET status = 'dropped' WHERE version_id = $1`, [id]);
        return { from: status };
      });
      if (!claim) continue;
      const exists = await pool.query(`SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r'`, [table]);
      if (!exists.rowCount) continue; // rows already gone (a retried attempt finished before)
      const attached = await pool.query(
        `SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE c.relname = $1`,
        [table],
      );
      const client = await pool.connect();
      try {
        await client.query(`SET lock_timeout = '5s'`);
        if (attached.rowCount) {
          await client.query(format('ALTER TABLE job DETACH PARTITION %I CONCURRENTLY', table));
        }
        await client.query(format('DROP TABLE IF EXISTS %I', table));
        await client.query(`RESET lock_timeout`);
      } catch (err) {
        // A pending detach from an interrupted attempt is finished by FINALIZE.
        if (/pending detach|FINALIZE/i.test((err as Error).message)) {
          await client.query(format('ALTER TABLE job DETACH PARTITION %I FINALIZE', table));
          await client.query(format('DROP TABLE IF EXISTS %I', table));
        } else {
          client.release();
          throw err;
        }
      }
      client.release();
      await pool.query(`DELETE FROM staged_record WHERE version_id = $1`, [id]);
      await pool.query(`DELETE FROM reject WHERE version_id = $1`, [id]);
      await recordEvent(pool, { catalog, versionId: id, kind: 'dropped', message: `version ${id} rows dropped (was ${claim.from})`, details: { was: claim.from, buildId: deps.buildId } });
      dropped.push(id);
    }
    return dropped;
  }

  /** Versions of `catalog` marked dropped whose table is still there (an interrupted drop). */
  const LEFTOVER_TABLES_SQL = `SELECT version_id::text FROM version v WHERE catalog_name = $1 AND status = 'dropped'
     AND EXISTS (SELECT 1 FROM pg_class c WHERE c.relname = 'job_v' || v.version_id::text AND c.relkind = 'r')`;

  return {
    /**
     * Plans a rebuild: takes the source watermark, creates a `building` version with its own
     * partition, and stores the fixed page plan. Idempotent by (workflow id, first run id): a retry
     * after commit returns the same version. Earlier unfinished versions of the catalog become
     * `abandoned`, and abandoned or failed versions lose their rows.
     * @throws VERSION_FENCED never; SOURCE_UNKNOWN (non-retryable) for an undefined source.
     */
    async planRebuild(input: {
      catalog: string;
      source: string;
      pageSize: number;
      workflowId: string;
      firstRunId: string;
    }): Promise<PlanResult> {
      // Heartbeats from a timer: reading a listing command or a large source's page boundaries can
      // take longer than the heartbeat timeout.
      let stage = 'planning';
      return withHeartbeat(() => ({ stage }), () => guard(async () => {
        const findExisting = async (): Promise<PlanResult | null> => {
        const existing = await pool.query<{
          version_id: string;
          pages_total: number;
          source_rows: string;
          watermark_key: string | null;
          watermark_time: string;
          source_timezone: string;
        }>(
          `SELECT version_id::text, pages_total, source_rows::text, watermark_key::text,
                  to_char(watermark_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS watermark_time, source_timezone
           FROM version WHERE workflow_id = $1 AND first_run_id = $2`,
          [input.workflowId, input.firstRunId],
        );
        if (!existing.rowCount) return null;
        const v = existing.rows[0];
        return {
          versionId: v.version_id,
          pagesTotal: v.pages_total,
          sourceRows: v.source_rows,
          watermark: { jobKey: v.watermark_key, time: v.watermark_time },
          timezone: v.source_timezone,
        };
        };
        const found = await findExisting();
        if (found) return found;
        stage = 'reading the source';
        const prepared = await sources.prepare(input.source);
        stage = 'storing the plan';
        const { watermark: wm, timezone } = prepared;
        const firstKeys = wm.maxKey ? await prepared.pageFirstKeys(wm.maxKey, input.pageSize) : [];
        const lastKeys = firstKeys.map((_, i) => (i + 1 < firstKeys.length ? (BigInt(firstKeys[i + 1]) - 1n).toString() : wm.maxKey!));
        const result = await withTransaction(pool, async (c) => {
          await c.query(PUBLISH_LOCK_SQL, [input.catalog]);
          const again = await c.query(`SELECT 1 FROM version WHERE workflow_id = $1 AND first_run_id = $2`, [input.workflowId, input.firstRunId]);
          if (again.rowCount) return null;
          const stale = await c.query<{ version_id: string }>(
            `UPDATE version SET status = 'abandoned', finished_at = now(), failure_reason = 'superseded by a new rebuild'
             WHERE catalog_name = $1 AND status IN ('building', 'verifying') RETURNING version_id::text`,
            [input.catalog],
          );
          for (const s of stale.rows) {
            await recordEvent(c, {
              catalog: input.catalog,
              versionId: s.version_id,
              kind: 'abandoned',
              message: `version ${s.version_id} abandoned: a new rebuild started (the previous one was terminated or lost)`,
            });
          }
          const ins = await c.query<{ version_id: string }>(
            `INSERT INTO version (catalog_name, source_name, workflow_id, first_run_id, page_size, pages_total,
                                  source_rows, watermark_key, watermark_time, source_timezone)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING version_id::text`,
            [input.catalog, input.source, input.workflowId, input.firstRunId, input.pageSize, firstKeys.length, wm.rows, wm.maxKey, wm.time, timezone],
          );
          const versionId = ins.rows[0].version_id;
          if (prepared.stage) {
            await prepared.stage(c, versionId);
            await c.query(`UPDATE version SET source_snapshot = $2, source_duplicates = $3 WHERE version_id = $1`, [versionId, prepared.snapshot, prepared.duplicates]);
          }
          const table = await createVersionPartition(c, versionId);
          await c.query(format('UPDATE version SET partition_table = %L WHERE version_id = $1', table), [versionId]);
          if (firstKeys.length) {
            await c.query(
              `INSERT INTO plan_page (version_id, page_no, first_key, last_key)
               SELECT $1, ord, f::bigint, l::bigint FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(f, l, ord)`,
              [versionId, firstKeys, lastKeys],
            );
          }
          await recordEvent(c, {
            catalog: input.catalog,
            versionId,
            kind: 'planned',
            message: `planned version ${versionId}: ${firstKeys.length} pages of ${input.pageSize} jobs, watermark ${
              prepared.snapshot ? `listing sha256 ${prepared.snapshot} (${wm.rows} records staged${prepared.duplicates ? `, ${prepared.duplicates} repeated ids dropped, the last listed kept` : ''})` : `job ${wm.maxKey ?? 'none'}`
            } at ${wm.time}`,
            details: {
              pagesTotal: firstKeys.length,
              pageSize: input.pageSize,
              watermarkKey: wm.maxKey,
              watermarkTime: wm.time,
              sourceRows: wm.rows,
              ...(prepared.snapshot ? { snapshotSha256: prepared.snapshot, duplicateRecords: prepared.duplicates } : {}),
              buildId: deps.buildId,
            },
          });
          return { versionId, pagesTotal: firstKeys.length, sourceRows: wm.rows, watermark: { jobKey: wm.maxKey, time: wm.time }, timezone };
        });
        if (!result) {
          const raced = await findExisting();
          if (!raced) throw new Error('plan: version vanished after a concurrent plan');
          return raced;
        }
        // Rows of versions that can never be published are dropped now (outside the plan transaction).
        const dead = await pool.query<{ version_id: string }>(
          `SELECT version_id::text FROM version WHERE catalog_name = $1 AND status IN ('abandoned', 'failed')
           UNION ${LEFTOVER_TABLES_SQL} ORDER BY 1`,
          [input.catalog],
        );
        await dropVersions(input.catalog, dead.rows.map((r) => r.version_id));
        return result;
      }));
    },

    /**
     * Copies one page: reads its key range from the source, then in ONE catalog transaction
     * inserts the ledger row first (`ON CONFLICT DO NOTHING`: if another attempt committed, roll back
     * and return its recorded result), locks the version row `FOR SHARE` and requires `building`
     * (the fence), upserts the rows keyed by (version, job id), and completes the ledger row.
     * Heartbeats from a timer throughout.
     * @throws VERSION_FENCED (non-retryable) when the version is no longer building.
     */
    async copyPage(input: CopyPageInput): Promise<CopyPageResult> {
      const info = activityInfo();
      const started = Date.now();
      const attempt = info.attempt;
      let stage = 'starting';
      let rowsRead = 0;
      return withHeartbeat(
        () => ({ pageNo: input.pageNo, stage, rowsRead }),
        () =>
          guard(async () => {
            const plan = await pool.query<{ first_key: string; last_key: string; status: string }>(
              `SELECT p.first_key::text, p.last_key::text, v.status FROM plan_page p JOIN version v USING (version_id)
               WHERE p.version_id = $1 AND p.page_no = $2`,
              [input.versionId, input.pageNo],
            );
            if (!plan.rowCount) throw new NotPublishableError(`page ${input.pageNo} of version ${input.versionId} is not in the plan`);
            const { first_key: firstKey, last_key: lastKey } = plan.rows[0];
            const recorded = async (): Promise<CopyPageResult | null> => {
              const r = await pool.query<{ rows: number; rejects: number; warnings: number; duplicates: number; checksum: string; attempt: number }>(
                `SELECT rows, rejects, warnings, duplicates, checksum, attempt FROM page WHERE version_id = $1 AND page_no = $2 AND committed_at IS NOT NULL`,
                [input.versionId, input.pageNo],
              );
              if (!r.rowCount) return null;
              const p = r.rows[0];
              return { pageNo: input.pageNo, rows: p.rows, rejects: p.rejects, warnings: p.warnings, duplicates: p.duplicates, checksum: p.checksum, attempt: p.attempt, activityAttempt: attempt, alreadyCommitted: true, durationMs: Date.now() - started, previousFailure: null };
            };
            await pool.query(
              `INSERT INTO page_attempt (version_id, page_no, attempt, worker_identity) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
              [input.versionId, input.pageNo, attempt, deps.identity],
            );
            let previousFailure: string | null = null;
            if (attempt > 1) previousFailure = await describePreviousAttempt(input, info.activityId, attempt);
            // A page found committed (an in-flight page of a dead worker that did commit) is skipped.
            const done = await recorded();
            if (done) return { ...done, previousFailure };
            if (plan.rows[0].status !== 'building') throw new VersionFencedError(input.versionId, plan.rows[0].status);

            stage = 'reading';
            const rows = await sources.get(input.source, input.versionId).readRange(firstKey, lastKey);
            rowsRead = rows.length;
            // Malformed records are quarantined (never fail the page); repeated ids keep the last row read.
            const checked = validateRows(rows);
            const unique = checked.valid;

            const hold = deps.faults?.holdAfterRead;
            if (hold && hold.pageNo === input.pageNo && hold.attempt === attempt) {
              const fs = await import('node:fs');
              fs.writeFileSync(hold.heldFile, String(process.pid));
              while (!fs.existsSync(hold.releaseFile)) await sleep(100);
            }

            stage = 'writing';
            // Cancellation (worker shutdown past its grace time, a cancelled rebuild) gives the page up:
            // the statement in flight is cancelled, the transaction rolls back, another attempt retries.
            const signal = Context.current().cancellationSignal;
            if (signal.aborted) {
              log.warn('page given up before writing: activity cancelled', { pageNo: input.pageNo, attempt });
              throw ApplicationFailure.retryable(`page ${input.pageNo} given up before writing: activity cancelled`, FailureType.PAGE_CANCELLED);
            }
            const result = await withTransaction(pool, async (c) => {
              let live = true;
              const backendPid = (c as unknown as { processID?: number }).processID;
              const onAbort = () => {
                if (live && backendPid) pool.query('SELECT pg_cancel_backend($1)', [backendPid]).catch(() => undefined);
              };
              signal.addEventListener('abort', onAbort, { once: true });
              try {
                return await writePage(c);
              } catch (err) {
                if (signal.aborted) throw ApplicationFailure.retryable(`page ${input.pageNo} given up while writing: activity cancelled (${(err as Error).message})`, FailureType.PAGE_CANCELLED);
                throw err;
              } finally {
                live = false;
                signal.removeEventListener('abort', onAbort);
              }
            });
            async function writePage(c: PoolClient): Promise<CopyPageResult | null> {
              const claimed = await c.query(
                `INSERT INTO page (version_id, page_no, first_key, last_key, attempt, worker_identity)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
                [input.versionId, input.pageNo, firstKey, lastKey, attempt, deps.identity],
              );
              if (!claimed.rowCount) return null; // another attempt committed: roll back, report its result
              const v = await c.query<{ status: string }>(`SELECT status FROM version WHERE version_id = $1 FOR SHARE`, [input.versionId]);
              if (v.rows[0]?.status !== 'building') throw new VersionFencedError(input.versionId, v.rows[0]?.status ?? 'missing');
              const slow = deps.faults?.slowPage;
              if (slow && slow.pageNo === input.pageNo && attempt === 1) {
                await c.query('SELECT pg_sleep($1)', [slow.ms / 1000]);
              }
              // The first attempt at a page of a fresh version COPYs its rows (falling back to the
              // upsert should any exist); a retry upserts, writing nothing for identical rows.
              if (attempt === 1) await copyOrUpsertRows(c, input.versionId, input.pageNo, unique);
              else await upsertRows(c, input.versionId, input.pageNo, unique);
              const rejects = checked.rejects.length;
              if (rejects) {
                await writeRejects(c, input.versionId, input.pageNo, checked.rejects);
                await recordEvent(c, {
                  catalog: input.catalog,
                  versionId: input.versionId,
                  kind: 'rejected',
                  message: `page ${input.pageNo}: ${rejects} source records quarantined: ${describeRejects(checked.rejects)}`,
                  details: { pageNo: input.pageNo, rejects, first: checked.rejects.slice(0, 5).map((r) => ({ jobKey: r.jobKey, jobId: r.jobId, reason: r.reason })), buildId: deps.buildId },
                });
              }
              if (checked.duplicates) {
                await recordEvent(c, {
                  catalog: input.catalog,
                  versionId: input.versionId,
                  kind: 'duplicates',
                  message: `page ${input.pageNo}: ${checked.duplicates} rows repeated a job id of the page; the last row read was kept`,
                  details: { pageNo: input.pageNo, duplicates: checked.duplicates, buildId: deps.buildId },
                });
              }
              const sum = await rangeChecksum(c, input.versionId, firstKey, lastKey);
              await c.query(
                `UPDATE page SET rows = $3, rejects = $5, warnings = $6, duplicates = $7, checksum = $4, committed_at = clock_timestamp()
                 WHERE version_id = $1 AND page_no = $2`,
                [input.versionId, input.pageNo, sum.rows, sum.checksum, rejects, checked.warnings, checked.duplicates],
              );
              return {
                pageNo: input.pageNo,
                rows: sum.rows,
                rejects,
                warnings: checked.warnings,
                duplicates: checked.duplicates,
                checksum: sum.checksum,
                attempt,
                activityAttempt: attempt,
                alreadyCommitted: false,
                durationMs: 0,
                previousFailure,
              };
            }
            if (!result) {
              const other = await recorded();
              if (!other) throw ApplicationFailure.retryable(`page ${input.pageNo}: ledger row held by an attempt that did not commit`, FailureType.PAGE_CONFLICT);
              return other;
            }
            result.durationMs = Date.now() - started;
            deps.onPageCommitted?.(result);
            return result;
          }),
      );

      async function describePreviousAttempt(input: CopyPageInput, activityId: string, attempt: number): Promise<string> {
        let failure = 'previous attempt did not complete';
        let worker: string | null = null;
        const prev = await pool.query<{ worker_identity: string }>(
          `SELECT worker_identity FROM page_attempt WHERE version_id = $1 AND page_no = $2 AND attempt = $3 LIMIT 1`,
          [input.versionId, input.pageNo, attempt - 1],
        );
        if (prev.rowCount) worker = prev.rows[0].worker_identity;
        const execution = info.workflowExecution;
        if (deps.client && execution) {
          try {
            const desc = await deps.client.workflow.getHandle(execution.workflowId, execution.runId).describe();
            const pending = desc.raw.pendingActivities?.find((a) => a.activityId === activityId);
            if (pending?.lastFailure?.message) failure = pending.lastFailure.message;
            // lastWorkerIdentity is the worker of the attempt now running (this one) once it started:
            // the attempt's own claim row names the previous holder; describe only fills a gap.
            if (!worker && pending?.lastWorkerIdentity && pending.lastWorkerIdentity !== deps.identity) worker = pending.lastWorkerIdentity;
          } catch (err) {
            log.warn('could not describe the workflow for the previous attempt', { error: (err as Error).message });
          }
        }
        const catalog = input.catalog;
        const message = `page ${input.pageNo} attempt ${attempt}: previous attempt by ${worker ?? 'unknown worker'} failed: ${failure}`;
        await recordEvent(pool, {
          catalog,
          versionId: input.versionId,
          kind: 'page_retry',
          message,
          details: { pageNo: input.pageNo, attempt, lastFailure: failure, lastWorkerIdentity: worker, retriedBy: deps.identity, buildId: deps.buildId },
        });
        log.warn('page retried', { pageNo: input.pageNo, attempt, lastFailure: failure, lastWorkerIdentity: worker });
        return `${failure} (worker ${worker ?? 'unknown'})`;
      }
    },

    /**
     * Ends the copy phase: the version becomes `verifying` under `FOR UPDATE` (waiting for page
     * transactions in flight; later page writes are refused), then gets its reader indexes and ANALYZE.
     * @throws VERSION_FENCED when the version is neither building nor verifying.
     */
    async sealVersion(input: { versionId: string }): Promise<void> {
      return guard(async () => {
        await withTransaction(pool, async (c) => {
          const v = await c.query<{ status: string }>(`SELECT status FROM version WHERE version_id = $1 FOR UPDATE`, [input.versionId]);
          const status = v.rows[0]?.status;
          if (status === 'building') await c.query(`UPDATE version SET status = 'verifying' WHERE version_id = $1`, [input.versionId]);
          else if (status !== 'verifying') throw new VersionFencedError(input.versionId, status ?? 'missing');
        });
        const table = partitionName(input.versionId);
        await withHeartbeat(
          () => ({ stage: 'indexing' }),
          async () => {
            const c = await pool.connect();
            try {
              await c.query(`SET statement_timeout = 0`);
              await c.query(format('CREATE INDEX IF NOT EXISTS %I ON %I (client, start_time)', `${table}_client_start`, table));
              await c.query(format('ANALYZE %I', table));
            } finally {
              c.release();
            }
          },
        );
      });
    },

    /**
     * Reconciles the version against the source at the watermark: per-bucket counts and
     * fingerprints, duplicate job names, a random sample compared field by field, and the delta
     * above the watermark. Stores the report in `reconciliation` and an event.
     */
    async reconcile(input: { catalog: string; source: string; versionId: string; round: number; sampleSize?: number }): Promise<ReconcileSummary> {
      return withHeartbeat(
        () => ({ stage: 'reconciling', round: input.round }),
        () =>
          guard(async () => {
            const v = await loadVersion(input.versionId);
            const source = sources.get(input.source, input.versionId);
            const table = partitionName(input.versionId);
            const maxKey = v.watermark_key;
            const cat = await catalogBucketStats(pool, input.versionId);
            const quarantine = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM reject WHERE version_id = $1`, [input.versionId]);
            const rejects = quarantine.rows[0].n;
            let src: BucketStat[];
            let delta: number;
            try {
              [src, delta] = await Promise.all([
                readSource(`source ${input.source}`, () => (maxKey ? source.bucketStats(maxKey) : Promise.resolve([] as BucketStat[]))),
                readSource(`source ${input.source}`, () => source.deltaCount(maxKey)),
              ]);
            } catch (err) {
              if (err instanceof SourceUnreadable) {
                // No bucket could be read: every bucket is unreadable, none is counted as empty.
                const names = cat.map((s) => s.bucket ?? 'none');
                const dated = cat.filter((s) => s.bucket !== null).map((s) => s.bucket!);
                const span = dated.length ? `${dated[0]} … ${dated[dated.length - 1]}` : 'none';
                const message =
                  `round ${input.round}: source ${input.source} could not be read for reconciliation, so every bucket is unreadable ` +
                  `(${names.length} buckets in the catalog, ${span}) and none is counted as empty: ${err.detail}`;
                const report = { round: input.round, ok: false, unreadable: names.slice(0, 1000), unreadableCount: names.length, unreadableReason: err.detail, watermarkKey: maxKey };
                await pool.query(
                  `INSERT INTO reconciliation (version_id, round, ok, report) VALUES ($1, $2, false, $3)
                   ON CONFLICT (version_id, round) DO UPDATE SET ok = false, report = EXCLUDED.report, created_at = now()`,
                  [input.versionId, input.round, JSON.stringify(report)],
                );
                await recordEvent(pool, { catalog: input.catalog, versionId: input.versionId, kind: 'unreadable', message, details: { ...report, unreadable: names.slice(0, 100), buildId: deps.buildId } });
                throw new NotPublishableError(message);
              }
              throw err;
            }
            const key = (b: string | null) => b ?? 'none';
            const srcMap = new Map(src.map((s) => [key(s.bucket), s]));
            const catMap = new Map(cat.map((s) => [key(s.bucket), s]));
            const mismatched: { bucket: string; source: number; catalog: number; reason: string }[] = [];
            for (const b of new Set([...srcMap.keys(), ...catMap.keys()])) {
              const s = srcMap.get(b);
              const c = catMap.get(b);
              if (!s || !c || s.count !== c.count) {
                mismatched.push({ bucket: b, source: s?.count ?? 0, catalog: c?.count ?? 0, reason: 'count' });
              } else if (s.fingerprint !== c.fingerprint) {
                mismatched.push({ bucket: b, source: s.count, catalog: c.count, reason: 'fingerprint' });
              }
            }
            mismatched.sort((a, b) => a.bucket.localeCompare(b.bucket));
            const dup = await pool.query<{ n: string }>(
              format(`SELECT count(*)::text AS n FROM (SELECT job FROM %I GROUP BY job HAVING count(*) > 1) d`, table),
            );
            // Field-by-field sample.
            const sampleSize = input.sampleSize ?? 1000;
            const sample = await pool.query<SourceRow>(
              format(`SELECT ${CATALOG_ROW_AS_TEXT} FROM %I t ORDER BY md5(t.job_id || $1::text) LIMIT $2`, table),
              [`${input.versionId}:${input.round}`, sampleSize],
            );
            let sampleMismatches = 0;
            const sampleDiffs: unknown[] = [];
            const sampleBuckets = new Set<string>();
            if (sample.rowCount && maxKey) {
              const byId = new Map(sample.rows.map((r) => [r.job_id, r]));
              const keys = sample.rows.map((r) => r.job_key!).sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
              const srcRows = await readSource(`${keys.length} sampled jobs of source ${input.source}`, () => source.readKeys(keys)).catch((err: unknown) => {
                throw err instanceof SourceUnreadable ? new NotPublishableError(`round ${input.round}: ${err.message}`) : err;
              });
              const seen = new Set<string>();
              for (const s of srcRows) {
                const c = byId.get(s.job_id!);
                if (!c) continue;
                seen.add(s.job_id!);
                const fields = JOB_COLUMNS.filter((f) => (s[f] ?? null) !== (c[f] ?? null));
                if (fields.length) {
                  sampleMismatches++;
                  if (sampleDiffs.length < 20) sampleDiffs.push({ jobId: s.job_id, fields });
                  sampleBuckets.add(key(c.bucket));
                  sampleBuckets.add(key(s.bucket));
                }
              }
              for (const c of sample.rows) if (!seen.has(c.job_id!)) sampleBuckets.add(key(c.bucket));
              sampleMismatches += sample.rows.length - seen.size;
            }
            // A record that differs in a field outside the fingerprint still sends its bucket to repair.
            for (const b of sampleBuckets) {
              if (!mismatched.some((m) => m.bucket === b)) {
                mismatched.push({ bucket: b, source: srcMap.get(b)?.count ?? 0, catalog: catMap.get(b)?.count ?? 0, reason: 'sample' });
              }
            }
            mismatched.sort((a, b) => a.bucket.localeCompare(b.bucket));
            const sourceRows = src.reduce((n, s) => n + s.count, 0);
            // Bucket statistics of the catalog include its quarantined records: source = catalog + rejects.
            const catalogRows = cat.reduce((n, s) => n + s.count, 0) - rejects;
            const [dst, codes, dups] = await Promise.all([
              maxKey
                ? readSource(`source ${input.source}`, () => source.dstReport(maxKey)).catch((err: unknown) => {
                    // A report only: it never blocks the publish, but says why it is missing.
                    log.warn('could not count DST-affected start times', { source: input.source, error: (err as Error).message });
                    return { error: (err as Error).message };
                  })
                : Promise.resolve(null),
              pool.query<{ field: string; code: string; jobs: number }>(
                format(
                  `SELECT f.field, f.code, count(*)::int AS jobs FROM %I t
                   CROSS JOIN LATERAL (VALUES ('type', t.type), ('level', t.level), ('status', t.status)) AS f(field, code)
                   WHERE f.code IS NOT NULL AND NOT (f.code = ANY (CASE f.field WHEN 'type' THEN $1::text[] WHEN 'level' THEN $2::text[] ELSE $3::text[] END))
                   GROUP BY 1, 2 ORDER BY 1, 2`,
                  table,
                ),
                [[...KNOWN_CODES.type], [...KNOWN_CODES.level], [...KNOWN_CODES.status]],
              ),
              pool.query<{ n: number }>(
                `SELECT (SELECT source_duplicates FROM version WHERE version_id = $1) + coalesce((SELECT sum(duplicates)::int FROM page WHERE version_id = $1), 0) AS n`,
                [input.versionId],
              ),
            ]);
            const unknownCodes = codes.rows;
            const warnings = unknownCodes.reduce((n, c) => n + c.jobs, 0);
            const summary: ReconcileSummary = {
              round: input.round,
              ok: mismatched.length === 0 && sampleMismatches === 0,
              buckets: srcMap.size,
              sourceRows,
              catalogRows,
              rejects,
              mismatched: mismatched.map((m) => m.bucket),
              delta,
              duplicateJobNames: Number(dup.rows[0].n),
              sampleMismatches,
              sampled: sample.rowCount ?? 0,
            };
            const maxRejects = sources.config(input.source).maxRejects ?? 0;
            const rejectSample = rejects
              ? (await pool.query<{ job_key: string; job_id: string | null; reason: string }>(
                  `SELECT job_key::text, job_id, reason FROM reject WHERE version_id = $1 ORDER BY job_key LIMIT 20`,
                  [input.versionId],
                )).rows
              : [];
            const overThreshold = summary.ok && rejects > maxRejects;
            if (overThreshold) summary.ok = false;
            const report = {
              ...summary,
              mismatchedBuckets: mismatched.slice(0, 1000),
              sampleDiffs,
              watermarkKey: maxKey,
              sourceEqualsCatalogPlusRejects: sourceRows === catalogRows + rejects,
              // Byte totals summed in SQL per bucket and added here as BigInt: decimal text, exact.
              bytes: { source: sumBytes(src), catalogPlusRejects: sumBytes(cat) },
              maxRejects,
              rejectSample,
              warnings,
              unknownCodes,
              duplicateRecords: dups.rows[0].n,
              ...(dst ? { dst } : {}),
            };
            await pool.query(
              `INSERT INTO reconciliation (version_id, round, ok, report) VALUES ($1, $2, $3, $4)
               ON CONFLICT (version_id, round) DO UPDATE SET ok = EXCLUDED.ok, report = EXCLUDED.report, created_at = now()`,
              [input.versionId, input.round, summary.ok, JSON.stringify(report)],
            );
            await recordEvent(pool, {
              catalog: input.catalog,
              versionId: input.versionId,
              kind: 'reconciled',
              message: summary.ok
                ? `round ${input.round}: ${summary.buckets} buckets match (${sourceRows} jobs = ${catalogRows} in the catalog + ${rejects} quarantined; delta ${delta} jobs after the watermark)${warningsNote()}`
                : overThreshold
                  ? `round ${input.round}: ${summary.buckets} buckets match, but ${rejects} source records are quarantined (threshold ${maxRejects})${warningsNote()}`
                  : `round ${input.round}: ${mismatched.length} buckets differ (${summary.mismatched.slice(0, 10).join(', ')}${mismatched.length > 10 ? ', …' : ''}), ${sampleMismatches} sampled jobs differ`,
              details: report,
            });
            function warningsNote(): string {
              const parts: string[] = [];
              if (warnings) parts.push(`${warnings} jobs with unknown codes kept verbatim (${unknownCodes.slice(0, 5).map((c) => `${c.field} ${JSON.stringify(c.code)} × ${c.jobs}`).join(', ')})`);
              if (dst && 'error' in dst) parts.push(`DST counts unavailable: ${dst.error}`);
              else if (dst && (dst.nonexistent || dst.ambiguous)) parts.push(`${dst.nonexistent} nonexistent and ${dst.ambiguous} ambiguous start times at DST changes in ${dst.zone}`);
              if (dups.rows[0].n) parts.push(`${dups.rows[0].n} repeated job ids dropped`);
              return parts.length ? `; warnings: ${parts.join('; ')}` : '';
            }
            if (overThreshold) {
              const reasons = describeRejects(rejectSample.map((r) => ({ jobKey: r.job_key, jobId: r.job_id, reason: r.reason })));
              throw new NotPublishableError(
                `${rejects} source records of ${input.source} are quarantined, more than the threshold of ${maxRejects}: ${reasons}. ` +
                  `Version ${input.versionId} is not published. The reject table holds every reason and raw record ` +
                  `(SELECT * FROM reject WHERE version_id = ${input.versionId}); fix the source, or raise maxRejects of source ${input.source} in the workers' configuration file and restart the workers (they read it at start) to publish with them.`,
              );
            }
            return summary;
          }),
      );
    },

    /**
     * Repairs one bucket: re-reads it from the source at the watermark, upserts it, moves catalog
     * rows that now belong to another bucket, deletes rows whose job is gone from the source, and
     * verifies the bucket. Writes require the version to be building or verifying.
     */
    async repairBucket(input: RepairBucketInput): Promise<RepairBucketResult> {
      return withHeartbeat(
        () => ({ stage: 'repairing', bucket: input.bucket }),
        () =>
          guard(async () => {
            const v = await loadVersion(input.versionId);
            if (!v.watermark_key) return { bucket: input.bucket, upserted: 0, deleted: 0, ok: true };
            const source = sources.get(input.source, input.versionId);
            const table = partitionName(input.versionId);
            const maxKey = v.watermark_key;
            const what = `bucket ${input.bucket ?? 'none'} of source ${input.source}`;
            let read: ValidatedRows;
            let stillThere: Set<string>;
            let moved: ValidatedRows;
            let strays: { job_id: string; job_key: string }[];
            try {
              read = validateRows(await readSource(what, () => source.readBucket(input.bucket, maxKey)));
              const ids = new Set(read.valid.map((r) => r.job_id!));
              const rejectedHere = new Set(read.rejects.map((r) => r.jobKey));
              const inCatalog = await pool.query<{ job_id: string; job_key: string }>(
                format(`SELECT job_id, job_key::text FROM %I WHERE bucket IS NOT DISTINCT FROM $1::date`, table),
                [input.bucket],
              );
              // Catalog rows of this bucket that the source no longer has here: moved, gone, or (rows
              // of records read here that are now quarantined) to be dropped below.
              strays = inCatalog.rows.filter((r) => !ids.has(r.job_id) && !rejectedHere.has(r.job_key));
              const strayKeys = strays.map((r) => r.job_key);
              stillThere = await readSource(what, () => source.existingJobIds(strayKeys, maxKey));
              const movedKeys = strays.filter((r) => stillThere.has(r.job_key)).map((r) => r.job_key);
              moved = validateRows(movedKeys.length ? await readSource(what, () => source.readKeys(movedKeys)) : []);
            } catch (err) {
              if (err instanceof SourceUnreadable) {
                // An unreadable bucket is never repaired as if empty: the rebuild fails naming it.
                const message = `${err.message}; it is never counted as empty, so version ${input.versionId} is not published`;
                await recordEvent(pool, { catalog: input.catalog, versionId: input.versionId, kind: 'unreadable', message, details: { bucket: input.bucket, reason: err.detail, buildId: deps.buildId } });
                throw new NotPublishableError(message);
              }
              throw err;
            }
            const gone = strays.filter((r) => !stillThere.has(r.job_key));
            // Records that are quarantined now lose their catalog row; quarantined records of the bucket
            // that are valid now (or gone) leave the reject table.
            const rejected = [...read.rejects, ...moved.rejects];
            const rejectedKeys = rejected.map((r) => r.jobKey);
            const { upserted, deleted } = await withTransaction(pool, async (c) => {
              const s = await c.query<{ status: string }>(`SELECT status FROM version WHERE version_id = $1 FOR SHARE`, [input.versionId]);
              const status = s.rows[0]?.status ?? 'missing';
              if (status !== 'building' && status !== 'verifying') throw new VersionFencedError(input.versionId, status);
              const n = await upsertRows(c, input.versionId, 0, dedupeByJobId([...read.valid, ...moved.valid]));
              const d = gone.length
                ? await c.query(format('DELETE FROM %I WHERE job_id = ANY($1::text[])', table), [gone.map((r) => r.job_id)])
                : { rowCount: 0 };
              const q = rejectedKeys.length
                ? await c.query(format('DELETE FROM %I WHERE job_key = ANY($1::bigint[])', table), [rejectedKeys])
                : { rowCount: 0 };
              await c.query(
                `DELETE FROM reject WHERE version_id = $1 AND bucket IS NOT DISTINCT FROM $2::date AND NOT (job_key = ANY($3::bigint[]))`,
                [input.versionId, input.bucket, rejectedKeys],
              );
              await writeRejects(c, input.versionId, 0, rejected);
              return { upserted: n, deleted: (d.rowCount ?? 0) + (q.rowCount ?? 0) };
            });
            const after = await pool.query<{ n: string }>(
              format(
                `SELECT ((SELECT count(*) FROM %I WHERE bucket IS NOT DISTINCT FROM $1::date)
                       + (SELECT count(*) FROM reject WHERE version_id = %s AND bucket IS NOT DISTINCT FROM $1::date))::text AS n`,
                table,
                input.versionId,
              ),
              [input.bucket],
            );
            const ok = Number(after.rows[0].n) === read.valid.length + read.rejects.length;
            await recordEvent(pool, {
              catalog: input.catalog,
              versionId: input.versionId,
              kind: 'repaired',
              message: `bucket ${input.bucket ?? 'none'}: ${upserted} rows upserted, ${deleted} deleted, ${moved.valid.length + moved.rejects.length} moved, ${rejected.length} quarantined; ${ok ? 'verified' : 'still differs'}`,
              details: { bucket: input.bucket, upserted, deleted, moved: moved.valid.length + moved.rejects.length, rejects: rejected.length, ok, buildId: deps.buildId },
            });
            return { bucket: input.bucket, upserted, deleted, ok };
          }),
      );
    },

    /**
     * Publishes a version in one transaction under the catalog's publish lock: requires it to be
     * `verifying` with a passing reconciliation, applies the shrink guard, flips `active`, marks the
     * previous active version `retired`.
     * @throws NOT_PUBLISHABLE (non-retryable) naming the reason and buckets.
     */
    async publishVersion(input: { catalog: string; versionId: string; allowShrink: boolean; shrinkShare?: number; shrinkMinJobs?: number }): Promise<{ previousVersionId: string | null }> {
      return guard(async () => {
        const shrinkShare = input.shrinkShare ?? 0.1;
        const shrinkMin = input.shrinkMinJobs ?? 5;
        // Job names whose job id changed (a source re-created from volumes renumbers jobs): read
        // before the publish transaction (both versions are immutable by now) so it stays short.
        const activeNow = await pool.query<{ version_id: string }>(`SELECT version_id::text FROM active WHERE catalog_name = $1`, [input.catalog]);
        let renumbered: { jobs: RenumberedJob[]; truncated: boolean } | null = null;
        let renumberedError: string | null = null;
        if (activeNow.rows[0] && activeNow.rows[0].version_id !== input.versionId) {
          try {
            renumbered = await renumberedJobs(pool, activeNow.rows[0].version_id, input.versionId);
          } catch (err) {
            // A report only: it never blocks the publish.
            renumberedError = (err as Error).message;
            log.warn('could not compare job ids with the active version', { versionId: input.versionId, error: renumberedError });
          }
        }
        return withTransaction(pool, async (c) => {
          await c.query(PUBLISH_LOCK_SQL, [input.catalog]);
          const v = await c.query<{ status: string; catalog_name: string }>(
            `SELECT status, catalog_name FROM version WHERE version_id = $1 FOR UPDATE`,
            [input.versionId],
          );
          const status = v.rows[0]?.status;
          if (v.rows[0]?.catalog_name !== input.catalog) throw new NotPublishableError(`version ${input.versionId} is not a version of catalog ${input.catalog}`);
          if (status === 'active') {
            const prev = await c.query<{ version_id: string }>(
              `SELECT version_id::text FROM version WHERE catalog_name = $1 AND status = 'retired' ORDER BY published_at DESC NULLS LAST LIMIT 1`,
              [input.catalog],
            );
            return { previousVersionId: prev.rows[0]?.version_id ?? null }; // a retry after commit
          }
          if (status !== 'verifying' && status !== 'building') throw new VersionFencedError(input.versionId, status ?? 'missing');
          const rec = await c.query<{ ok: boolean }>(
            `SELECT ok FROM reconciliation WHERE version_id = $1 ORDER BY round DESC LIMIT 1`,
            [input.versionId],
          );
          if (!rec.rows[0]?.ok) throw new NotPublishableError(`version ${input.versionId} has no passing reconciliation`);
          const cur = await c.query<{ version_id: string }>(`SELECT version_id::text FROM active WHERE catalog_name = $1 FOR UPDATE`, [input.catalog]);
          const previous = cur.rows[0]?.version_id ?? null;
          if (previous !== (activeNow.rows[0]?.version_id ?? null)) {
            renumbered = null; // the pointer moved meanwhile: the comparison was with another version
            renumberedError = `active version changed to ${previous} during the publish; job ids not compared`;
          }
          const renumberedNote = renumbered?.jobs.length
            ? `; ${renumbered.jobs.length}${renumbered.truncated ? '+' : ''} job names have a new job id (source renumbered?): ${renumbered.jobs
                .slice(0, 10)
                .map((j) => `${j.job} (${j.previousJobId} → ${j.jobId})`)
                .join(', ')}${renumbered.jobs.length > 10 ? ', …' : ''}`
            : '';
          if (previous && !input.allowShrink) {
            // Buckets before the new version's oldest dated job are pruned history, not shrinkage;
            // a new version without dated jobs prunes nothing (every old bucket is compared).
            const shrunk = await c.query<{ bucket: string; before: string; after: string }>(
              format(
                `WITH o AS (SELECT bucket, count(*) AS n FROM %I WHERE bucket IS NOT NULL GROUP BY bucket),
                      nw AS (SELECT bucket, count(*) AS n FROM %I WHERE bucket IS NOT NULL GROUP BY bucket),
                      lo AS (SELECT coalesce(min(bucket), '-infinity'::date) AS b FROM nw)
                 SELECT o.bucket::text, o.n::text AS before, coalesce(nw.n, 0)::text AS after
                 FROM o CROSS JOIN lo LEFT JOIN nw ON nw.bucket = o.bucket
                 WHERE o.bucket >= lo.b AND o.n - coalesce(nw.n, 0) >= $1 AND (o.n - coalesce(nw.n, 0)) > $2::numeric * o.n
                 ORDER BY 1`,
                partitionName(previous),
                partitionName(input.versionId),
              ),
              [shrinkMin, shrinkShare],
            );
            if (shrunk.rowCount) {
              const names = shrunk.rows.map((r) => `${r.bucket} (${r.before} → ${r.after})`);
              throw new NotPublishableError(
                `shrink guard: ${shrunk.rowCount} buckets lost more than ${Math.round(shrinkShare * 100)}% and at least ${shrinkMin} jobs compared with active version ${previous}: ${names.slice(0, 62).join(', ')}${names.length > 62 ? ', …' : ''}${renumberedNote}; rerun with --allow-shrink if this is intended`,
              );
            }
          }
          await c.query(
            `INSERT INTO active (catalog_name, version_id, published_at) VALUES ($1, $2, now())
             ON CONFLICT (catalog_name) DO UPDATE SET version_id = EXCLUDED.version_id, published_at = EXCLUDED.published_at`,
            [input.catalog, input.versionId],
          );
          await c.query(`UPDATE version SET status = 'active', published_at = now(), finished_at = now() WHERE version_id = $1`, [input.versionId]);
          if (previous) await c.query(`UPDATE version SET status = 'retired' WHERE version_id = $1`, [previous]);
          await recordEvent(c, {
            catalog: input.catalog,
            versionId: input.versionId,
            kind: 'published',
            message: `version ${input.versionId} published${previous ? `, replacing version ${previous}` : ''}${input.allowShrink ? ' (shrink allowed)' : ''}${renumberedNote}`,
            details: {
              previousVersionId: previous,
              allowShrink: input.allowShrink,
              renumberedJobs: renumbered?.jobs ?? [],
              renumberedJobsTruncated: renumbered?.truncated ?? false,
              ...(renumberedError ? { renumberedJobsError: renumberedError } : {}),
              buildId: deps.buildId,
            },
          });
          return { previousVersionId: previous };
        });
      });
    },

    /**
     * Retires versions beyond retention after a publish: keeps the `retention` most recently
     * published retired versions with their rows; detaches (CONCURRENTLY, with lock_timeout) and drops the rest.
     */
    async retireVersions(input: { catalog: string; retention: number }): Promise<PublishCatalogResult['retired']> {
      return guard(async () => {
        const old = await pool.query<{ version_id: string }>(
          `SELECT version_id::text FROM version WHERE catalog_name = $1 AND status = 'retired'
           ORDER BY published_at DESC NULLS LAST, version_id DESC OFFSET $2`,
          [input.catalog, input.retention],
        );
        const leftovers = await pool.query<{ version_id: string }>(LEFTOVER_TABLES_SQL, [input.catalog]);
        // Staged listings are only read while a version is built and verified.
        await pool.query(
          `DELETE FROM staged_record s USING version v
           WHERE s.version_id = v.version_id AND v.catalog_name = $1 AND v.status IN ('active', 'retired', 'dropped')`,
          [input.catalog],
        );
        return dropVersions(input.catalog, [...old.rows, ...leftovers.rows].map((r) => r.version_id));
      });
    },

    /**
     * Ends an unpublished version: `abandoned` (cancelled) or `failed` (not publishable), under
     * `FOR UPDATE` so page transactions in flight finish first and later writes are refused.
     * The active version is untouched. Idempotent.
     */
    async endVersion(input: { catalog: string; versionId: string; status: 'abandoned' | 'failed'; reason: string }): Promise<void> {
      return guard(async () => {
        await withTransaction(pool, async (c) => {
          const v = await c.query<{ status: string }>(`SELECT status FROM version WHERE version_id = $1 FOR UPDATE`, [input.versionId]);
          const status = v.rows[0]?.status;
          if (status !== 'building' && status !== 'verifying') return;
          await c.query(`UPDATE version SET status = $2, finished_at = now(), failure_reason = $3 WHERE version_id = $1`, [
            input.versionId,
            input.status,
            input.reason,
          ]);
          await recordEvent(c, {
            catalog: input.catalog,
            versionId: input.versionId,
            kind: input.status,
            message: `version ${input.versionId} ${input.status}: ${input.reason}`,
            details: { buildId: deps.buildId },
          });
        });
      });
    },

    /** Appends an event to the catalog's log (phase changes reported by the workflow). */
    async recordEvent(input: { catalog: string; versionId: string | null; kind: string; message: string; details?: Record<string, unknown> }): Promise<void> {
      return guard(() => recordEvent(pool, { ...input, details: { ...(input.details ?? {}), buildId: deps.buildId } }));
    },
  };
}

/** The activity functions registered by the worker. */
export type Activities = ReturnType<typeof createActivities>;

/** Total of the buckets' byte sums (decimal text in, decimal text out; exact). */
function sumBytes(stats: BucketStat[]): string {
  return stats.reduce((n, s) => n + BigInt(s.bytes ?? '0'), 0n).toString();
}

/** The first quarantined records of a list, for messages: `key (id): reason`. */
export function describeRejects(rejects: Pick<RejectRecord, 'jobKey' | 'jobId' | 'reason'>[], limit = 3): string {
  return (
    rejects
      .slice(0, limit)
      .map((r) => `record ${r.jobKey}${r.jobId && r.jobId !== r.jobKey ? ` (${r.jobId.length > 16 ? `${r.jobId.slice(0, 12)}…` : r.jobId})` : ''}: ${r.reason}`)
      .join('; ') + (rejects.length > limit ? '; …' : '')
  );
}

/**
 * De-duplicates rows by job id, keeping the LAST row read for an id (the source orders by key,
 * so the winner is deterministic); `ON CONFLICT` cannot affect a row twice in one command.
 */
export function dedupeByJobId(rows: SourceRow[]): SourceRow[] {
  const byId = new Map<string, SourceRow>();
  for (const r of rows) byId.set(r.job_id!, r);
  return byId.size === rows.length ? rows : [...byId.values()];
}

/** A job name (`job`) whose job id differs between two versions. */
export interface RenumberedJob {
  job: string;
  previousJobId: string;
  jobId: string;
}

/** At most this many renumbered job names are reported. */
const RENUMBERED_LIMIT = 100;

/**
 * Job names (`job`, the Bareos unique job name) whose job id changed from version `oldId` to
 * `newId`: a join of the two partitions on `job` where the id differs and neither side's
 * (name, id) pair exists in the other version (so duplicate names are not reported), limited to
 * 100 names; `truncated` says there are more.
 */
export async function renumberedJobs(db: Pool | PoolClient, oldId: string, newId: string): Promise<{ jobs: RenumberedJob[]; truncated: boolean }> {
  const { rows } = await db.query<{ job: string; old_id: string; new_id: string }>(
    format(
      `SELECT o.job, o.job_id AS old_id, n.job_id AS new_id
       FROM %I o JOIN %I n ON n.job = o.job AND n.job_id <> o.job_id
       WHERE NOT EXISTS (SELECT 1 FROM %I x WHERE x.version_id = %s AND x.job_id = o.job_id AND x.job = o.job)
         AND NOT EXISTS (SELECT 1 FROM %I y WHERE y.version_id = %s AND y.job_id = n.job_id AND y.job = n.job)
       LIMIT %s`,
      partitionName(oldId),
      partitionName(newId),
      partitionName(newId),
      newId,
      partitionName(oldId),
      oldId,
      RENUMBERED_LIMIT + 1,
    ),
  );
  const byName = new Map<string, RenumberedJob>();
  for (const r of rows) if (!byName.has(r.job)) byName.set(r.job, { job: r.job, previousJobId: r.old_id, jobId: r.new_id });
  const jobs = [...byName.values()].sort((a, b) => a.job.localeCompare(b.job));
  return { jobs: jobs.slice(0, RENUMBERED_LIMIT), truncated: rows.length > RENUMBERED_LIMIT };
}
