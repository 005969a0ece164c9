/**
 * The page plan and the ledger: `plan_page` (the fixed key range of every page, stored at plan),
 * `page` (one row per committed page: claimed first in the page transaction, completed last) and
 * `page_attempt` (one claim row per execution of an attempt: which worker ran it, and whether an
 * operator paused it).
 */
import type { PoolClient } from 'pg';
import type { Queryable } from '../db';
import type { VersionStatus } from './versions';

/** One page of a plan as stored: its key range (decimal text) and the source rows counted in it. */
export interface PlanPageRow {
  firstKey: string;
  lastKey: string;
  /** Source rows in the range when the plan was made. */
  plannedRows: number;
}

/** Plan pages stored per statement. */
const PLAN_PAGES_PER_INSERT = 10_000;

/**
 * Stores the fixed plan of a version: page n (from 1) is `pages[n-1]`; one statement per
 * {@link PLAN_PAGES_PER_INSERT} pages, so no statement grows with the plan; nothing when there are
 * no pages.
 */
export async function insertPlanPages(db: Queryable, versionId: string, pages: PlanPageRow[]): Promise<void> {
  for (let at = 0; at < pages.length; at += PLAN_PAGES_PER_INSERT) {
    const batch = pages.slice(at, at + PLAN_PAGES_PER_INSERT);
    await db.query(
      `INSERT INTO plan_page (version_id, page_no, first_key, last_key, planned_rows)
               SELECT $1, $2::int + ord, f::bigint, l::bigint, n
               FROM unnest($3::text[], $4::text[], $5::int[]) WITH ORDINALITY AS u(f, l, n, ord)`,
      [versionId, at, batch.map((p) => p.firstKey), batch.map((p) => p.lastKey), batch.map((p) => p.plannedRows)],
    );
  }
}

/** One page of the plan with its version's current status (unlocked: the page transaction fences again). */
export interface PlannedPage {
  /** First and last paging key of the page, decimal text. */
  firstKey: string;
  lastKey: string;
  /** Source rows the plan counted in the page; null when the plan stored no count (a plan made before migration 005). */
  plannedRows: number | null;
  versionStatus: VersionStatus;
  /** The version rebuilds file records too (`--files`): each page writes its jobs' files. */
  files: boolean;
  /** A refresh's page: the version it builds on (its rows of the page's keys are superseded). */
  baseVersionId: string | null;
  /** A refresh's page: the only jobs it processes (ascending); null for a page of a full rebuild. */
  keys: string[] | null;
}

/** Page `pageNo` of a version's plan, or null when the plan has no such page. */
export async function readPlanPage(db: Queryable, versionId: string, pageNo: number): Promise<PlannedPage | null> {
  const plan = await db.query<{
    first_key: string;
    last_key: string;
    planned_rows: number | null;
    status: VersionStatus;
    files: boolean;
    base_version_id: string | null;
    keys: string[] | null;
  }>(
    `SELECT p.first_key::text, p.last_key::text, p.planned_rows, v.status, v.files, v.base_version_id::text,
            CASE WHEN v.base_version_id IS NULL THEN NULL
                 ELSE (SELECT array_agg(k.job_key::text ORDER BY k.job_key) FROM plan_page_key k
                       WHERE k.version_id = p.version_id AND k.page_no = p.page_no) END AS keys
     FROM plan_page p JOIN version v USING (version_id)
     WHERE p.version_id = $1 AND p.page_no = $2`,
    [versionId, pageNo],
  );
  const p = plan.rows[0];
  return p
    ? {
        firstKey: p.first_key,
        lastKey: p.last_key,
        plannedRows: p.planned_rows,
        versionStatus: p.status,
        files: p.files,
        baseVersionId: p.base_version_id,
        keys: p.base_version_id ? (p.keys ?? []) : null,
      }
    : null;
}

/** An attempt of one page by one worker. */
export interface PageAttemptKey {
  versionId: string;
  pageNo: number;
  /** Temporal attempt number, from 1 (it restarts at 1 after `temporal activity reset`). */
  attempt: number;
}

/** One execution of an attempt: its claim row's id, unique even when attempt numbers repeat. */
export interface AttemptClaim extends PageAttemptKey {
  /** Claim id (a UUID the attempt picks when it starts). */
  claimId: string;
}

/**
 * Records that worker `identity` runs this execution of an attempt of the page (one row per claim
 * id; claiming again, e.g. after the pause report inserted the row, changes nothing).
 */
export async function claimPageAttempt(db: Queryable, a: AttemptClaim, identity: string): Promise<void> {
  await db.query(
    `INSERT INTO page_attempt (version_id, page_no, attempt, worker_identity, claim_id) VALUES ($1, $2, $3, $4, $5)
               ON CONFLICT (claim_id) DO NOTHING`,
    [a.versionId, a.pageNo, a.attempt, identity, a.claimId],
  );
}

