/**
 * `npm run bench:listing -- --records N`: one restic snapshot of N generated `restic ls --json`
 * records (default 1,000,000), written to a file and listed by `cat` as the source's `filesCommand`,
 * rebuilt with `start --files --wait` on a private Temporal dev server (free ports), fresh
 * databases and one worker (the product's entry point). Prints the wall time from start to
 * published, file records per second, and the worker process's resident set: idle before the
 * rebuild and its peak (VmHWM, exact) after it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Command } from 'commander';
import { projectRoot } from '../lib/paths';
import { memoryOf } from './bench/cpu';
import { privateTemporal, spawnWorker, testDatabases, testEnv, uniqueQueue } from './harness/harness';

/** Writes a `restic ls --json` listing of `n` file records of snapshot `id` to `file`. */
function writeListing(file: string, id: string, n: number): void {
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, `${JSON.stringify({ struct_type: 'snapshot', message_type: 'snapshot', id })}\n`);
  let chunk = '';
  for (let i = 0; i < n; i++) {
    chunk += `${JSON.stringify({
      name: `file${i}.txt`,
      type: 'file',
      path: `/srv/data/dir${i % 1000}/file${i}.txt`,
      uid: 1000,
      gid: 1000,
      size: i * 7,
      mode: 420,
      permissions: '-rw-r--r--',
      mtime: '2026-11-30T10:00:00.123456789Z',
      inode: i,
      message_type: 'node',
      struct_type: 'node',
    })}\n`;
    if (chunk.length > 1 << 20) {
      fs.writeSync(fd, chunk);
      chunk = '';
    }
  }
  fs.writeSync(fd, chunk);
  fs.closeSync(fd);
}

async function main(): Promise<void> {
  const o = new Command()
    .option('--records <n>', 'file records of the snapshot', (v) => Number(v), 1_000_000)
    .parse()
    .opts<{ records: number }>();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-bench-listing-'));
  const temporal = await privateTemporal();
  const dbs = await testDatabases('blisting');
  try {
    const id = 'b'.repeat(64);
    writeListing(path.join(dir, 'ls.jsonl'), id, o.records);
    const snapshots = [{ time: '2026-11-30T10:00:00Z', paths: ['/srv/data'], hostname: 'h', id, short_id: 'bbbbbbbb' }];
    fs.writeFileSync(path.join(dir, 'snapshots.json'), JSON.stringify(snapshots));
    const config = path.join(dir, 'config.json');
    fs.writeFileSync(
      config,
      JSON.stringify({
        catalogDatabaseUrl: dbs.catalogUrl,
        sources: {
          restic: {
            kind: 'restic-json',
            path: path.join(dir, 'snapshots.json'),
            filesCommand: ['cat', path.join(dir, 'ls.jsonl')],
          },
        },
      }),
    );
    const env = testEnv({ address: temporal.address, configFile: config, taskQueue: uniqueQueue('blisting') });
    const worker = await spawnWorker(env, { entry: 'product' });
    const idle = memoryOf(worker.pid);
    const t0 = Date.now();
    const r = spawnSync(
      process.execPath,
      [
        path.join(projectRoot(), 'bin/catalog-rebuild.js'),
        'start',
        '--catalog',
        'bench',
        '--source',
        'restic',
        '--files',
        '--wait',
      ],
      { env, encoding: 'utf8' },
    );
    const ms = Date.now() - t0;
    const peak = memoryOf(worker.pid);
    worker.kill();
    if (r.status !== 0) throw new Error(`start --files exited ${r.status}: ${r.stdout}\n${r.stderr}`);
    console.log(
      `${o.records} listed file records: published in ${(ms / 1000).toFixed(1)} s (${Math.round(o.records / (ms / 1000))} records/s)`,
    );
    console.log(
      `worker resident set: idle ${Math.round((idle?.rssKb ?? NaN) / 1024)} MB, peak (VmHWM) ${Math.round((peak?.hwmKb ?? NaN) / 1024)} MB`,
    );
  } finally {
    await temporal.stop();
    await dbs.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(`bench:listing: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
