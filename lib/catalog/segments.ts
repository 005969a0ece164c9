/**
 * Versions that share rows (migration 014): a version is made of segments, the tables `job_v<s>` /
 * `file_v<s>` of itself and of the versions it was refreshed from (`version.segment_ids`); a row of a
 * segment belongs to version v while its `superseded_by` is NULL or above v. A full rebuild's
 * version is its own one segment. A refresh supersedes the rows it replaces or deletes in its page
 * transactions; an abandoned or failed refresh releases them; a segment's table is dropped with
 * the last version that uses it. Each statement names its tables (`job_v<s>`), so it touches only
 * the segments of one version. Identifiers are escaped with pg-format's %I.
 */
import format from 'pg-format';
import type { Queryable } from '../db';
import { filePartitionName } from './files';
import { partitionName } from './partitions';

/** Whether the table `name` exists (a segment's file table exists only for rebuilds with files). */
async function tableExists(db: Queryable, name: string): Promise<boolean> {
  const r = await db.query(`SELECT 1 FROM pg_class WHERE relname = $1 AND relkind = 'r'`, [name]);
  return !!r.rowCount;
}

/**
 * Makes `versionId` a version of its own segment (the insert trigger of migration 014 does that
 * already) plus, for a refresh, every segment of `baseVersionId`. Idempotent.
 */
export async function insertVersionSegments(
  db: Queryable,
  versionId: string,
  baseVersionId: string | null,
): Promise<void> {
  await db.query(
    `UPDATE version v SET segment_ids = ARRAY(
       SELECT DISTINCT x FROM unnest(ARRAY[v.version_id]
         || coalesce((SELECT b.segment_ids FROM version b WHERE b.version_id = $2::bigint), '{}')) x ORDER BY x)
     WHERE v.version_id = $1`,
    [versionId, baseVersionId],
  );
}

/** The segments of a version (decimal text, ascending: its own last for a refresh); none once dropped. */
export async function versionSegments(db: Queryable, versionId: string): Promise<string[]> {
  const { rows } = await db.query<{ s: string }>(
    `SELECT x::text AS s FROM version, unnest(segment_ids) x WHERE version_id = $1 ORDER BY x`,
    [versionId],
  );
  return rows.map((r) => r.s);
}

/**
 * The job rows refresh `versionId` changed, as one SQL query (a UNION ALL, no parameters): its own
 * table's rows with `sign` 1, and each older segment's rows it superseded (found by their
 * `superseded_by` index) with `sign` -1. `columns` is the select list over a segment's job columns
 * and `sign`; `where`, a condition on them. Group the result to get a refresh's figures from its
 * base's in O(changes): jobs per bucket, per key cell, per key range.
 */
export async function refreshChangesSql(
  db: Queryable,
  versionId: string,
  columns: string,
  where = 'true',
): Promise<string> {
  return (await versionSegments(db, versionId))
    .map((s) =>
      s === versionId
        ? format(`SELECT %s FROM (SELECT *, 1 AS sign FROM %I) t WHERE %s`, columns, partitionName(s), where)
        : format(
            `SELECT %s FROM (SELECT *, -1 AS sign FROM %I WHERE superseded_by = %L) t WHERE %s`,
            columns,
            partitionName(s),
            versionId,
            where,
          ),
    )
    .join(' UNION ALL ');
}

/**
 * In the transaction of `db`: the rows of `keys` (job keys, decimal text) that belong to version
 * `baseVersionId` leave the versions from `versionId` on (`superseded_by`), in every segment of the
 * base; with `o.files`, their file records too, found by job id (the segments' `(job_id, file_id)`
 * indexes): the ids of the job rows superseded (a listing's snapshot ids), and with
 * `o.keysAreJobIds` the keys themselves (a director's job id is its key: also a job the base
 * quarantined but kept the files of). Uses the segments' `job_key` indexes (built at seal).
 * @returns the job rows superseded.
 */
