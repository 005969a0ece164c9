/**
 * The default build id (`<package version>+<bundle hash>`, worker/build-id.ts): the workflow code
 * bundled in two other folders (different absolute paths, as on another machine or install path)
 * hashes to the build id of this checkout's prebuilt bundle; a changed workflow file gives another
 * id; the deployment name and build id come from the environment when set, and are checked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { projectRoot } from '../lib/paths';
import { bundleWorkflows, workflowBundlePath } from '../worker/bundle';
import { bundleHash, normalizeBundle, workerBuild } from '../worker/build-id';

/**
 * A copy of the workflow code (sources and compiled files) under `<tmp>/<name>/`, with this
 * checkout's node_modules linked in; returns the copy's root.
 */
function copyWorkflows(name: string): string {
  const root = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'catalog-rebuild-build-')), name);
  const src = projectRoot();
  for (const dir of ['workflows', path.join('dist', 'workflows')]) {
    fs.mkdirSync(path.join(root, dir), { recursive: true });
    for (const f of fs.readdirSync(path.join(src, dir)))
      fs.copyFileSync(path.join(src, dir, f), path.join(root, dir, f));
  }
  fs.symlinkSync(path.join(src, 'node_modules'), path.join(root, 'node_modules'));
  return root;
}

test('the bundle built in two other folders has the build id of this checkout; a changed workflow another', async () => {
  const here = fs.readFileSync(workflowBundlePath(), 'utf8');
  assert.ok(!here.includes(projectRoot()), 'the prebuilt bundle names no absolute path of this checkout');
  const [a, b] = [copyWorkflows('catalog-rebuild'), copyWorkflows('elsewhere-with-a-longer-name')];
  try {
    const [codeA, codeB] = [
      await bundleWorkflows(path.join(a, 'dist', 'workflows', 'index.js'), a),
      await bundleWorkflows(path.join(b, 'dist', 'workflows', 'index.js'), b),
    ];
    assert.ok(!codeA.includes(a) && !codeB.includes(b), 'no absolute path in the bundles');
    assert.equal(bundleHash(codeA), bundleHash(here), 'folder a: same build id as this checkout');
    assert.equal(bundleHash(codeB), bundleHash(here), 'folder b: same build id as this checkout');

    // A change to the workflow code (here: one more exported constant) is another build.
    fs.appendFileSync(path.join(b, 'dist', 'workflows', 'names.js'), '\nexports.ANOTHER_BUILD = 1;\n');
    const changed = await bundleWorkflows(path.join(b, 'dist', 'workflows', 'index.js'), b);
    assert.notEqual(bundleHash(changed), bundleHash(here));
  } finally {
    for (const root of [a, b]) fs.rmSync(path.dirname(root), { recursive: true, force: true });
  }
});

test('normalizeBundle makes source paths relative to the project or to node_modules; other code is kept', () => {
  const map = { version: 3, sources: ['/srv/x/workflows/a.ts', '/opt/y/node_modules/@temporalio/workflow/lib/b.js'] };
  const code = `var a = 1;\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}`;
  const out = normalizeBundle(code, '/srv/x');
  const m = /base64,(.+)\n$/.exec(out)!;
  assert.deepEqual(JSON.parse(Buffer.from(m[1], 'base64').toString()).sources, [
    'workflows/a.ts',
    'node_modules/@temporalio/workflow/lib/b.js',
  ]);
  assert.ok(out.startsWith('var a = 1;\n'));
  assert.equal(normalizeBundle('var a = 1;', '/srv/x'), 'var a = 1;');
});

test('deployment name and build id: defaults, the environment, and refused values', () => {
  assert.deepEqual(workerBuild({}, 'code', '0.1.0'), {
    deploymentName: 'catalog-rebuild',
    buildId: `0.1.0+${bundleHash('code')}`,
  });
  assert.deepEqual(
    workerBuild({ CATALOG_REBUILD_DEPLOYMENT: 'backup-catalogs', CATALOG_REBUILD_BUILD_ID: 'b2' }, 'code', '0.1.0'),
    { deploymentName: 'backup-catalogs', buildId: 'b2' },
  );
  assert.throws(
    () => workerBuild({ CATALOG_REBUILD_BUILD_ID: 'a:b' }, 'code', '0.1.0'),
    /CATALOG_REBUILD_BUILD_ID must be/,
  );
  assert.throws(
    () => workerBuild({ CATALOG_REBUILD_DEPLOYMENT: 'a/b' }, 'code', '0.1.0'),
    /CATALOG_REBUILD_DEPLOYMENT must be/,
  );
});
