/**
 * A page's read of a Bareos/Bacula director catalog: one read-only
 * REPEATABLE READ transaction on the source (one snapshot) that first checks the page's rows in SQL
 * (quarantined records and their reasons, unknown codes), then streams the good rows with
 * `COPY (SELECT …) TO STDOUT` in the catalog's COPY text form. No row becomes a JavaScript object.
 */
import type { Readable } from 'node:stream';
import type { Pool, PoolClient } from 'pg';
import { ReadSession } from './read-session';
import { bareosFingerprintRow } from '../fingerprint';
import type { KeyRange, SourceTextMode } from './bareos-columns';
import {
  bareosJobSelect,
  bareosPageCheckQuery,
  bareosPageCopyQuery,
  bareosRejectsQuery,
  BAREOS_ESCAPED_ROW,
  BAREOS_FROM_JOB,
  LONG_CLIENT_IDS_SQL,
} from './bareos-columns';
import { isDataError, withSavepoint } from '../db';
import type { Queryable } from '../db';
import { bareosFilesCopyQuery } from './bareos-files';
import type { FileRead, FileSchema, GoneJob, PageRead, PageRejectRecord, ReadRow } from './types';

/** What a page read needs to know of its source. */
export interface PageReadSettings {
  /** IANA zone of the source's naive times. */
  zone: string;
  /** How the source's text is read. */
  mode: SourceTextMode;
  /** statement_timeout of the read transaction (ms), sized from the page's planned rows. */
  statementTimeoutMs: number;
  /** The read gives the page's file records (`openFiles`). */
  files: boolean;
  /** The source's file-record schema (read once per source on `db`, the page's own session, when a page first streams files). */
  fileSchema: (db: Queryable) => Promise<FileSchema>;
}

/**
 * Opens a page read: takes a source connection from `pool` (waiting while the source's
 * `maxConcurrentReads` connections are busy), begins the snapshot, and runs the check query.
 * The caller must `close` it.
 * @throws the source's errors (connection, statement timeout); the connection is then discarded.
 */
export async function openBareosPageRead(pool: Pool, range: KeyRange, s: PageReadSettings): Promise<PageRead> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await client.query(
      `SELECT set_config('statement_timeout', $1, true), set_config('TimeZone', 'UTC', true),
                               set_config('DateStyle', 'ISO, YMD', true)`,
      [String(s.statementTimeoutMs)],
    );
    const long = await client.query<{ ids: string }>(LONG_CLIENT_IDS_SQL);
    const { rows } = await client.query<{ reject_ids: string; decoded: string }>(
      bareosPageCheckQuery(s.mode, range, long.rows[0].ids),
    );
    const rejectIds = rows[0].reject_ids;
    const rejects =
      rejectIds === '{}'
        ? []
        : (
            await client.query<RawReject>(bareosRejectsQuery(s.mode, s.zone, rejectIds, bareosFingerprintRow(s.mode)))
          ).rows.map(toReject);
    const decoded = Object.fromEntries(
      Object.entries(JSON.parse(rows[0].decoded) as Record<string, number>).filter(([, n]) => n > 0),
    );
    return new BareosPageRead(client, range, s, { rejectIds, rejects, decoded });
  } catch (err) {
    client.release(err as Error);
    throw err;
  }
}

/** A quarantined record as the check query returns it. */
interface RawReject {
  job_key: string;
  job_id: string | null;
  bucket: string | null;
  fingerprint_row: string;
  reason: string;
  raw: string;
}

/** What the page's check found. */
interface PageCheck {
  /** Job ids of the quarantined records, as a bigint array literal (`{}` for none). */
  rejectIds: string;
  rejects: PageRejectRecord[];
  decoded: Record<string, number>;
}

function toReject(r: RawReject): PageRejectRecord {
  return {
    jobKey: r.job_key,
    jobId: r.job_id,
    bucket: r.bucket,
    fingerprintRow: r.fingerprint_row,
    reason: r.reason,
    raw: r.raw,
  };
}

class BareosPageRead implements PageRead {
  private streamed = false;
  private filesStreamed = false;
  private readonly session: ReadSession;

  constructor(
    private readonly client: PoolClient,
    private readonly range: KeyRange,
    private readonly settings: PageReadSettings,
    private readonly check: PageCheck,
  ) {
    this.session = new ReadSession(client);
  }

  get rejects(): PageRejectRecord[] {
    return this.check.rejects;
  }

