/**
 * The benchmark works: `npm run bench` compiled, at a tiny size (3,000 jobs, default flags: the
 * product as an operator starts it), as a child process. It exits 0, prints every figure and the
 * headline table, the figures are sane (rates and ratio above 0, RSS and events read), and baseline
 * (p), the product, (b) and (c) hold the same rows by an order-independent fingerprint. CI runs
 * only this small size; the figures themselves are in docs/performance.md.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { projectRoot } from '../lib/paths';

/** Every figure the bench prints, as `label: value`. */
const FIGURES = [
  'machine',
  'jobs',
  '(p) psql pipe (\\copy to stdout | \\copy from stdin)',
  '(p) CPU',
  'product (catalog-rebuild start --wait)',
  'product CPU',
  'page time',
  'temporal round trip per page',
  'history events per run',
  'history events per million jobs',
  'worker peak RSS',
  '(b) streaming copy (cursor + COPY)',
  '(b) CPU',
  '(c) INSERT … SELECT in PostgreSQL',
  'product/(b)',
  'product/(c)',
  'equivalence',
  'page write (first write)',
  'page parts (alone)',
  'page write (replay, identical rows)',
  'replayed page WAL',
  'rewritten page WAL (ledger row deleted)',
  '(p) again, after the product',
  'baseline drift',
  'product/(p)',
  'bench time',
];

/** The four components a missed target is attributed to. */
const COMPONENTS = ['worker', 'PostgreSQL catalog backends', 'PostgreSQL source backends', 'Temporal server'];

test('npm run bench -- --jobs 3000 prints every figure, sane, and equal row sets', { timeout: 180_000 }, async (t) => {
  const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-bench-')), 'bench.json');
  const started = Date.now();
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
    (resolve) => {
      const child = spawn(
        process.execPath,
        [path.join(projectRoot(), 'dist/dev/bench/main.js'), '--jobs', '3000', '--wal-pages', '2', '--json', json],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      let err = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (err += d));
      child.on('exit', (c) => resolve({ code: c, stdout: out, stderr: err }));
    },
  );
  assert.equal(code, 0, `bench failed:\n${stdout}\n${stderr}`);
  for (const label of FIGURES) {
    const line = stdout.split('\n').find((l) => l.startsWith(`${label}: `));
    assert.ok(line, `figure "${label}" printed:\n${stdout}`);
    assert.match(line!, /\d/, `figure "${label}" has a number: ${line}`);
  }
  assert.match(stdout, /^\| rows \| \(p\) s \| \(p\) rows\/s \| product s \| product rows\/s \| product\/\(p\) \|$/m);
  assert.match(stdout, /^\| 3,000 \| [\d.]+ \| [\d,]+ \| [\d.]+ \| [\d,]+ \| [\d.]+ \|$/m);
  assert.match(stdout, /^equivalence: \(p\), the product, \(b\) and \(c\) hold the same 3,000 rows/m);

  const r = JSON.parse(fs.readFileSync(json, 'utf8'));
  const p = r['(p) psql pipe (\\copy to stdout | \\copy from stdin)'];
  const product = r['product (catalog-rebuild start --wait)'];
  const head = r['product/(p)'];
  assert.equal(p.rows, 3000, '(p) copied every row');
  assert.equal(product.rows, 3000, 'the product copied every row');
  assert.ok(p.rowsPerSecond > 0 && product.rowsPerSecond > 0, JSON.stringify({ p, product }));
  assert.equal(product.workers, 1);
  assert.equal(product.pageSize, null, 'the product ran with default flags');
  assert.ok(head.ratio > 0 && head.ratio < 10, `product/(p) is a sane ratio: ${head.ratio}`);
  assert.equal(head.rows, 3000);
  assert.ok(COMPONENTS.includes(head.dominantCpu), `dominant CPU names a component: ${head.dominantCpu}`);
  for (const c of COMPONENTS) assert.ok(typeof r['product CPU'][c] === 'number', `CPU of ${c} measured`);
  assert.ok(r['product CPU'].worker > 0, 'the worker used CPU');
  assert.ok(r['(p) CPU']['psql processes'] > 0, "the psql processes' CPU measured");
  const drift = r['baseline drift'];
  assert.equal(r['(p) again, after the product'].rows, 3000, '(p) after the product copied every row');
  assert.ok(drift.beforeMs > 0 && drift.afterMs > 0 && drift.ratioAfter > 0, JSON.stringify(drift));
  assert.equal(drift.moved, Math.abs(drift.afterMs / drift.beforeMs - 1) > 0.1);

  const eq = r.equivalence;
  assert.ok(eq.same, `same row sets: ${JSON.stringify(eq)}`);
  assert.equal(eq.fingerprints.p.sum, eq.fingerprints.product.sum, '(p) and the product: same fingerprint');
  assert.equal(eq.fingerprints.p.rows, eq.fingerprints.product.rows);

  const events = r['history events per run'];
  assert.ok(events.maxPerRun > 0 && events.maxPerRun < 10_000, JSON.stringify(events));
  const rss = r['worker peak RSS'];
  assert.ok(rss.maxMb > 50 && rss.maxMb < 4096, `worker peak RSS read from /proc: ${JSON.stringify(rss)}`);
  assert.ok(rss.workers[0].processes >= 1);
  const wal = r['replayed page WAL'];
  assert.ok(wal.firstBytes > 0, JSON.stringify(wal));
  assert.ok(
    wal.ratio < 0.1,
    `a replayed committed page writes under 10% of its first write's WAL: ${JSON.stringify(wal)}`,
  );
  // A hang is caught by the test's timeout; how long the bench takes is its own figure, not asserted.
  t.diagnostic(`the small bench took ${Date.now() - started} ms`);
});
