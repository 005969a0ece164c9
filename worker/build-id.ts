/**
 * The worker's Worker Deployment Version: deployment name `CATALOG_REBUILD_DEPLOYMENT` (default
 * `catalog-rebuild`) and build id `CATALOG_REBUILD_BUILD_ID` (default `<package version>+<first 12
 * hex digits of the sha256 of the workflow bundle>`). The bundle's inline source map names its
 * sources by absolute path; {@link normalizeBundle} rewrites them relative to the project (or to
 * `node_modules/`), so the same commit has the same build id on any machine and install path, with or
 * without `.git`, and two different bundles never share one.
 */
import { createHash } from 'node:crypto';
import { ConfigError } from '../lib/errors';

/** Default deployment name of the workers (`CATALOG_REBUILD_DEPLOYMENT`). */
export const DEFAULT_DEPLOYMENT_NAME = 'catalog-rebuild';

/** The Worker Deployment Version a worker polls as. */
export interface WorkerBuild {
  /** Worker Deployment name. */
  deploymentName: string;
  /** Build id within the deployment. */
  buildId: string;
}

const SOURCE_MAP = /\/\/# sourceMappingURL=data:application\/json;charset=utf-8;base64,([A-Za-z0-9+/=]+)\s*$/;

/**
 * `code` (a workflow bundle with an inline source map) with each source path of the map made
 * relative: a path under `root` becomes `<path below root>`, any other path holding `/node_modules/`
 * becomes `node_modules/<rest>`. Code without an inline source map is returned as it is.
 * @param root the project folder the bundle was made in (absolute).
 */
export function normalizeBundle(code: string, root: string): string {
  const m = SOURCE_MAP.exec(code);
  if (!m) return code;
  const map = JSON.parse(Buffer.from(m[1], 'base64').toString('utf8')) as {
    file?: string;
    sources?: string[];
    sourcesContent?: (string | null)[];
  };
  const prefix = root.endsWith('/') ? root : `${root}/`;
  map.sources = (map.sources ?? []).map((s) => {
    if (s.startsWith(prefix)) return s.slice(prefix.length);
    const i = s.lastIndexOf('/node_modules/');
    return i >= 0 ? s.slice(i + 1) : s;
  });
  // The bundler's own entry module names the workflows by absolute path, and the map's file name
  // carries a hash of it.
  if (map.sourcesContent) map.sourcesContent = map.sourcesContent.map((c) => c?.split(prefix).join('') ?? c);
  if (map.file) map.file = 'workflow-bundle.js';
  const encoded = Buffer.from(JSON.stringify(map), 'utf8').toString('base64');
  return `${code.slice(0, m.index)}//# sourceMappingURL=data:application/json;charset=utf-8;base64,${encoded}\n`;
}

/**
 * The first 12 hex digits of the sha256 of a workflow bundle's code in a canonical form: its inline
 * source map left out (the map's column offsets follow the absolute path in the bundler's entry
 * module, while the code names every module relative to the project, worker/bundle.ts), and its
 * modules in the order of their ids. Webpack keys its modules object by id, so their order changes
 * nothing that runs, but it can follow how the folders were laid out when the bundle was made.
 */
export function bundleHash(code: string | Buffer): string {
  const text = typeof code === 'string' ? code : code.toString('utf8');
  const m = SOURCE_MAP.exec(text);
  return createHash('sha256')
    .update(canonicalModules(m ? text.slice(0, m.index) : text))
    .digest('hex')
    .slice(0, 12);
}

/** A webpack module's first line in a bundle: `/***\/ "<module id>"`. */
const MODULE_START = /^\/\*\*\*\/ "/;
/** The line that closes webpack's modules object. */
const MODULES_END = /^\/\*{6}\/ \t\}\);?$/;

/**
 * `code` with the blocks of its modules object sorted by their first line (the module id); code
 * without such blocks is returned as it is.
 */
function canonicalModules(code: string): string {
  const lines = code.split('\n');
  const starts = lines.flatMap((l, i) => (MODULE_START.test(l) ? [i] : []));
  if (!starts.length) return code;
  const last = starts[starts.length - 1];
  const endAt = lines.findIndex((l, i) => i > last && MODULES_END.test(l));
  const end = endAt < 0 ? lines.length : endAt;
  const blocks = starts.map((s, k) => lines.slice(s, k + 1 < starts.length ? starts[k + 1] : end).join('\n'));
  blocks.sort((a, b) => (a.slice(0, a.indexOf('\n')) < b.slice(0, b.indexOf('\n')) ? -1 : 1));
  return [...lines.slice(0, starts[0]), ...blocks, ...lines.slice(end)].join('\n');
}

/**
 * This worker's deployment version: `CATALOG_REBUILD_DEPLOYMENT` / `CATALOG_REBUILD_BUILD_ID` when
 * set, else `catalog-rebuild` and `<version>+<bundle hash>`.
 * @param bundle the normalized workflow bundle the worker runs.
 * @param version the package version (package.json).
 * @throws ConfigError when a set name or id holds characters other than letters, digits and `_ . + - ~`
 *   (Temporal joins them as `<deployment>:<build id>`; a `:` or `/` would make that ambiguous).
 */
export function workerBuild(env: NodeJS.ProcessEnv, bundle: string | Buffer, version: string): WorkerBuild {
  const deploymentName = env.CATALOG_REBUILD_DEPLOYMENT || DEFAULT_DEPLOYMENT_NAME;
  const buildId = env.CATALOG_REBUILD_BUILD_ID || `${version}+${bundleHash(bundle)}`;
  for (const [name, value] of [
    ['CATALOG_REBUILD_DEPLOYMENT', deploymentName],
    ['CATALOG_REBUILD_BUILD_ID', buildId],
  ] as const) {
    if (!/^[A-Za-z0-9_.+~-]{1,200}$/.test(value))
      throw new ConfigError(`${name} must be 1 to 200 letters, digits or _ . + - ~, got ${JSON.stringify(value)}`);
  }
  return { deploymentName, buildId };
}
