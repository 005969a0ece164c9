import type { Pool } from 'pg';
import { createPool, withLongSession } from '../db';
import type { DstReport, JobSource, KeySpan, ReadRow, SourceWatermark } from './types';
import { DST_RULE, toBucketStat } from './types';
import type { BucketStat, StatRow } from './types';
import type { DatabaseSourceConfig } from '../config';
import { BAREOS_JOB_SELECT as SELECT_JOB } from './bareos-columns';
import { BAREOS_FINGERPRINT_ROW as SOURCE_FINGERPRINT_ROW, bucketDigestSql } from '../fingerprint';

/**
 * SELECT list counting naive timestamps `col` that do not exist in zone `tz` (the round trip
 * through the zone changes them) and that are ambiguous (another instant 30 or 60 minutes away has
 * the same wall-clock time): `nonexistent`, `ambiguous` (int).
 */
export const DST_COUNTS = (col: string, tz: string): string => {
  const at = `(${col} AT TIME ZONE ${tz})`;
  const same = (shift: string) => `(${at} ${shift}) AT TIME ZONE ${tz} = ${col}`;
  return `count(*) FILTER (WHERE ${at} AT TIME ZONE ${tz} <> ${col})::int AS nonexistent,
          count(*) FILTER (WHERE ${at} AT TIME ZONE ${tz} = ${col} AND (${same("- interval '1 hour'")} OR ${same("+ interval '1 hour'")}
                           OR ${same("- interval '30 minutes'")} OR ${same("+ interval '30 minutes'")}))::int AS ambiguous`;
};

/**
 * A Bareos or Bacula director catalog in PostgreSQL, read through a read-only pool.
 * Naive timestamps are converted to instants in SQL with the source's zone.
 */
export class BareosSource implements JobSource {
  readonly kind: string;
  private readonly pool: Pool;
  private readonly configuredZone?: string;
  private zone?: Promise<string>;

  /**
   * @param name source name from the configuration (used in `application_name`).
   * @param config the source's settings (connection URL stays inside the worker).
   */
  constructor(name: string, config: DatabaseSourceConfig) {
    this.kind = config.kind;
    this.configuredZone = config.timezone;
    this.pool = createPool(config.databaseUrl, {
      applicationName: `catalog-rebuild:source:${name}:${process.pid}`,
      statementTimeoutMs: config.statementTimeoutMs ?? 60_000,
      readOnly: true,
      max: 8,
    });
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

  async watermark(): Promise<SourceWatermark> {
    const { rows } = await this.pool.query<{ max_key: string | null; rows: string; time: string }>(
      `SELECT max(jobid)::text AS max_key, count(*)::text AS rows,
              to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS time
       FROM job`,
    );
    return { maxKey: rows[0].max_key, rows: rows[0].rows, time: rows[0].time };
  }

  async pageFirstKeys(maxKey: string, pageSize: number): Promise<string[]> {
    const { rows } = await this.pool.query<{ k: string }>(
      `SELECT jobid::text AS k FROM (
         SELECT jobid, row_number() OVER (ORDER BY jobid) AS rn FROM job WHERE jobid <= $1::bigint
       ) s WHERE (rn - 1) % $2 = 0 ORDER BY jobid`,
      [maxKey, pageSize],
    );
    return rows.map((r) => r.k);
  }

  async readRange(firstKey: string, lastKey: string): Promise<ReadRow[]> {
    const tz = await this.timezone();
    const { rows } = await this.pool.query<ReadRow>(
      `${SELECT_JOB} WHERE j.jobid BETWEEN $2::bigint AND $3::bigint ORDER BY j.jobid`,
      [tz, firstKey, lastKey],
    );
    return rows;
  }

  async readKeys(keys: string[]): Promise<ReadRow[]> {
    if (!keys.length) return [];
    const tz = await this.timezone();
    const { rows } = await this.pool.query<ReadRow>(
      `${SELECT_JOB} WHERE j.jobid = ANY($2::bigint[]) ORDER BY j.jobid`,
      [tz, keys],
    );
    return rows;
  }

  async readBucket(bucket: string | null, maxKey: string): Promise<ReadRow[]> {
    const tz = await this.timezone();
    const cond = bucket === null ? 'j.starttime IS NULL' : 'j.starttime >= $3::date AND j.starttime < $3::date + 1';
    const params: unknown[] = [tz, maxKey];
    if (bucket !== null) params.push(bucket);
    const { rows } = await this.pool.query<ReadRow>(
      `${SELECT_JOB} WHERE j.jobid <= $2::bigint AND ${cond} ORDER BY j.jobid`,
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

  async bucketStats(maxKey: string): Promise<BucketStat[]> {
    const tz = await this.timezone();
    const { rows } = await withLongSession(this.pool, (c) =>
      c.query<StatRow>(
        `SELECT j.starttime::date::text AS bucket, count(*)::text AS count,
                ${bucketDigestSql(SOURCE_FINGERPRINT_ROW)} AS fingerprint,
                coalesce(sum(j.jobbytes), 0)::text AS bytes, min(j.jobid)::text AS min_key, max(j.jobid)::text AS max_key
         FROM job j WHERE j.jobid <= $2::bigint
         GROUP BY 1 ORDER BY 1 NULLS FIRST`,
        [tz, maxKey],
      ),
    );
    return rows.map(toBucketStat);
  }

  async readBucketInSpan(bucket: string | null, maxKey: string, span: KeySpan): Promise<ReadRow[]> {
    const tz = await this.timezone();
    const cond = bucket === null ? 'j.starttime IS NULL' : 'j.starttime >= $5::date AND j.starttime < $5::date + 1';
    const params: unknown[] = [tz, maxKey, span.min, span.max];
    if (bucket !== null) params.push(bucket);
    const { rows } = await withLongSession(this.pool, (c) =>
      c.query<ReadRow>(
        `${SELECT_JOB} WHERE j.jobid BETWEEN $3::bigint AND least($4::bigint, $2::bigint) AND ${cond} ORDER BY j.jobid`,
        params,
      ),
    );
    return rows;
  }

  async dstReport(maxKey: string): Promise<DstReport> {
    const tz = await this.timezone();
    const { rows } = await this.pool.query<{ nonexistent: number; ambiguous: number }>(
      `SELECT ${DST_COUNTS('s', '$1')} FROM (SELECT starttime AS s FROM job WHERE jobid <= $2::bigint AND starttime IS NOT NULL) j`,
      [tz, maxKey],
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
