/**
 * File and command sources (restic, borg listings): read once by planRebuild, staged into the
 * catalog database (`staged_record`, one listing per version), then paged from there by every
 * worker, so all of them see the same snapshot. Times are converted in SQL: offset times as
 * instants, naive ones in the source's zone; never through Node's local zone.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import * as fs from 'node:fs/promises';
import { finished } from 'node:stream/promises';
import type { Pool, PoolClient } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import format from 'pg-format';
import type { FileSourceConfig } from '../config';
import { NotPublishableError, SourceDataInvalidError } from '../errors';
import { copyValue } from '../text-form';
import { DST_COUNTS } from './bareos-zone';
import { bucketDigestSql, digestOfSumSql, STAGED_FINGERPRINT_ROW as STAGED_FINGERPRINT } from '../fingerprint';
import type { BucketDigestKind, RowHashKind } from '../fingerprint';
import { withLongSession } from '../db';
import { STAGED_COPY_COLUMNS } from './listing';
import type { ListingForStaging } from './listing-thread';
import { parseListingInThread } from './listing-thread';
import { spawnInGroup } from './process-group';
import type { StagedPageSettings } from './staged-page';
import { openStagedPageRead } from './staged-page';
import { NOT_GONE, STAGED_ROW_HASH, stagedSelect } from './staged-select';
import type {
  BucketStat,
  DstReport,
  JobSource,
  KeySpan,
  PageKeys,
  RangeKeySource,
  PageRange,
  PageRead,
  PageReadOptions,
  ReadRow,
  SourceWatermark,
  StatRow,
} from './types';
import { DST_RULE, ROW_WIDTH_SAMPLE, toBucketStat } from './types';

/** Largest listing read from a command's standard output (bytes). */
const MAX_LISTING_BYTES = 1 << 30;

/**
 * Reads a file source's listing: the file, or the standard output of its command (argv, no shell).
 * @throws SourceDataInvalidError naming the source when the file cannot be read or the command fails
 *   (the command's arguments are not echoed: they may hold secrets).
 */
export async function readListingBytes(name: string, config: FileSourceConfig): Promise<Buffer> {
  if (config.path) {
    try {
      return await fs.readFile(config.path);
    } catch (err) {
      throw new SourceDataInvalidError(
        `source ${name}: cannot read the listing file ${config.path}: ${(err as Error).message}`,
      );
    }
  }
  return runListingCommand(name, config.command!, config.commandTimeoutMs ?? 90_000);
}

/**
 * Runs a listing command (argv, no shell) in its own process group and returns its standard
 * output. On timeout the whole group is killed with SIGKILL (a command ignoring SIGTERM, or a
 * grandchild, cannot outlive it); when the command exits, processes it left behind in its group are
 * killed too.
 * @throws SourceDataInvalidError naming the source and the program (its arguments are not echoed:
 *   they may hold secrets) when it cannot start, fails, times out or prints more than 1 GiB.
 */
function runListingCommand(name: string, argv: string[], timeoutMs: number): Promise<Buffer> {
  const cmd = argv[0];
  return new Promise((resolve, reject) => {
    const { child, killGroup } = spawnInGroup(argv);
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let failure: string | null = null;
    const timer = setTimeout(() => {
      failure = `timed out after ${timeoutMs} ms`;
      killGroup();
    }, timeoutMs);
    child.stdout.on('data', (d: Buffer) => {
      outBytes += d.length;
      if (outBytes > MAX_LISTING_BYTES) {
        failure ??= `printed more than ${MAX_LISTING_BYTES} bytes`;
        killGroup();
      } else out.push(d);
    });
    child.stderr.on('data', (d: Buffer) => {
      if (err.length < 64_000) err += d.toString('utf8');
    });
    child.once('exit', () => killGroup()); // nothing of the command outlives it
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new SourceDataInvalidError(`source ${name}: listing command ${cmd} cannot be run: ${e.message}`));
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const why =
        failure ?? (code !== 0 ? (code === null ? `was killed by ${signal}` : `exited with status ${code}`) : null);
      if (!why) return resolve(Buffer.concat(out));
      const tail = err.trim().split('\n').slice(-3).join(' | ').slice(0, 500);
      reject(new SourceDataInvalidError(`source ${name}: listing command ${cmd} ${why}${tail ? `: ${tail}` : ''}`));
    });
  });
}

/**
 * Reads a file source's listing and parses it in a worker thread (the event loop keeps heartbeating).
 * Strings that are not UTF-8 are decoded from the source's `legacyEncoding` (default LATIN1), counted
 * in `decoded`; the sha256 is over the bytes as read.
 */