export async function supersedeRows(
  db: Queryable,
  versionId: string,
  baseVersionId: string,
  keys: string[],
  o: { files: boolean; keysAreJobIds: boolean },
): Promise<number> {
  if (!keys.length) return 0;
  const segments = await versionSegments(db, baseVersionId);
  const jobIds = new Set(o.keysAreJobIds ? keys : []);
  let jobs = 0;
  for (const s of segments) {
    const r = await db.query<{ job_id: string }>(
      format(
        `UPDATE %I SET superseded_by = $1 WHERE job_key = ANY ($2::bigint[])
           AND (superseded_by IS NULL OR superseded_by > $3) RETURNING job_id`,
        partitionName(s),
      ),
      [versionId, keys, baseVersionId],
    );
    jobs += r.rowCount ?? 0;
    for (const row of r.rows) jobIds.add(row.job_id);
  }
  if (o.files && jobIds.size)
    for (const s of segments)
      if (await tableExists(db, filePartitionName(s)))
        await db.query(
          format(
            `UPDATE %I SET superseded_by = $1 WHERE job_id = ANY ($2::text[])
               AND (superseded_by IS NULL OR superseded_by > $3)`,
            filePartitionName(s),
          ),
          [versionId, [...jobIds], baseVersionId],
        );
  return jobs;
}

/**
 * The rows a version superseded belong to the versions before it again (an abandoned or failed
 * refresh): `superseded_by = versionId` becomes NULL in every other segment of the version.
 * @returns the job rows released.
 */
export async function releaseSuperseded(db: Queryable, versionId: string, files: boolean): Promise<number> {
  let jobs = 0;
  for (const s of await versionSegments(db, versionId)) {
    if (s === versionId) continue;
    const r = await db.query(format('UPDATE %I SET superseded_by = NULL WHERE superseded_by = $1', partitionName(s)), [
      versionId,
    ]);
    jobs += r.rowCount ?? 0;
    if (files && (await tableExists(db, filePartitionName(s))))
      await db.query(format('UPDATE %I SET superseded_by = NULL WHERE superseded_by = $1', filePartitionName(s)), [
        versionId,
      ]);
  }
  return jobs;
}

/**
 * Forgets a dropped version's segments (its `segment_ids` become empty). @returns the segments no
 * version uses any longer (their tables can be dropped), decimal text.
 */
export async function forgetVersionSegments(db: Queryable, versionId: string): Promise<string[]> {
  const gone = await versionSegments(db, versionId);
  await db.query(`UPDATE version SET segment_ids = '{}' WHERE version_id = $1`, [versionId]);
  if (!gone.length) return [];
  const { rows } = await db.query<{ s: string }>(
    `SELECT DISTINCT x::text AS s FROM version, unnest(segment_ids) x WHERE segment_ids && $1::bigint[]`,
    [gone],
  );
  const used = new Set(rows.map((r) => r.s));
  return gone.filter((g) => !used.has(g));
}

/**
 * Deletes, from segment `segmentId`, the rows no version that uses it still sees (superseded at or
 * below the oldest of those versions): what dropped versions alone needed.
 * @returns job rows deleted.
 */
export async function deleteUnreachableRows(db: Queryable, segmentId: string, files: boolean): Promise<number> {
  const { rows } = await db.query<{ m: string | null }>(
    `SELECT min(version_id)::text AS m FROM version WHERE segment_ids @> ARRAY[$1::bigint]`,
    [segmentId],
  );
  const oldest = rows[0]?.m;
  if (!oldest) return 0;
  if (!(await tableExists(db, partitionName(segmentId)))) return 0;
  const r = await db.query(format('DELETE FROM %I WHERE superseded_by <= $1', partitionName(segmentId)), [oldest]);
  if (files && (await tableExists(db, filePartitionName(segmentId))))
    await db.query(format('DELETE FROM %I WHERE superseded_by <= $1', filePartitionName(segmentId)), [oldest]);
  return r.rowCount ?? 0;
}

/**
 * Stores the jobs per dated bucket of a full rebuild's version (one scan of its table; run it on a
 * session without statement timeout). Idempotent.
 */
