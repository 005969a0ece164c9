/**
 * A page's streamed write when a database connection is lost (a PostgreSQL restart ends every
 * session at once): the write fails with the connection's error and the worker lives on. The
 * source's COPY starts only once the catalog's savepoint is set, and the source stream, the digest
 * and the catalog's COPY run in one pipeline, so a source stream that errors after the catalog side
 * failed (its connection ended by the page read's close) always has a listener. Before, such an
 * error on the digest stream crashed the worker (`Unhandled 'error' event`), and with it the rebuild.
 * And a director read session whose COPY the pipeline cut short is discarded, never committed: a
 * COMMIT sent behind the cut COPY is never answered, and the page attempt hung, heartbeating, until
 * its start-to-close timeout (lib/sources/read-session.ts).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { PoolClient } from 'pg';
import format from 'pg-format';
import { pageReadWriter } from '../lib/page';
import type { PageContext } from '../lib/page';
import { partitionName } from '../lib/catalog/partitions';
import { PAGE_COPY_COLUMNS } from '../lib/rows';
import type { PageRead } from '../lib/sources/types';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { waitFor, within } from '../dev/harness/wait';
import { ReadSession } from '../lib/sources/read-session';

const VERSION = '990001';
let dbs: TestDatabases;
const uncaught: Error[] = [];
const onUncaught = (err: Error) => uncaught.push(err);

before(async () => {
  dbs = await testDatabases('pgwloss');
  // A stand-in for the version's job table: the COPY's columns, all text.
  await dbs.catalogPool.query(
    format(
      'CREATE TABLE %I (%s)',
      partitionName(VERSION),
      PAGE_COPY_COLUMNS.map((c) =>
        format('%I %s', c, { version_id: 'bigint', page_no: 'int' }[c as string] ?? 'text'),
      ).join(', '),
    ),
  );
  process.on('uncaughtException', onUncaught);
});

after(async () => {
  process.off('uncaughtException', onUncaught);
  await dbs?.drop();
});

/**
 * A page read whose rows come from `rows` (created on `copyOut`); its `close(err)` ends the rows
 * with a connection error, as `pg` does to a COPY OUT whose client the close ends.
 */
function fakeRead(rows: () => PassThrough): PageRead & { copyOutCalls: number; closedWith: Error[] } {
  let stream: PassThrough | undefined;
  const read = {
    copyOutCalls: 0,
    closedWith: [] as Error[],
    rejects: [],
    decoded: {},
    warnings: 0,
    duplicates: 0,
    gone: [],
    copyOut() {
      read.copyOutCalls++;
      stream = rows();
      return stream;
    },
    readRows: () => Promise.reject(new Error('not used')),
    openFiles: () => Promise.reject(new Error('not used')),
    async close(err?: Error) {
      if (err) read.closedWith.push(err);
      // pg's copy-to stream emits the client's end directly, on a later turn of the event loop,
      // whatever state the stream is in. The close resolves once that turn and the errors it
      // scheduled (process.nextTick, as streams emit them) have run: immediates run in order.
      if (stream) setImmediate(() => stream!.emit('error', new Error('Connection terminated')));
      await new Promise((r) => setImmediate(r));
    },
  };
  return read;
}

/** A checked-out catalog session inside a transaction, and a way to end it from the server side. */
async function pageSession(): Promise<{ c: PoolClient; terminate(): Promise<void> }> {
  const c = await dbs.catalogPool.connect();
  c.on('error', () => undefined);
  await c.query('BEGIN');
  const pid = (c as unknown as { processID: number }).processID;
  return {
    c,
    async terminate() {
      await dbs.catalogPool.query('SELECT pg_terminate_backend($1)', [pid]);
    },
  };
}

function writer(read: PageRead) {
  const ctx = {} as PageContext;
  return pageReadWriter(
    ctx,
    { catalog: 'loss', source: 'director', versionId: VERSION, pageNo: 1 },
    { pageNo: 1, attempt: 1 },
    read,
    {
      reopen: () => Promise.reject(new Error('no fresh read in this test')),
      signal: new AbortController().signal,
      files: false,
    },
  );
}

