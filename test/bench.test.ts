/**
 * The benchmark works: `npm run bench` compiled, at a tiny size (3,000 jobs, pages of 500), as a
 * child process. It exits 0, prints every figure, the three copies hold the same rows, and a
 * replayed page writes under 10% of the WAL of its first write. CI runs only this small size; the
 * figures themselves are in docs/performance.md.
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
  '(a) catalog-rebuild, 1 worker',
  '(a) CPU',
  '(a) CPU until the last page committed',
  '(a) CPU after it (seal, reconcile, publish)',
  'page time',
  'temporal round trip per page',
  'history events per run',
  'history events per million jobs',
  'worker peak RSS',
  '(b) streaming copy (cursor + COPY)',
  '(b) CPU',
  '(c) INSERT … SELECT in PostgreSQL',
  'a/b',
  'a/c',
  'equivalence',
  'page write (first write)',
  'page parts (alone)',
  'page write (replay, identical rows)',
  'replayed page WAL',
  'bench time',
];

test('npm run bench -- --jobs 3000 prints every figure and exits 0', { timeout: 120_000 }, async () => {
  const json = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-bench-')), 'bench.json');
  const started = Date.now();
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
    (resolve) => {
      const child = spawn(
        process.execPath,
        [path.join(projectRoot(), 'dist/dev/bench/main.js'), '--jobs', '3000', '--page-size', '500', '--json', json],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
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
  assert.match(stdout, /^\(a\) catalog-rebuild, 1 worker: [\d,]+ rows\/s \(3,000 rows in /m);
  assert.match(stdout, /^\(b\) streaming copy \(cursor \+ COPY\): [\d,]+ rows\/s/m);
  assert.match(stdout, /^\(c\) INSERT … SELECT in PostgreSQL: [\d,]+ rows\/s/m);
  assert.match(stdout, /^equivalence: \(a\), \(b\) and \(c\) hold the same 3,000 rows/m);
  const r = JSON.parse(fs.readFileSync(json, 'utf8'));
  assert.ok(r['(a) catalog-rebuild, 1 worker'].rowsPerSecond > 0);
  assert.ok(r['history events per run'].maxPerRun > 0 && r['history events per run'].maxPerRun < 10_000);
  assert.ok(r['worker peak RSS'] > 0, 'worker peak RSS read from /proc');
  assert.ok(
    r['replayed page WAL'].ratio < 0.1,
    `a replayed page writes under 10% of its first write's WAL: ${JSON.stringify(r['replayed page WAL'])}`,
  );
  assert.ok(Date.now() - started < 60_000, `the small bench takes under 60 s (took ${Date.now() - started} ms)`);
});
