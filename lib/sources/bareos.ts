import type { Writable } from 'node:stream';
import type { Pool } from 'pg';
import { createPool, withLongSession } from '../db';
import type { Queryable } from '../db';
import type { DstReport, JobSource, KeySpan, PageRange, PageWalkProgress, ReadRow, SourceWatermark } from './types';
import { DST_RULE, ROW_WIDTH_SAMPLE, toBucketStat } from './types';
import type { BucketStat, StatRow } from './types';
import type { DatabaseSourceConfig } from '../config';
import { sourceDatabaseDescription } from '../config';
import { BAREOS_JOB_SELECT as SELECT_JOB, bareosJobSelect } from './bareos-columns';
import {
  expectedFileRecords,
  copyKeyCells,
  copyKeysInRanges,
  keysInRanges,
  rangeKeyCounts,
  refreshCandidates,
  sourceHorizon,
} from './bareos-refresh';
import type { SourceTextMode } from './bareos-columns';
import { openBareosPageRead } from './bareos-page';
import type { FileJobStat, FileRead, FileSchema, FileSource, PageRead, PageReadOptions } from './types';
import type { PageKeys, RefreshCandidates, RefreshSource } from './types';
import type { SourceFileReconciliation } from './types';
import { fileJobStats, fileReconciliation, openBareosFileRead, planFilePages, readFileSchema } from './bareos-files';
import { HASH_PROBE_SQL } from '../fingerprint';
import type { BucketDigestKind, RowHashKind } from '../fingerprint';
import { bareosBucketStatsQuery } from './bareos-buckets';
import type { ZoneCheck } from './bareos-zone';
import { checkNaiveTimes, DST_COUNTS } from './bareos-zone';
import { PAGE_WALK_SQL, WALK_PAGES_PER_STATEMENT } from './bareos-walk';
import { checkDirectorTables } from './bareos-tables';

/** Keys one statement of the page walk reads at most (an index-only scan of about 0.1–1 s). */
export const WALK_ROWS_PER_STATEMENT = 1_000_000;

/** The lowest bigint (decimal text): where the page walk starts. */
const MIN_BIGINT = '-9223372036854775808';

/**
 * A Bareos or Bacula director catalog in PostgreSQL, read through a read-only pool.
 * Naive timestamps are converted to instants in SQL with the source's zone.
 */
export class BareosSource implements JobSource, FileSource, RefreshSource {
  readonly kind: string;
  private readonly pool: Pool;
  private readonly configuredZone?: string;
  private readonly legacyEncoding: string;
  private zone?: Promise<string>;
  private mode?: Promise<SourceTextMode>;
  private schema?: Promise<FileSchema>;
  /** The source's database as errors name it (no credentials). */
  private readonly described: string;

  /**
   * @param name source name from the configuration (used in `application_name`).
   * @param config the source's settings (connection URL stays inside the worker).
   */
  constructor(name: string, config: DatabaseSourceConfig) {
    this.kind = config.kind;
    this.configuredZone = config.timezone;
    this.legacyEncoding = config.legacyEncoding ?? 'LATIN1';
    this.described = sourceDatabaseDescription(name, config.databaseUrl);
    // One connection per concurrent read: the pool bounds this worker's load on the source.
    this.pool = createPool(config.databaseUrl, {
      // Statement errors are named by what read them (`bucket … of source …`); reaching it, here.
      describe: this.described,
      describeOnlyConnectionErrors: true,
      applicationName: `catalog-rebuild:source:${name}:${process.pid}`,
      statementTimeoutMs: config.statementTimeoutMs ?? 60_000,
      readOnly: true,
      max: config.maxConcurrentReads ?? 4,
    });
  }

  /**
   * How the source's text is read: `legacy` (decode text that is not UTF-8 from `legacyEncoding`)
   * for a `SQL_ASCII` database, which stores any bytes; `utf8` for any other, which checks its text.
   */
  textMode(): Promise<SourceTextMode> {
    if (!this.mode) {
      this.mode = this.pool.query<{ enc: string }>(`SELECT current_setting('server_encoding') AS enc`).then((r) => ({
        kind: r.rows[0].enc === 'SQL_ASCII' ? 'legacy' : 'utf8',
        legacyEncoding: this.legacyEncoding,
      }));
      this.mode.catch(() => (this.mode = undefined));
    }
    return this.mode;
  }

  /** The job mapping of this source (text decoded per its text mode); `$1` is the zone. */
  private async select(): Promise<string> {
    const mode = await this.textMode();
    return mode.kind === 'utf8' ? SELECT_JOB : bareosJobSelect(mode);
  }

