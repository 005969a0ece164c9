/**
 * The lint rules that guard the layout (eslint.config.mjs): a file under workflows/ may not import Node
 * built-ins, the PostgreSQL driver, lib/ or activity implementations (type-only imports are fine), and
 * product folders may import neither development folders nor devDependencies. Each case lints a probe
 * text with the project's own configuration, under a path that does not exist on disk, so type-aware
 * rules (which need the file in the TypeScript project) are switched off for the probes. No PostgreSQL,
 * no Temporal.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { projectRoot } from '../lib/paths';

const root = projectRoot();
const eslint = new ESLint({
  cwd: root,
  overrideConfig: [{ ...tseslint.configs.disableTypeChecked, files: ['**/*.ts'] }],
});

const RESTRICTED = '@typescript-eslint/no-restricted-imports';

/** Lints `code` as if it were the file `relPath` of the project; returns the restricted-import messages. */
async function restrictedImports(relPath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, relPath) });
  const fatal = result.messages.filter((m) => m.fatal);
  assert.deepEqual(fatal, [], `${relPath} must parse`);
  return result.messages.filter((m) => m.ruleId === RESTRICTED).map((m) => m.message);
}

/** Lints `code` as `relPath`; returns every message as `rule: text`. */
async function allMessages(relPath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, relPath) });
  return result.messages.map((m) => `${m.ruleId ?? 'fatal'}: ${m.message}`);
}

const PROBE = 'workflows/lint-probe.ts';

const forbidden: Array<[string, string]> = [
  ['node:fs', "import * as fs from 'node:fs';\nexport const probe = fs;\n"],
  ['fs', "import * as fs from 'fs';\nexport const probe = fs;\n"],
  ['node:crypto', "import { randomUUID } from 'node:crypto';\nexport const probe = randomUUID;\n"],
  ['pg', "import { Pool } from 'pg';\nexport const probe = Pool;\n"],
  ['pg-format', "import format from 'pg-format';\nexport const probe = format;\n"],
  ['../lib/config', "import { x } from '../lib/config';\nexport const probe = x;\n"],
  ['../activities', "import { createActivities } from '../activities';\nexport const probe = createActivities;\n"],
];

for (const [name, code] of forbidden) {
  test(`a workflow file may not import ${name}`, async () => {
    const messages = await restrictedImports(PROBE, code);
    assert.equal(messages.length, 1, `one restricted-import error for ${name}: ${JSON.stringify(messages)}`);
    assert.ok(messages[0].includes(`'${name}'`), `the message names the import: ${messages[0]}`);
    assert.match(messages[0], /workflow code must be deterministic/);
  });
}

const allowed: Array<[string, string]> = [
  [
    'import type from ../activities',
    "import type { Activities } from '../activities';\nexport type Probe = Activities;\n",
  ],
  [
    '@temporalio/workflow',
    "import { proxyActivities } from '@temporalio/workflow';\nexport const probe = proxyActivities;\n",
  ],
  [
    '@temporalio/common',
    "import { ApplicationFailure } from '@temporalio/common';\nexport const probe = ApplicationFailure;\n",
  ],
  ['another workflow file', "import { LIMITS } from './policies';\nexport const probe = LIMITS;\n"],
];

for (const [what, code] of allowed) {
  test(`a workflow file may import ${what}`, async () => {
    assert.deepEqual(await restrictedImports(PROBE, code), []);
  });
}

test('product folders may not import development folders; dev folders may', async () => {
  const code = "import { startWorker } from '../test/helpers/harness';\nexport const probe = startWorker;\n";
  for (const dir of ['workflows', 'activities', 'worker', 'client', 'lib']) {
    const messages = await restrictedImports(`${dir}/lint-probe.ts`, code);
    assert.equal(messages.length, 1, `${dir}: ${JSON.stringify(messages)}`);
    assert.match(messages[0], /'\.\.\/test\/helpers\/harness'.*must not depend on development code/);
  }
  assert.deepEqual(await restrictedImports('scripts/lint-probe.ts', code), []);
});

test('product folders use only dependencies; tests may use devDependencies', async () => {
  const code = "import { chromium } from 'playwright-core';\nexport const probe = chromium;\n";
  const product = await allMessages('client/lint-probe.ts', code);
  assert.ok(
    product.some((m) => m.startsWith('import-x/no-extraneous-dependencies:') && m.includes("'playwright-core'")),
    JSON.stringify(product),
  );
  assert.deepEqual(await allMessages('test/lint-probe.ts', code), []);
});

test('the workflow files of the tree break no import rule', async () => {
  const results = await eslint.lintFiles(['workflows/**/*.ts']);
  assert.ok(results.length > 0, 'workflows/ has files');
  const broken = results.flatMap((r) =>
    r.messages
      .filter((m) => m.fatal || m.ruleId === RESTRICTED || m.ruleId?.startsWith('import-x/'))
      .map((m) => `${path.relative(root, r.filePath)}:${m.line} ${m.ruleId ?? 'fatal'}: ${m.message}`),
  );
  assert.deepEqual(broken, []);
});