  get decoded(): Record<string, number> {
    return this.check.decoded;
  }

  /** Unknown codes of a director catalog are counted by the reconciliation, per bucket. */
  readonly warnings = 0;
  /** Job ids are the primary key of `Job`: no repeats. */
  readonly duplicates = 0;
  /** A job deleted after the plan is simply not read. */
  readonly gone: GoneJob[] = [];

  copyOut(versionId: string, pageNo: number): Readable {
    if (this.streamed) throw new Error('a page read streams its rows once');
    this.streamed = true;
    const { mode, zone } = this.settings;
    return this.session.copyOut(
      bareosPageCopyQuery(mode, zone, this.range, { versionId, pageNo, rejectIds: this.check.rejectIds }),
    );
  }

  async openFiles(): Promise<FileRead> {
    if (!this.settings.files) throw new Error('a page read opened without files has no file records');
    if (this.filesStreamed) throw new Error('a page read streams its file records once');
    this.filesStreamed = true;
    const schema = await this.settings.fileSchema(this.client);
    const jobs = this.range.keys ? { jobIds: this.range.keys } : this.range;
    const query = bareosFilesCopyQuery(schema, this.settings.mode, jobs);
    return {
      legacyEncoding: this.settings.mode.legacyEncoding,
      copyFilesOut: () => Promise.resolve(this.session.copyOut(query)),
      close: async () => undefined, // the page read's snapshot: ended by the page read's close
    };
  }

  async readRows(): Promise<ReadRow[]> {
    if (this.streamed) throw new Error('rows already streamed: open a new page read');
    const { rows } = await this.client.query<{ id: string }>(
      `SELECT jobid::text AS id FROM job WHERE jobid BETWEEN $1::bigint AND $2::bigint
       AND jobid <> ALL ($3::bigint[]) AND ($4::bigint[] IS NULL OR jobid = ANY ($4::bigint[])) ORDER BY jobid`,
      [this.range.firstKey, this.range.lastKey, this.rejects.map((r) => r.jobKey), this.range.keys ?? null],
    );
    return this.readIds(rows.map((r) => r.id));
  }

  /**
   * The rows of `ids` in SourceRow text form. A read the source refuses on a value (SQLSTATE class
   * 22: text the legacy encoding does not define) is split in halves inside a savepoint until the
   * refused rows stand alone; each is quarantined with its text as escaped bytes.
   */
  private async readIds(ids: string[]): Promise<ReadRow[]> {
    if (!ids.length) return [];
    try {
      const { rows } = await withSavepoint(this.client, 'page_read', () =>
        this.client.query<ReadRow>(
          `${bareosJobSelect(this.settings.mode)} WHERE j.jobid = ANY ($2::bigint[]) ORDER BY j.jobid`,
          [this.settings.zone, ids],
        ),
      );
      return rows;
    } catch (err) {
      if (!isDataError(err)) throw err;
      if (ids.length === 1) {
        this.check.rejects.push(await this.undecodable(ids[0], err as Error & { code: string }));
        return [];
      }
      const half = Math.ceil(ids.length / 2);
      return [...(await this.readIds(ids.slice(0, half))), ...(await this.readIds(ids.slice(half)))];
    }
  }

  /** The quarantined record of a job whose text the source cannot decode: its text columns as escaped bytes. */
  private async undecodable(id: string, err: Error & { code: string }): Promise<PageRejectRecord> {
    const { mode } = this.settings;
    const { rows } = await this.client.query<{ bucket: string | null; fp: string; raw: string }>(
      `SELECT j.starttime::date::text AS bucket, ${bareosFingerprintRow(mode)} AS fp, ${BAREOS_ESCAPED_ROW} AS raw
       ${BAREOS_FROM_JOB} WHERE j.jobid = $2::bigint`,
      [this.settings.zone, id],
    );
    const r = rows[0];
    return {
      jobKey: id,
      jobId: id,
      bucket: r.bucket,
      fingerprintRow: r.fp,
      reason: `text is neither UTF-8 nor ${mode.legacyEncoding}: ${err.message} (SQLSTATE ${err.code}); LATIN1 defines every byte`,
      raw: r.raw,
    };
  }

  /**
   * Ends the read's snapshot (lib/sources/read-session.ts): committed when its COPY streams ended,
   * else (an error, a COPY cut short) the connection is discarded.
   */
  close(err?: Error): Promise<void> {
    return this.session.close(err);
  }
}