  async openPageRead(range: PageKeys, options: PageReadOptions): Promise<PageRead> {
    const [zone, mode] = await Promise.all([this.timezone(), this.textMode()]);
    return openBareosPageRead(this.pool, range, {
      zone,
      mode,
      statementTimeoutMs: options.statementTimeoutMs,
      files: options.files,
      fileSchema: (db) => this.fileSchema(db),
    });
  }

  /**
   * The file-record schema, read once (on `db`, default the source's pool: a page read passes its
   * own session, so that it never waits for a second connection of the pool it holds one of).
   */
  fileSchema(db: Queryable = this.pool): Promise<FileSchema> {
    if (!this.schema) {
      this.schema = readFileSchema(db);
      this.schema.catch(() => (this.schema = undefined));
    }
    return this.schema;
  }

  planFilePages(maxKey: string, targetRows: number, onProgress?: (p: PageWalkProgress) => void): Promise<PageRange[]> {
    return planFilePages(this.pool, maxKey, targetRows, onProgress);
  }

  async fileReconciliation(maxKey: string, hash: RowHashKind): Promise<SourceFileReconciliation> {
    const [schema, mode] = await Promise.all([this.fileSchema(), this.textMode()]);
    return fileReconciliation(this.pool, schema, mode, maxKey, hash);
  }

  async fileJobStats(jobIds: string[], hash: RowHashKind): Promise<FileJobStat[]> {
    const [schema, mode] = await Promise.all([this.fileSchema(), this.textMode()]);
    return fileJobStats(this.pool, schema, mode, jobIds, hash);
  }

  async openFileRead(jobIds: string[], statementTimeoutMs: number): Promise<FileRead> {
    const [schema, mode] = await Promise.all([this.fileSchema(), this.textMode()]);
    return openBareosFileRead(this.pool, { schema, mode, statementTimeoutMs }, jobIds);
  }

  timezone(): Promise<string> {
    if (!this.zone) {
      this.zone = this.configuredZone
        ? Promise.resolve(this.configuredZone)
        : this.pool.query<{ tz: string }>(`SELECT current_setting('TimeZone') AS tz`).then((r) => r.rows[0].tz);
      this.zone.catch(() => (this.zone = undefined));
    }
    return this.zone;
  }

  /** The plan's first read: {@link checkDirectorTables} on this source's database. */
  checkCatalogTables(): Promise<void> {
    return checkDirectorTables(this.pool, this.described, this.kind);
  }

  /**
   * Cross-checks the zone in use against the director's own epoch column `JobTDate` on a sample of
   * backups (lib/sources/bareos-zone.ts), before any page.
   * @param source the source's name, for the message.
   * @throws SourceDataInvalidError (non-retryable) when most of the sample contradicts it, naming
   *   the offsets seen and the zones that fit.
   */
  async checkNaiveTimes(source: string, maxKey: string | null): Promise<ZoneCheck> {
    return checkNaiveTimes(this.pool, source, await this.timezone(), maxKey, this.configuredZone !== undefined);
  }

  /**
   * Of `jobIds` (decimal text), those whose file records the director purged (`PurgedFiles` set:
   * file retention, `purge files`), read now in statements of at most 10,000 ids.
   */
  async purgedFileJobs(jobIds: string[]): Promise<Set<string>> {
    const purged = new Set<string>();
    for (let i = 0; i < jobIds.length; i += 10_000) {
      const { rows } = await this.pool.query<{ id: string }>(
        `SELECT jobid::text AS id FROM job WHERE jobid = ANY ($1::bigint[]) AND purgedfiles > 0`,
        [jobIds.slice(i, i + 10_000)],
      );
      for (const r of rows) purged.add(r.id);
    }
    return purged;
  }

  async watermark(): Promise<SourceWatermark> {
    const { rows } = await this.pool.query<{ max_key: string | null; time: string }>(
      `SELECT (SELECT max(jobid) FROM job)::text AS max_key,
              to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS time`,
    );
    return { maxKey: rows[0].max_key, time: rows[0].time };
  }

  /**
   * Keyset walk over the primary key (index-only, {@link PAGE_WALK_SQL}): each statement finds the
   * next pages above the previous page, reading at most `rowsPerStatement` keys (default
   * {@link WALK_ROWS_PER_STATEMENT}) and finding at most {@link WALK_PAGES_PER_STATEMENT} pages, so
   * its time is bounded at any table size and page size.
   */
  async planPages(
    maxKey: string,
    pageSize: number,
    onProgress?: (p: PageWalkProgress) => void,
    rowsPerStatement = WALK_ROWS_PER_STATEMENT,
  ): Promise<PageRange[]> {
    const perStatement = Math.max(1, Math.min(WALK_PAGES_PER_STATEMENT, Math.floor(rowsPerStatement / pageSize)));
    const pages: PageRange[] = [];
    let from = MIN_BIGINT;
    let total = 0;
    for (;;) {
      const { rows } = await this.pool.query<{ first_key: string; last_key: string; n: number }>(PAGE_WALK_SQL, [
        from,
        maxKey,
        pageSize,
        perStatement,
      ]);
      for (const r of rows) {
        pages.push({ firstKey: r.first_key, lastKey: r.last_key, rows: r.n });
        total += r.n;
      }
      if (!rows.length) break;
      const last = rows[rows.length - 1];
      onProgress?.({ pages: pages.length, rows: total, lastKey: last.last_key });
      if (rows.length < perStatement || last.n < pageSize || last.last_key === maxKey) break;
      from = (BigInt(last.last_key) + 1n).toString();
    }
    return pages;
  }