export async function storeBucketCounts(db: Queryable, versionId: string): Promise<void> {
  await db.query(`DELETE FROM version_bucket WHERE version_id = $1`, [versionId]);
  await db.query(
    format(
      `INSERT INTO version_bucket (version_id, bucket, jobs)
       SELECT $1, bucket, count(*) FROM %I WHERE bucket IS NOT NULL GROUP BY bucket`,
      partitionName(versionId),
    ),
    [versionId],
  );
}

/**
 * Stores the jobs per dated bucket of refresh `versionId`: its base's, less the rows it superseded
 * (found by the `superseded_by` index of each segment), plus its own rows. O(changes). Idempotent.
 */
export async function storeRefreshBucketCounts(db: Queryable, versionId: string, baseVersionId: string): Promise<void> {
  const changes = await refreshChangesSql(db, versionId, 'bucket AS b, sign AS n', 'bucket IS NOT NULL');
  await db.query(`DELETE FROM version_bucket WHERE version_id = $1`, [versionId]);
  await db.query(
    `INSERT INTO version_bucket (version_id, bucket, jobs)
     SELECT $1, coalesce(b.bucket, d.b), coalesce(b.jobs, 0) + coalesce(d.n, 0)
     FROM (SELECT bucket, jobs FROM version_bucket WHERE version_id = $2) b
     FULL JOIN (SELECT b, sum(n) AS n FROM (${changes}) c GROUP BY b) d ON d.b = b.bucket
     WHERE coalesce(b.jobs, 0) + coalesce(d.n, 0) > 0`,
    [versionId, baseVersionId],
  );
}

/** The stored jobs per dated bucket of a version, by bucket; null when none were stored. */
export async function storedBucketJobCounts(
  db: Queryable,
  versionId: string,
): Promise<{ bucket: string; jobs: string }[] | null> {
  const stored = await db.query(`SELECT 1 FROM version_range WHERE version_id = $1 LIMIT 1`, [versionId]);
  const { rows } = await db.query<{ bucket: string; jobs: string }>(
    `SELECT bucket::text, jobs::text FROM version_bucket WHERE version_id = $1 ORDER BY bucket`,
    [versionId],
  );
  return rows.length || stored.rowCount ? rows : null;
}

/**
 * The jobs whose file records a refresh replaced with fewer (jobs it wrote again; not the ones it
 * deleted), with their counts before (in the base's segments, superseded by it) and after (its own
 * table and its quarantined file records), by job id. O(changes).
 */
export async function refreshShrunkJobFiles(
  db: Queryable,
  versionId: string,
): Promise<{ jobId: string; before: number; after: number }[]> {
  const before = new Map<string, number>();
  for (const s of await versionSegments(db, versionId)) {
    if (s === versionId || !(await tableExists(db, filePartitionName(s)))) continue;
    const { rows } = await db.query<{ j: string; n: string }>(
      format(
        `SELECT job_id AS j, count(*)::text AS n FROM %I WHERE superseded_by = $1 GROUP BY job_id`,
        filePartitionName(s),
      ),
      [versionId],
    );
    for (const r of rows) before.set(r.j, (before.get(r.j) ?? 0) + Number(r.n));
  }
  if (!before.size) return [];
  const { rows } = await db.query<{ j: string; n: string }>(
    format(
      `SELECT j.job_id AS j, (SELECT count(*) FROM %I f WHERE f.job_id = j.job_id)
              + (SELECT count(*) FROM reject r WHERE r.version_id = $1 AND r.record_key IS NOT NULL AND r.job_id = j.job_id) AS n
       FROM %I j WHERE j.job_id = ANY ($2::text[])`,
      filePartitionName(versionId),
      partitionName(versionId),
    ),
    [versionId, [...before.keys()]],
  );
  return rows
    .map((r) => ({ jobId: r.j, before: before.get(r.j) ?? 0, after: Number(r.n) }))
    .filter((x) => x.after < x.before)
    .sort((a, b) => a.jobId.length - b.jobId.length || (a.jobId < b.jobId ? -1 : a.jobId > b.jobId ? 1 : 0));
}
