/**
 * A director catalog's read session: one pooled connection in a read-only transaction, its
 * `COPY (…) TO STDOUT` streams, and how it ends. A COPY stream cut short (its reader gave up, or the
 * catalog side failed and the pipeline destroyed it while it waited for the catalog) leaves the
 * connection mid-protocol with its socket paused: no answer ever reaches a statement sent after it,
 * so a `COMMIT` there would wait forever (a page attempt hung, heartbeating, until its start-to-close
 * timeout). Such a session is discarded, its socket destroyed, never committed or reused.
 */
import type { Readable } from 'node:stream';
import type { PoolClient } from 'pg';
import { to as copyTo } from 'pg-copy-streams';

/** The socket of a `pg` client (its connection's stream), as pg itself destroys it on a connect timeout. */
function socketOf(client: PoolClient): { destroy(): void } | undefined {
  return (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
}

/** A pooled source connection inside its read transaction, with the COPY streams it started. */
export class ReadSession {
  private readonly streams: Readable[] = [];
  private closed = false;

  /** @param client a pooled connection whose read transaction is open (BEGIN done). */
  constructor(readonly client: PoolClient) {}

  /** Runs `sql`, a `COPY (…) TO STDOUT` statement, on the session's connection; the stream is the caller's to consume. */
  copyOut(sql: string): Readable {
    const stream = this.client.query(copyTo(sql));
    this.streams.push(stream);
    return stream;
  }

  /** True when a COPY stream of the session did not reach its end. */
  get cut(): boolean {
    return this.streams.some((s) => !s.readableEnded);
  }

  /**
   * Ends the session: COMMIT and back to the pool when every COPY stream reached its end and no
   * error is given; else the connection is discarded (its socket destroyed when a COPY was cut
   * short). A failed COMMIT discards it too. Never throws; a second call does nothing.
   */
  async close(err?: Error): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (err || this.cut) {
      if (this.cut) socketOf(this.client)?.destroy();
      this.client.release(err ?? new Error('a COPY of the read session was cut short'));
      return;
    }
    try {
      await this.client.query('COMMIT');
      this.client.release();
    } catch (e) {
      this.client.release(e as Error);
    }
  }
}