  /**
   * Samples blocks of the table (`TABLESAMPLE SYSTEM`, repeatable, sized from the planner's row
   * estimate) for about {@link ROW_WIDTH_SAMPLE} ids, then reads those rows by primary key (`= ANY
   * (ARRAY(…))`, an index scan: an `IN` subquery would be planned as a scan of the whole table).
   */
  async averageRowBytes(maxKey: string): Promise<number | null> {
    const tz = await this.timezone();
    const estimate = await this.pool.query<{ n: number }>(
      `SELECT greatest(reltuples, 0)::float8 AS n FROM pg_class WHERE oid = 'job'::regclass`,
    );
    const pct = Math.min(100, (100 * 2 * ROW_WIDTH_SAMPLE) / Math.max(1, estimate.rows[0]?.n ?? 0));
    const sample = await this.pool.query<{ avg: number | null }>(
      `SELECT avg(octet_length(r::text))::float8 AS avg FROM (
         ${SELECT_JOB} WHERE j.jobid = ANY (ARRAY(
           SELECT jobid FROM job TABLESAMPLE SYSTEM ($3) REPEATABLE (0) WHERE jobid <= $2::bigint LIMIT $4))) r`,
      [tz, maxKey, pct, ROW_WIDTH_SAMPLE],
    );
    if (sample.rows[0].avg !== null) return sample.rows[0].avg;
    // The sampled blocks held no row at or below the watermark: the first rows instead.
    const first = await this.pool.query<{ avg: number | null }>(
      `SELECT avg(octet_length(r::text))::float8 AS avg FROM (
         ${SELECT_JOB} WHERE j.jobid = ANY (ARRAY(SELECT jobid FROM job WHERE jobid <= $2::bigint ORDER BY jobid LIMIT $3))) r`,
      [tz, maxKey, ROW_WIDTH_SAMPLE],
    );
    return first.rows[0].avg;
  }

  /** Counts along the primary key in statements of at most {@link WALK_ROWS_PER_STATEMENT} keys. */
  async countRowsUpTo(maxKey: string, limit: number): Promise<number> {
    let from = MIN_BIGINT;
    let counted = 0;
    while (counted < limit) {
      const chunk = Math.min(WALK_ROWS_PER_STATEMENT, limit - counted);
      const { rows } = await this.pool.query<{ n: number; last: string | null }>(
        `SELECT count(*)::int AS n, max(jobid)::text AS last FROM (
           SELECT jobid FROM job WHERE jobid >= $1::bigint AND jobid <= $2::bigint ORDER BY jobid LIMIT $3) s`,
        [from, maxKey, chunk],
      );
      counted += rows[0].n;
      if (rows[0].n < chunk || rows[0].last === null || rows[0].last === maxKey) break;
      from = (BigInt(rows[0].last) + 1n).toString();
    }
    return counted;
  }

  async readRange(firstKey: string, lastKey: string): Promise<ReadRow[]> {
    const [tz, select] = await Promise.all([this.timezone(), this.select()]);
    const { rows } = await this.pool.query<ReadRow>(
      `${select} WHERE j.jobid BETWEEN $2::bigint AND $3::bigint ORDER BY j.jobid`,
      [tz, firstKey, lastKey],
    );
    return rows;
  }

  async readKeys(keys: string[]): Promise<ReadRow[]> {
    if (!keys.length) return [];
    const [tz, select] = await Promise.all([this.timezone(), this.select()]);
    const { rows } = await this.pool.query<ReadRow>(`${select} WHERE j.jobid = ANY($2::bigint[]) ORDER BY j.jobid`, [
      tz,
      keys,
    ]);
    return rows;
  }

  async readBucket(bucket: string | null, maxKey: string): Promise<ReadRow[]> {
    const [tz, select] = await Promise.all([this.timezone(), this.select()]);
    const cond = bucket === null ? 'j.starttime IS NULL' : 'j.starttime >= $3::date AND j.starttime < $3::date + 1';
    const params: unknown[] = [tz, maxKey];
    if (bucket !== null) params.push(bucket);
    const { rows } = await this.pool.query<ReadRow>(
      `${select} WHERE j.jobid <= $2::bigint AND ${cond} ORDER BY j.jobid`,
      params,
    );
    return rows;
  }