export async function readListing(name: string, config: FileSourceConfig, withIds = false): Promise<ListingForStaging> {
  return parseListing(name, config, await readListingBytes(name, config), withIds);
}

/** Parses listing `bytes` of source `name` in a worker thread (see {@link readListing}). */
function parseListing(name: string, config: FileSourceConfig, bytes: Buffer, withIds: boolean) {
  return parseListingInThread(
    config.kind,
    bytes,
    { source: name, client: config.client ?? null, legacyEncoding: config.legacyEncoding ?? 'LATIN1' },
    withIds,
  );
}

/**
 * COPYs a parsed listing, in 1 MiB chunks that wait for the server (backpressure), into the
 * transaction-local table `pg_temp.staged_listing` (dropped at commit) under its job keys (`keys[i]`
 * for the record at position i + 1: the source's stable keys, lib/catalog/listing-keys.ts), for
 * version `versionId` (`'0'`: none yet, a refresh's change detection compares it). Must run inside
 * a transaction.
 * @param keys job keys (decimal text) aligned with the listing's records.
 * @throws Error when the keys and the records do not align; the catalog's errors.
 */
export async function copyListingToTemp(
  c: PoolClient,
  versionId: string,
  listing: ListingForStaging,
  keys: string[],
): Promise<void> {
  if (keys.length !== listing.records)
    throw new Error(`${keys.length} job keys for ${listing.records} listing records`);
  await c.query(`SELECT set_config('catalog_rebuild.staging_version', $1, true)`, [versionId]);
  await c.query(`CREATE TEMP TABLE staged_listing (LIKE staged_record INCLUDING DEFAULTS) ON COMMIT DROP`);
  if (!listing.records) return;
  const stream = c.query(copyFrom(`COPY pg_temp.staged_listing (${STAGED_COPY_COLUMNS.join(', ')}) FROM STDIN`));
  const done = finished(stream);
  done.catch(() => undefined);
  const text = listing.copyText;
  const CHUNK = 1 << 20;
  for (let at = 0; at < text.length; at += CHUNK) {
    if (!stream.write(Buffer.from(text.buffer, text.byteOffset + at, Math.min(CHUNK, text.length - at)))) {
      await Promise.race([once(stream, 'drain'), done]);
    }
  }
  stream.end();
  await done;
  // The COPY numbers the records by position: each takes its job key.
  await c.query(
    `UPDATE pg_temp.staged_listing s SET seq = k.key
     FROM unnest($1::bigint[]) WITH ORDINALITY AS k(key, pos) WHERE k.pos = s.seq`,
    [keys],
  );
}

/**
 * Stages a parsed listing for a version: {@link copyListingToTemp}, then the records move to
 * `staged_record`. Must run inside the plan transaction: the version id reaches the rows through the
 * transaction-local setting `catalog_rebuild.staging_version` (the column's default).
 * @param keys job keys (decimal text) aligned with the listing's records.
 */
export async function stageListing(
  c: PoolClient,
  versionId: string,
  listing: ListingForStaging,
  keys: string[],
): Promise<void> {
  if (!listing.records) return;
  await copyListingToTemp(c, versionId, listing, keys);
  await c.query(`INSERT INTO staged_record SELECT * FROM pg_temp.staged_listing`);
  await c.query('DROP TABLE pg_temp.staged_listing');
}

const FMT = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;

/** {@link stagedSelect} with the zone as `$1` and the version as `$2`. */
const SELECT_STAGED = stagedSelect('$1', '$2');

/**
 * A staged listing (one version's snapshot of a file source), read from the catalog database.
 * Paging key = the source's stable job key of the record (lib/catalog/listing-keys.ts). Every read of records (pages, reconciliation, repair)
 * leaves out the jobs a page found gone from the source after the plan; the watermark, the plan's
 * counts and the delta are the listing's as staged.
 */
export class StagedSource implements JobSource, RangeKeySource {
  readonly kind: string;

  /**
   * @param pool the catalog database (where the listing is staged).
   * @param versionId the version whose snapshot is read.
   */
  constructor(
    private readonly name: string,
    private readonly config: FileSourceConfig,
    private readonly pool: Pool,
    private readonly versionId: string,
  ) {
    this.kind = config.kind;
  }

  async timezone(): Promise<string> {
    return this.config.timezone ?? 'UTC';
  }

