/**
 * The demo's lock (dev/demo/state.ts): one demo per checkout, even when two start at the same
 * instant; a lock left by a demo killed with SIGKILL is taken over. Real processes, a scratch folder.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { acquireDemoLock, demoLockFile, demoMarker, releaseDemoLock } from '../dev/demo/state';
import { waitFor } from '../dev/harness/wait';

/** A scratch checkout root and its data folder. */
function scratch(t: { after(fn: () => void): void }): { root: string; dataDir: string; lock: string } {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'demo-lock-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const dataDir = path.join(root, '.data');
  fs.mkdirSync(dataDir);
  return { root, dataDir, lock: demoLockFile(dataDir) };
}

/** A process whose command line holds `marker` (as a demo's holds its entrypoint), until killed. */
function fakeDemo(marker: string) {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', marker], { stdio: 'ignore' });
  return child;
}

test('the lock: taken once, refused while its holder runs the demo, taken over when the holder died', async (t) => {
  const { root, lock } = scratch(t);
  assert.equal(acquireDemoLock(lock, root), null, 'a free lock is taken');
  assert.equal(fs.readFileSync(lock, 'utf8').trim(), String(process.pid));
  assert.equal(acquireDemoLock(lock, root), null, 'its holder takes it again');
  releaseDemoLock(lock);
  assert.equal(fs.existsSync(lock), false, 'released by its holder');

  const demo = fakeDemo(demoMarker(root));
  t.after(() => demo.kill('SIGKILL'));
  await new Promise((r) => demo.once('spawn', r));
  fs.writeFileSync(lock, `${demo.pid}\n`);
  assert.equal(acquireDemoLock(lock, root), demo.pid, 'a running demo holds it: refused, naming its pid');
  releaseDemoLock(lock);
  assert.equal(fs.readFileSync(lock, 'utf8').trim(), String(demo.pid), 'only the holder releases it');

  demo.kill('SIGKILL');
  await new Promise((r) => demo.once('exit', r));
  assert.equal(acquireDemoLock(lock, root), null, 'the lock of a dead demo is taken over');
  assert.equal(fs.readFileSync(lock, 'utf8').trim(), String(process.pid));

  // A live process that is not this checkout's demo (another clone's path) does not hold it either.
  const other = fakeDemo(demoMarker(path.join(root, 'elsewhere')));
  t.after(() => other.kill('SIGKILL'));
  await new Promise((r) => other.once('spawn', r));
  fs.writeFileSync(lock, `${other.pid}\n`);
  assert.equal(acquireDemoLock(lock, root), null, "a pid that does not run this checkout's demo is stale");
});

test("npm run demo's shell holds the lock during the build; the demo it starts takes it over", async (t) => {
  const { root, lock } = scratch(t);
  // The script's shell as npm runs it: cwd the checkout, the demo's entrypoint named in its command.
  const shell = spawn('sh', ['-c', 'sleep 60; : node dist/dev/demo/main.js'], { cwd: root, stdio: 'ignore' });
  t.after(() => shell.kill('SIGKILL'));
  await new Promise((r) => shell.once('spawn', r));
  assert.equal(acquireDemoLock(lock, root, shell.pid), null, 'the guard takes it for the shell');
  assert.equal(acquireDemoLock(lock, root), shell.pid, 'a second demo meanwhile is refused, naming the shell');
  assert.equal(acquireDemoLock(lock, root, process.pid, shell.pid), null, 'the demo the shell started takes it over');
  assert.equal(fs.readFileSync(lock, 'utf8').trim(), String(process.pid));
  // The same command line in another folder is another checkout's shell: not a holder.
  fs.writeFileSync(lock, `${shell.pid}\n`);
  assert.equal(acquireDemoLock(lock, path.join(root, '.data')), null, "another checkout's shell does not hold it");
});

test('eight processes take the lock at the same instant: exactly one gets it, the others name it', async (t) => {
  const { root, lock } = scratch(t);
  const go = path.join(root, 'go');
  const release = path.join(root, 'release');
  const stateModule = require.resolve('../dev/demo/state');
  // Each contender waits for the \`go\` file, tries once, prints what it got and stays alive until
  // the \`release\` file exists; its command line holds the demo marker, so the winner counts as a
  // running demo for the others however late they look.
  const script = `
    const fs = require('node:fs');
    const { acquireDemoLock } = require(${JSON.stringify(stateModule)});
    const until = (file, then) => (fs.existsSync(file) ? then() : setTimeout(() => until(file, then), 5));
    until(${JSON.stringify(go)}, () => {
      const holder = acquireDemoLock(${JSON.stringify(lock)}, ${JSON.stringify(root)});
      process.stdout.write(holder === null ? 'won' : 'refused ' + holder);
      until(${JSON.stringify(release)}, () => process.exit(0));
    });`;
  const contenders = Array.from({ length: 8 }, () => {
    const child = spawn(process.execPath, ['-e', script, demoMarker(root)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const c = { child, out: '' };
    child.stdout.on('data', (d: Buffer) => (c.out += d.toString()));
    return c;
  });
  t.after(() => contenders.forEach((c) => c.child.kill('SIGKILL')));
  fs.writeFileSync(go, '');
  await waitFor('every contender to say what it got', () => contenders.every((c) => c.out !== ''), {
    timeoutMs: 60_000,
  });
  fs.writeFileSync(release, '');
  const outs = contenders.map((c) => c.out);
  const winners = contenders.filter((c) => c.out === 'won');
  assert.equal(winners.length, 1, `exactly one contender took the lock: ${JSON.stringify(outs)}`);
  assert.deepEqual(
    outs.filter((o) => o !== 'won'),
    Array(7).fill(`refused ${winners[0].child.pid}`),
    'the others were refused, naming the winner',
  );
});
