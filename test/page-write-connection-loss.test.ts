/**
 * A page's streamed write when a database connection is lost (a PostgreSQL restart ends every
 * session at once): the write fails with the connection's error and the worker lives on. The
 * source's COPY starts only once the catalog's savepoint is set, and the source stream, the digest
 * and the catalog's COPY run in one pipeline, so a source stream that errors after the catalog side
 * failed (its connection ended by the page read's close) always has a listener. Before, such an
 * error on the digest stream crashed the worker (`Unhandled 'error' event`), and with it the rebuild.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import type { PoolClient } from 'pg';
import format from 'pg-format';
import { pageReadWriter } from '../activities/page-write';
import type { ActivityContext } from '../activities/context';
import { partitionName } from '../lib/catalog/partitions';
import { JOB_COLUMNS } from '../lib/sources/types';
import type { PageRead, PageSource } from '../lib/sources/types';
import type { TestDatabases } from '../dev/harness/harness';
import { testDatabases } from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';

const VERSION = '990001';
let dbs: TestDatabases;
const uncaught: Error[] = [];
const onUncaught = (err: Error) => uncaught.push(err);

before(async () => {
  dbs = await testDatabases('pgwloss');
  // A stand-in for the version's job table: the COPY's columns, all text.
  await dbs.catalogPool.query(
    format(
      'CREATE TABLE %I (version_id bigint, page_no int, %s, row_hash text)',
      partitionName(VERSION),
      JOB_COLUMNS.map((c) => format('%I text', c)).join(', '),
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
  const ctx = {} as ActivityContext;
  return pageReadWriter(
    ctx,
    { catalog: 'loss', source: 'director', versionId: VERSION, pageNo: 1 },
    { pageNo: 1, attempt: 1 },
    read,
    {
      source: {} as PageSource,
      range: { firstKey: '1', lastKey: '1000' },
      statementTimeoutMs: 30_000,
      signal: new AbortController().signal,
      files: false,
    },
  );
}

/** One COPY text line of the stand-in table. */
const line = (i: number) =>
  [VERSION, '1', ...JOB_COLUMNS.map((c) => (c === 'job_id' ? String(i) : '\\N')), '\\N'].join('\t') + '\n';

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
  await waitFor('the source COPY to start', () => rows !== undefined);
  for (let i = 1; i <= 100; i++) rows!.write(line(i));
  await terminate();
  // The source goes on producing until the pipeline ends it.
  const feed = setInterval(() => rows!.writable && rows!.write(line(1)), 5);
  try {
    await assert.rejects(write, /terminat|Connection/i);
  } finally {
    clearInterval(feed);
  }
  c.release(true);
  assert.equal(read.closedWith.length, 1);
  assert.deepEqual(uncaught, []);
});