/**
 * The worker of the latest claim of attempt `attempt` of a page other than claim `exceptClaimId`
 * (attempt numbers repeat after an activity reset: the latest execution is the previous one), or
 * null when no other execution claimed it.
 */
export async function attemptWorker(
  db: Queryable,
  a: PageAttemptKey,
  exceptClaimId: string | null = null,
): Promise<string | null> {
  const prev = await db.query<{ worker_identity: string }>(
    `SELECT worker_identity FROM page_attempt
               WHERE version_id = $1 AND page_no = $2 AND attempt = $3 AND claim_id IS DISTINCT FROM $4
               ORDER BY started_at DESC LIMIT 1`,
    [a.versionId, a.pageNo, a.attempt, exceptClaimId],
  );
  return prev.rows[0]?.worker_identity ?? null;
}

/**
 * Marks an execution of a page as paused by an operator (`temporal activity pause`); inserts its
 * claim row when the pause came before the attempt claimed.
 */
export async function markAttemptPaused(db: Queryable, a: AttemptClaim, identity: string): Promise<void> {
  await db.query(
    `INSERT INTO page_attempt (version_id, page_no, attempt, worker_identity, claim_id, paused_at)
               VALUES ($1, $2, $3, $4, $5, clock_timestamp())
               ON CONFLICT (claim_id) DO UPDATE SET paused_at = coalesce(page_attempt.paused_at, EXCLUDED.paused_at)`,
    [a.versionId, a.pageNo, a.attempt, identity, a.claimId],
  );
}

/** Claim ids of executions of a page paused by an operator whose resumption was not reported yet. */
export async function unresumedPauses(db: Queryable, versionId: string, pageNo: number): Promise<string[]> {
  const r = await db.query<{ claim_id: string }>(
    `SELECT claim_id::text FROM page_attempt
               WHERE version_id = $1 AND page_no = $2 AND paused_at IS NOT NULL AND resumed_at IS NULL`,
    [versionId, pageNo],
  );
  return r.rows.map((x) => x.claim_id);
}

/** Records that the pauses of these claims were reported as resumed to the rebuild. */
export async function markPausesResumed(db: Queryable, claimIds: string[]): Promise<void> {
  if (!claimIds.length) return;
  await db.query(
    `UPDATE page_attempt SET resumed_at = clock_timestamp() WHERE claim_id = ANY($1::uuid[]) AND resumed_at IS NULL`,
    [claimIds],
  );
}

/**
 * Inserts the page's ledger row first thing in the page transaction (`ON CONFLICT DO NOTHING`).
 * @returns false when the row exists: another attempt committed the page (or holds it), so this
 *   transaction must roll back and report that attempt's recorded result.
 */
export async function claimPage(
  c: PoolClient,
  a: PageAttemptKey & { firstKey: string; lastKey: string },
  identity: string,
): Promise<boolean> {
  const claimed = await c.query(
    `INSERT INTO page (version_id, page_no, first_key, last_key, attempt, worker_identity)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
    [a.versionId, a.pageNo, a.firstKey, a.lastKey, a.attempt, identity],
  );
  return !!claimed.rowCount;
}

/** What a committed page holds, as recorded in its ledger row. */
export interface PageTotals {
  /** Catalog rows in the page's key range after the write. */
  rows: number;
  /** Empty: pages are not read back (reconciliation verifies per bucket). */
  checksum: string;
  /** Quarantined source records of the page. */
  rejects: number;
  /** Jobs with a code the product does not know (kept verbatim). */
  warnings: number;
  /** Rows dropped as repeats of a job id of the page. */
  duplicates: number;
  /** Values decoded from the source's legacy encoding, per catalog column (absent or empty: none). */
  decoded?: Record<string, number>;
  /** File records written and quarantined (rebuilds with `--files`; absent: none). */
  files?: { rows: number; rejects: number };
}

/** Completes the page's ledger row with its totals and commit time (last statement of the page transaction). */
export async function completePage(c: PoolClient, versionId: string, pageNo: number, t: PageTotals): Promise<void> {
  await c.query(
    `UPDATE page SET rows = $3, rejects = $5, warnings = $6, duplicates = $7, checksum = $4, decoded = $8::jsonb,
                     files = $9, file_rejects = $10, committed_at = clock_timestamp()
                 WHERE version_id = $1 AND page_no = $2`,
    [
      versionId,
      pageNo,
      t.rows,
      t.checksum,
      t.rejects,
      t.warnings,
      t.duplicates,
      t.decoded && Object.keys(t.decoded).length ? JSON.stringify(t.decoded) : null,
      t.files ? t.files.rows : null,
      t.files ? t.files.rejects : null,
    ],
  );
}

/** A committed page's ledger row: its totals and the Temporal attempt that committed it. */
export interface RecordedPage extends PageTotals {
  attempt: number;
}

/** The ledger row of a committed page, or null when the page is not committed. */
export async function recordedPage(db: Queryable, versionId: string, pageNo: number): Promise<RecordedPage | null> {
  const r = await db.query<RecordedPage>(
    `SELECT rows, rejects, warnings, duplicates, checksum, attempt FROM page WHERE version_id = $1 AND page_no = $2 AND committed_at IS NOT NULL`,
    [versionId, pageNo],
  );
  return r.rows[0] ?? null;
}

/** Suffix of the `application_name` of one page's transaction. */
function pageSessionSuffix(versionId: string, pageNo: number): string {
  return `:page:${versionId}:${pageNo}`;
}

/**
 * Names the page transaction's session after its page for the transaction only (`SET LOCAL`: the
 * pool's name, e.g. `catalog-rebuild:worker:<pid>`, followed by `:page:<version>:<page>`), so that a
 * later attempt can find it in `pg_stat_activity` should its worker stop responding (a zombie), and
 * sets its `statement_timeout` (ms).
 */
export async function tagPageSession(c: PoolClient, a: AttemptClaim, statementTimeoutMs: number): Promise<void> {
  await c.query(
    `SELECT set_config('application_name', left(current_setting('application_name'), 63 - length($1)) || $1, true),
            set_config('statement_timeout', $2, true)`,
    [pageSessionSuffix(a.versionId, a.pageNo), String(statementTimeoutMs)],
  );
}

/**
 * Backends (pids) whose transaction works on this page for another attempt: sessions tagged by
 * {@link tagPageSession}, other than the caller's own.
 */
export async function otherPageBackends(db: Queryable, versionId: string, pageNo: number): Promise<number[]> {
  const { rows } = await db.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity
     WHERE right(application_name, length($1)) = $1 AND datname = current_database() AND pid <> pg_backend_pid()`,
    [pageSessionSuffix(versionId, pageNo)],
  );
  return rows.map((r) => r.pid);
}