  async existingJobIds(jobIds: string[], maxKey: string): Promise<Set<string>> {
    if (!jobIds.length) return new Set();
    const { rows } = await this.pool.query<{ id: string }>(
      `SELECT jobid::text AS id FROM job WHERE jobid = ANY($1::bigint[]) AND jobid <= $2::bigint`,
      [jobIds, maxKey],
    );
    return new Set(rows.map((r) => r.id));
  }

  async hashProbe(): Promise<string> {
    const { rows } = await this.pool.query<{ h: string }>(HASH_PROBE_SQL);
    return rows[0].h;
  }

  horizon(): Promise<string> {
    return sourceHorizon(this.pool);
  }

  async candidates(maxKey: string, since: string): Promise<RefreshCandidates | null> {
    const [tz, mode] = await Promise.all([this.timezone(), this.textMode()]);
    return refreshCandidates(this.pool, { tz, mode }, maxKey, since);
  }

  rangeKeyCounts(maxKey: string, firstKeys: string[]): Promise<Map<number, number>> {
    return rangeKeyCounts(this.pool, maxKey, firstKeys);
  }

  keysInRanges(maxKey: string, ranges: { firstKey: string; lastKey: string }[]): Promise<string[]> {
    return keysInRanges(this.pool, maxKey, ranges);
  }

  copyKeyCells(maxKey: string, width: number, into: Writable): Promise<void> {
    return copyKeyCells(this.pool, maxKey, width, into);
  }

  copyKeysInRanges(maxKey: string, ranges: { firstKey: string; lastKey: string }[], into: Writable): Promise<void> {
    return copyKeysInRanges(this.pool, maxKey, ranges, into);
  }

  fileRecordsOf(keys: string[]): Promise<number> {
    return keys.length ? expectedFileRecords(this.pool, keys) : Promise.resolve(0);
  }

  fileRecordsUpTo(maxKey: string): Promise<number> {
    return expectedFileRecords(this.pool, null, maxKey);
  }

  async bucketStats(maxKey: string, digest: BucketDigestKind = 'md5'): Promise<BucketStat[]> {
    const [tz, mode] = await Promise.all([this.timezone(), this.textMode()]);
    const { rows } = await withLongSession(this.pool, (c) =>
      c.query<StatRow>(bareosBucketStatsQuery(mode, digest, tz, maxKey)),
    );
    return rows.map(toBucketStat);
  }

  async readBucketInSpan(bucket: string | null, maxKey: string, span: KeySpan): Promise<ReadRow[]> {
    const [tz, select] = await Promise.all([this.timezone(), this.select()]);
    const cond = bucket === null ? 'j.starttime IS NULL' : 'j.starttime >= $5::date AND j.starttime < $5::date + 1';
    const params: unknown[] = [tz, maxKey, span.min, span.max];
    if (bucket !== null) params.push(bucket);
    const { rows } = await withLongSession(this.pool, (c) =>
      c.query<ReadRow>(
        `${select} WHERE j.jobid BETWEEN $3::bigint AND least($4::bigint, $2::bigint) AND ${cond} ORDER BY j.jobid`,
        params,
      ),
    );
    return rows;
  }

  async dstReport(maxKey: string): Promise<DstReport> {
    const tz = await this.timezone();
    // Only days on which the zone's offset changes can hold such times: the per-row test runs on
    // those alone (a cheap date filter for the rest), on a session without statement timeout.
    const { rows } = await withLongSession(this.pool, (c) =>
      c.query<{ nonexistent: number; ambiguous: number }>(
        `WITH span AS (SELECT min(starttime)::date AS lo, max(starttime)::date AS hi FROM job
                       WHERE jobid <= $2::bigint AND starttime > '0001-01-02' AND starttime < '9999-12-30'),
              days AS (SELECT array_agg(d::date) AS d FROM span, generate_series(span.lo - 1, span.hi + 1, interval '1 day') AS d
                       WHERE ((d + interval '1 day')::timestamp AT TIME ZONE $1) - (d::timestamp AT TIME ZONE $1) <> interval '24 hours')
         SELECT ${DST_COUNTS('s', '$1')} FROM (
           SELECT starttime AS s FROM job, days
           WHERE jobid <= $2::bigint AND starttime IS NOT NULL AND starttime::date = ANY (days.d)) j`,
        [tz, maxKey],
      ),
    );
    return { zone: tz, nonexistent: rows[0].nonexistent, ambiguous: rows[0].ambiguous, rule: DST_RULE };
  }

  async deltaCount(maxKey: string | null): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>(
      `SELECT count(*)::text AS n FROM job WHERE $1::bigint IS NULL OR jobid > $1::bigint`,
      [maxKey],
    );
    return Number(rows[0].n);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
