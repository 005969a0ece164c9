/**
 * The workflow bundle: the workflow code bundled once by `bundleWorkflowCode` (webpack), written at
 * build time to `dist/workflow-bundle.js` (`npm run build` runs `dist/worker/build-bundle.js`) so a
 * worker starts polling without bundling. The bundle's source map is inline, its source paths made
 * relative to the project ({@link normalizeBundle}), so the bundle, and the build id hashed from it,
 * are the same in any folder on any machine.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import { projectRoot } from '../lib/paths';
import { normalizeBundle } from './build-id';

/** Path of the prebuilt bundle: `dist/workflow-bundle.js` (this module runs from `dist/worker/`). */
export function workflowBundlePath(): string {
  return path.resolve(__dirname, '..', 'workflow-bundle.js');
}

/** Folder of the compiled workflow code the bundle is made from (`dist/workflows/`). */
const workflowsDir = (): string => path.dirname(require.resolve('../workflows'));

/**
 * Bundles compiled workflow code in this process (webpack: seconds of CPU) and normalizes its
 * source map's paths. Webpack names modules relative to its context, set to `root` (not the current
 * folder), and keeps linked folders under `root` (no symlink resolution), so the code is the same
 * whatever folder the bundle is made from.
 * @param workflowsPath the compiled workflows module (default this project's `dist/workflows`)
 * @param root the folder whose paths the source map names relative to it (default the project)
 */
export async function bundleWorkflows(
  workflowsPath = require.resolve('../workflows'),
  root = projectRoot(),
): Promise<string> {
  const { code } = await bundleWorkflowCode({
    workflowsPath,
    logger: new DefaultLogger('WARN'),
    webpackConfigHook: (config) => ({
      ...config,
      context: root,
      resolve: { ...config.resolve, symlinks: false },
    }),
  });
  return normalizeBundle(code, root);
}

/**
 * Writes the bundle to `file` (default {@link workflowBundlePath}) through a temporary file and a
 * rename, so a worker starting meanwhile reads the old bundle or the new one, never half of one.
 * @returns the path written and its size in bytes.
 */
export async function writeWorkflowBundle(file = workflowBundlePath()): Promise<{ file: string; bytes: number }> {
  const code = await bundleWorkflows();
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, code);
  fs.renameSync(tmp, file);
  return { file, bytes: Buffer.byteLength(code) };
}

/**
 * Why the prebuilt bundle cannot be used, or null when it can: it is missing, or older than a
 * compiled workflow file (the code was compiled again without the bundle step).
 */
export function staleBundleReason(file = workflowBundlePath()): string | null {
  if (!fs.existsSync(file)) return `no prebuilt workflow bundle at ${file}`;
  const built = fs.statSync(file).mtimeMs;
  const dir = workflowsDir();
  const newer = fs.readdirSync(dir).find((f) => f.endsWith('.js') && fs.statSync(path.join(dir, f)).mtimeMs > built);
  return newer ? `the prebuilt workflow bundle ${file} is older than ${path.join(dir, newer)}` : null;
}

/**
 * The workflow code a worker runs (give it to `Worker.create` as `{ code }`, and hash it for the
 * build id): the prebuilt file when it is current, otherwise the code bundled in this process,
 * announced by one line on `log`.
 */
export async function loadWorkflowBundle(log: (line: string) => void = console.log): Promise<string> {
  const reason = staleBundleReason();
  if (!reason) return fs.readFileSync(workflowBundlePath(), 'utf8');
  log(
    `catalog-rebuild worker ${process.pid}: ${reason} (npm run build writes it): bundling the workflow code in this process`,
  );
  return bundleWorkflows();
}