/**
 * Ends these backends (`pg_terminate_backend`: their transactions roll back).
 * @returns the pids that were signalled.
 */
export async function terminateBackends(db: Queryable, pids: number[]): Promise<number[]> {
  if (!pids.length) return [];
  const { rows } = await db.query<{ pid: number }>(
    `SELECT pid FROM unnest($1::int[]) AS p(pid) WHERE pg_terminate_backend(pid)`,
    [pids],
  );
  return rows.map((r) => r.pid);
}

/**
 * Values the version's committed pages decoded from their source's legacy encoding, summed per
 * catalog column (`{ client: 12, comment: 5 }`); empty when none.
 */
export async function decodedValueCounts(db: Queryable, versionId: string): Promise<Record<string, number>> {
  const { rows } = await db.query<{ col: string; n: number }>(
    `SELECT d.key AS col, sum(d.value::bigint)::int AS n FROM page p, jsonb_each_text(p.decoded) d
     WHERE p.version_id = $1 AND p.decoded IS NOT NULL AND p.committed_at IS NOT NULL GROUP BY 1 ORDER BY 1`,
    [versionId],
  );
  return Object.fromEntries(rows.map((r) => [r.col, r.n]));
}

/**
 * Planned pages of a version without a committed ledger row, ascending, at most `limit` (one pass
 * over the version's plan and ledger, both keyed by (version, page)).
 */
export async function missingLedgerPages(db: Queryable, versionId: string, limit: number): Promise<number[]> {
  const { rows } = await db.query<{ page_no: number }>(
    `SELECT p.page_no FROM plan_page p
     WHERE p.version_id = $1
       AND NOT EXISTS (SELECT 1 FROM page l WHERE l.version_id = p.version_id AND l.page_no = p.page_no
                         AND l.committed_at IS NOT NULL)
     ORDER BY p.page_no LIMIT $2`,
    [versionId, limit],
  );
  return rows.map((r) => r.page_no);
}

/** How many of a version's committed pages one worker committed. */
export interface PagesOfWorker {
  /** The worker's Temporal identity (`<pid>@<host>`). */
  workerIdentity: string;
  /** Committed pages of the version whose ledger row that worker wrote. */
  pages: number;
}

/** Committed pages of `versionId` per worker identity, most pages first (ties by identity). */
export async function committedPagesByWorker(db: Queryable, versionId: string): Promise<PagesOfWorker[]> {
  const r = await db.query<{ worker_identity: string; pages: number }>(
    `SELECT worker_identity, count(*)::int AS pages FROM page
      WHERE version_id = $1 AND committed_at IS NOT NULL
      GROUP BY worker_identity ORDER BY pages DESC, worker_identity`,
    [versionId],
  );
  return r.rows.map((x) => ({ workerIdentity: x.worker_identity, pages: x.pages }));
}