/** One COPY text line of the stand-in table. */
const line = (i: number) =>
  PAGE_COPY_COLUMNS.map((c) => ({ version_id: VERSION, page_no: '1', job_id: String(i) })[c as string] ?? '\\N').join(
    '\t',
  ) + '\n';

test('catalog session lost before the savepoint: the source COPY never starts, the write fails, the worker lives', async () => {
  const { c, terminate } = await pageSession();
  await terminate();
  const read = fakeRead(() => new PassThrough());
  await assert.rejects(writer(read)(c), /terminat|Connection/i);
  c.release(true);
  assert.equal(read.copyOutCalls, 0, 'the source COPY starts only once the savepoint is set');
  assert.equal(read.closedWith.length, 1, 'the page read was closed with the error (its connection discarded)');
  assert.deepEqual(uncaught, []);
});

test('catalog session lost mid-COPY, the source errors after: one pipeline ends every stream, nothing unhandled', async () => {
  const { c, terminate } = await pageSession();
  let rows: PassThrough | undefined;
  const read = fakeRead(() => (rows = new PassThrough()));
  const write = writer(read)(c);
  // Awaited from the start: the write may fail while the test still waits on the termination.
  const failed = assert.rejects(write, /terminat|Connection/i);
  await waitFor('the source COPY to start', () => rows !== undefined);
  for (let i = 1; i <= 100; i++) rows!.write(line(i));
  await terminate();
  // The source goes on producing until the pipeline ends it.
  const feed = setInterval(() => rows!.writable && rows!.write(line(1)), 5);
  try {
    await failed;
  } finally {
    clearInterval(feed);
  }
  c.release(true);
  assert.equal(read.closedWith.length, 1);
  assert.deepEqual(uncaught, []);
});

test('a read session whose COPY was cut short is discarded at once, not committed; one read to its end commits', async () => {
  const client = await dbs.sourcePool.connect();
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  const pid = (client as unknown as { processID: number }).processID;
  const session = new ReadSession(client);
  // More rows than the socket buffers hold: the server is still sending when the catalog side fails
  // and the pipeline destroys the source's stream while it waits for the catalog.
  const rows = session.copyOut(`COPY (SELECT g, repeat('x', 200) FROM generate_series(1, 2000000) g) TO STDOUT`);
  let chunks = 0;
  const catalog = new Writable({
    highWaterMark: 1024,
    write(_chunk, _enc, done) {
      if (++chunks === 3) done(new Error('the catalog connection was lost'));
      else setImmediate(done);
    },
  });
  await assert.rejects(pipeline(rows, catalog), /the catalog connection was lost/);
  assert.equal(session.cut, true);
  // A COMMIT behind the cut COPY would never be answered: the close must not send one.
  const closed = await within(session.close(), 10_000);
  assert.notEqual(closed, 'timeout', 'close returned');
  await waitFor('the cut session’s backend to end', async () => {
    const { rows: r } = await dbs.catalogPool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1',
      [pid],
    );
    return r[0].n === 0;
  });

  const again = await dbs.sourcePool.connect();
  await again.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  const whole = new ReadSession(again);
  const out: Buffer[] = [];
  for await (const chunk of whole.copyOut('COPY (SELECT g FROM generate_series(1, 3) g) TO STDOUT'))
    out.push(chunk as Buffer);
  assert.equal(Buffer.concat(out).toString(), '1\n2\n3\n');
  assert.equal(whole.cut, false);
  const idle = dbs.sourcePool.idleCount;
  await whole.close();
  assert.equal(dbs.sourcePool.idleCount, idle + 1, 'committed and back in the pool');
  const { rows: tx } = await dbs.sourcePool.query<{ s: string }>(
    `SELECT current_setting('transaction_read_only') AS s`,
  );
  assert.equal(tx[0].s, 'off', 'the pooled session is out of the read transaction');
});