  async watermark(): Promise<SourceWatermark> {
    const { rows } = await this.pool.query<{ max_key: string | null; time: string }>(
      `SELECT max(seq)::text AS max_key, to_char(now() AT TIME ZONE 'UTC', ${FMT}) AS time
       FROM staged_record WHERE version_id = $1`,
      [this.versionId],
    );
    return { maxKey: rows[0].max_key, time: rows[0].time };
  }

  /** Pages of `pageSize` staged records in key order (keys are the source's stable job keys, with gaps). */
  async planPages(maxKey: string, pageSize: number): Promise<PageRange[]> {
    const { rows } = await this.pool.query<{ first_key: string; last_key: string; n: number }>(
      `SELECT min(seq)::text AS first_key, max(seq)::text AS last_key, count(*)::int AS n
       FROM (SELECT seq, (row_number() OVER (ORDER BY seq) - 1) / $3 AS p
             FROM staged_record WHERE version_id = $1 AND seq <= $2::bigint) s
       GROUP BY p ORDER BY p`,
      [this.versionId, maxKey, pageSize],
    );
    return rows.map((r) => ({ firstKey: r.first_key, lastKey: r.last_key, rows: r.n }));
  }

  async averageRowBytes(maxKey: string): Promise<number | null> {
    const tz = await this.timezone();
    const { rows } = await this.pool.query<{ avg: number | null }>(
      `SELECT avg(octet_length(x::text))::float8 AS avg FROM (${SELECT_STAGED} AND s.seq <= $3::bigint
         ORDER BY s.seq LIMIT $4) x`,
      [tz, this.versionId, maxKey, ROW_WIDTH_SAMPLE],
    );
    return rows[0].avg;
  }

