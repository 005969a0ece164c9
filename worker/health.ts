/**
 * Worker health check: `GET /healthz` on CATALOG_REBUILD_HEALTH_ADDRESS (`host:port`).
 * 200 with `{"state":"RUNNING","database":"ok"}` while the worker polls and the catalog database
 * answers; 503 otherwise (stopping, draining, database unreachable).
 */
import * as http from 'node:http';
import type { Pool } from 'pg';
import type { Worker } from '@temporalio/worker';
import { pingDatabase } from '../lib/db';

/**
 * Starts the health endpoint. `address` is `host:port`.
 * @returns a function that closes it.
 * @throws Error when the address is not `host:port` or cannot be bound.
 */
export async function startHealthServer(address: string, worker: Worker, pool: Pool): Promise<() => Promise<void>> {
  const m = /^(.+):(\d+)$/.exec(address);
  if (!m) throw new Error(`CATALOG_REBUILD_HEALTH_ADDRESS must be host:port, got ${JSON.stringify(address)}`);
  const server = http.createServer(async (req, res) => {
    if (req.url !== '/healthz') {
      res.writeHead(404).end();
      return;
    }
    const state = worker.getState();
    let database = 'ok';
    try {
      await pingDatabase(pool);
    } catch (err) {
      database = (err as Error).message;
    }
    const healthy = state === 'RUNNING' && database === 'ok';
    res
      .writeHead(healthy ? 200 : 503, { 'content-type': 'application/json' })
      .end(JSON.stringify({ state, database, pid: process.pid }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(m[2]), m[1], () => resolve());
  });
  return () => new Promise<void>((resolve) => server.close(() => resolve()));
}
