/**
 * `npm run demo`'s first step, run from the checkout's previous build before `npm run build`:
 * takes the checkout's demo lock for the script's shell (this process's parent, which lives until
 * the demo ends; the demo takes the lock over from it), or exits 1 naming the demo of this
 * checkout that runs now, so a second demo refuses before its build rewrites `dist/` under the
 * running one (whose next worker would find its workflow bundle older than the code). A fresh
 * clone has no build and no demo to guard.
 */
import * as fs from 'node:fs';
import { dataDir, projectRoot } from '../../lib/paths';
import { terminalWidth, wrapLine } from './lines';
import { acquireDemoLock, anotherDemoRuns, demoLockFile, releaseDemoLock, runningDemo } from './state';

// The script's shell: `test … || node dist/dev/demo/guard.js && npm run -s build && node dist/dev/demo/main.js`.
const shell = process.ppid;
const lock = demoLockFile(dataDir());
fs.mkdirSync(dataDir(), { recursive: true });
const held = acquireDemoLock(lock, projectRoot(), shell);
// A demo of an older build records itself in its state file only.
const pid = held ?? runningDemo(dataDir(), projectRoot(), shell);
if (held === null && pid !== null) releaseDemoLock(lock, shell);
if (pid !== null) {
  for (const l of wrapLine(`demo: ${anotherDemoRuns(pid)}`, terminalWidth(process.stderr))) console.error(l);
  process.exit(1);
}
