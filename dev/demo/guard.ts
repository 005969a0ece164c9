/**
 * `npm run demo`'s first step, run from the checkout's previous build before `npm run build`:
 * exits 1 naming the demo of this checkout that runs now, so a second demo refuses before its
 * build rewrites `dist/` under the running one (whose next worker would find its workflow bundle
 * older than the code). Exits 0 when none runs. A fresh clone has no build and no demo to guard.
 */
import { dataDir, projectRoot } from '../../lib/paths';
import { terminalWidth, wrapLine } from './lines';
import { anotherDemoRuns, runningDemo } from './state';

const pid = runningDemo(dataDir(), projectRoot());
if (pid !== null) {
  for (const l of wrapLine(`demo: ${anotherDemoRuns(pid)}`, terminalWidth(process.stderr))) console.error(l);
  process.exit(1);
}