  async countRowsUpTo(maxKey: string, limit: number): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM staged_record WHERE version_id = $1 AND seq <= $2::bigint LIMIT $3) s`,
      [this.versionId, maxKey, limit],
    );
    return rows[0].n;
  }

  private async select(where: string, params: unknown[]): Promise<ReadRow[]> {
    const tz = await this.timezone();
    const { rows } = await this.pool.query<ReadRow & { seq?: string }>(
      `SELECT * FROM (${SELECT_STAGED}) x WHERE ${where} ORDER BY x.seq`,
      [tz, this.versionId, ...params],
    );
    for (const r of rows) delete r.seq;
    return rows;
  }

  /**
   * The page's read out of the staged listing (staged-page.ts).
   * @throws NotPublishableError when asked for file records: this listing has no `filesCommand`.
   */
  async openPageRead(range: PageKeys, options: PageReadOptions): Promise<PageRead> {
    if (options.files) throw new NotPublishableError(`source ${this.name} (${this.kind}) has no file records to page`);
    return openStagedPageRead(this.pool, range, await this.pageSettings(options));
  }

  /** What a page read of this listing needs, without file records. */
  protected async pageSettings(options: PageReadOptions): Promise<StagedPageSettings> {
    return { versionId: this.versionId, zone: await this.timezone(), statementTimeoutMs: options.statementTimeoutMs };
  }

  readKeys(keys: string[]): Promise<ReadRow[]> {
    if (!keys.length) return Promise.resolve([]);
    return this.select('x.seq = ANY($3::bigint[])', [keys]);
  }

  readBucket(bucket: string | null, maxKey: string): Promise<ReadRow[]> {
    return this.select('x.seq <= $3::bigint AND x.bucket IS NOT DISTINCT FROM $4::text', [maxKey, bucket]);
  }

  async existingJobIds(jobKeys: string[], maxKey: string): Promise<Set<string>> {
    if (!jobKeys.length) return new Set();
    const { rows } = await this.pool.query<{ k: string }>(
      `SELECT s.seq::text AS k FROM staged_record s
       WHERE s.version_id = $1 AND s.seq = ANY($2::bigint[]) AND s.seq <= $3::bigint AND ${NOT_GONE}`,
      [this.versionId, jobKeys, maxKey],
    );
    return new Set(rows.map((r) => r.k));
  }

  async bucketStats(maxKey: string, digest: BucketDigestKind = 'md5'): Promise<BucketStat[]> {
    const tz = await this.timezone();
    const fingerprint =
      digest === 'row' ? digestOfSumSql(`sum(${STAGED_ROW_HASH})`) : bucketDigestSql(STAGED_FINGERPRINT, digest);
    const { rows } = await withLongSession(this.pool, (c) =>
      c.query<StatRow>(
        `SELECT x.bucket, count(*)::text AS count, ${fingerprint} AS fingerprint,
                coalesce(sum(CASE WHEN x.bytes ~ '^-?[0-9]+$' THEN x.bytes::numeric END), 0)::text AS bytes,
                min(x.seq)::text AS min_key, max(x.seq)::text AS max_key
         FROM (${SELECT_STAGED}) x WHERE x.seq <= $3::bigint GROUP BY 1 ORDER BY 1 NULLS FIRST`,
        [tz, this.versionId, maxKey],
      ),
    );
    return rows.map(toBucketStat);
  }

  readBucketInSpan(bucket: string | null, maxKey: string, span: KeySpan): Promise<ReadRow[]> {
    return this.select(
      'x.seq BETWEEN $3::bigint AND least($4::bigint, $5::bigint) AND x.bucket IS NOT DISTINCT FROM $6::text',
      [span.min, span.max, maxKey, bucket],
    );
  }

  async dstReport(maxKey: string): Promise<DstReport | null> {
    const tz = await this.timezone();
    const { rows } = await this.pool.query<{ nonexistent: number; ambiguous: number; naive: number }>(
      `SELECT ${DST_COUNTS('t', '$1')}, count(*)::int AS naive FROM (
         SELECT s.start_text::timestamp AS t FROM staged_record s
         WHERE s.version_id = $2 AND s.seq <= $3::bigint AND s.time_kind = 'naive' AND s.reject_reason IS NULL AND s.start_text IS NOT NULL
           AND ${NOT_GONE}) x`,
      [tz, this.versionId, maxKey],
    );
    if (!rows[0].naive) return null;
    return { zone: tz, nonexistent: rows[0].nonexistent, ambiguous: rows[0].ambiguous, rule: DST_RULE };
  }

  /**
   * Records of the listing now that are not in the staged snapshot (by id): the follow-up delta.
   * Reads the listing again, a file or the output of the source's `command` (run again, as cheap as
   * at plan); 0 when its sha256 is unchanged.
   * @throws SourceDataInvalidError when the file cannot be read or the command fails, as at plan.
   */
  async deltaCount(): Promise<number> {
    const { rows } = await this.pool.query<{ snapshot: string | null }>(
      `SELECT source_snapshot AS snapshot FROM version WHERE version_id = $1`,
      [this.versionId],
    );
    // The bytes' sha256 first: an unchanged listing is not parsed again.
    const bytes = await readListingBytes(this.name, this.config);
    if (createHash('sha256').update(bytes).digest('hex') === rows[0]?.snapshot) return 0;
    const now = await parseListing(this.name, this.config, bytes, true);
    const { rows: known } = await this.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM unnest($2::text[]) AS u(id) WHERE NOT EXISTS (SELECT 1 FROM staged_record s WHERE s.version_id = $1 AND s.job_id = u.id)`,
      [this.versionId, now.ids],
    );
    return known[0].n;
  }

  /**
   * Staged records at or below `maxKey` per range starting at `firstKeys` (ascending): index i
   * (1-based) from `firstKeys[i-1]` up to the next first key, index 0 below the first (a refresh's
   * reconciliation, as {@link RangeKeySource}). Quarantined records count: they are in the source.
   */
  async rangeKeyCounts(maxKey: string, firstKeys: string[]): Promise<Map<number, number>> {
    const { rows } = await this.pool.query<{ r: number; n: string }>(
      `SELECT width_bucket(s.seq, $2::bigint[]) AS r, count(*)::text AS n FROM staged_record s
       WHERE s.version_id = $1 AND s.seq <= $3::bigint AND ${NOT_GONE} GROUP BY 1`,
      [this.versionId, firstKeys, maxKey],
    );
    return new Map(rows.map((r) => [r.r, Number(r.n)]));
  }

  /** The staged keys at or below `maxKey` in the inclusive `ranges`, ascending (as {@link RangeKeySource}). */
  async keysInRanges(maxKey: string, ranges: { firstKey: string; lastKey: string }[]): Promise<string[]> {
    if (!ranges.length) return [];
    const { rows } = await this.pool.query<{ key: string }>(
      `SELECT s.seq::text AS key FROM staged_record s
       WHERE s.version_id = $1 AND s.seq <= $4::bigint AND ${NOT_GONE}
         AND EXISTS (SELECT 1 FROM unnest($2::bigint[], $3::bigint[]) AS r(lo, hi) WHERE s.seq BETWEEN r.lo AND r.hi)
       ORDER BY s.seq`,
      [this.versionId, ranges.map((r) => r.firstKey), ranges.map((r) => r.lastKey), maxKey],
    );
    return rows.map((r) => r.key);
  }

  async close(): Promise<void> {
    /* the catalog pool belongs to the worker */
  }
}
