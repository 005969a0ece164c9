// ESLint configuration. Besides a few correctness rules it guards the layout of the project:
// - workflows/ holds deterministic code only: no Node built-ins, no PostgreSQL driver (pg, pg-*), no
//   lib/, client/ or worker/ code, no activity implementations, nothing from other packages than
//   @temporalio/workflow and @temporalio/common (type-only imports of lib/, client/, worker/,
//   activities/ and other packages are fine: they vanish at compile time);
// - product folders (workflows/, activities/, worker/, client/, lib/) import neither dev/, test/ nor
//   scripts/, and use only `dependencies` of package.json; dev/, test/, scripts/ and configuration
//   files may also use `devDependencies`;
// - no import cycles, type-only imports written as `import type`, no promise left floating;
// - product files stay small enough to read: at most 400 lines a file, about 100 a function.
// Formatting is Prettier's (`.prettierrc.json`); eslint-config-prettier turns off every rule that
// could disagree with it. `npm run lint` runs both, `npm run lint:fix` applies both.
import { defineConfig } from 'eslint/config';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import prettierConfig from 'eslint-config-prettier';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

const root = path.dirname(fileURLToPath(import.meta.url));

/** Product folders: shipped and run by the worker and the CLI. */
const PRODUCT = ['workflows', 'activities', 'worker', 'client', 'lib'];
const productFiles = PRODUCT.map((dir) => `${dir}/**/*.{ts,js,mjs,cjs}`);

/** Escapes a module name for use inside a regular expression. */
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** Node built-in module names, both bare (`fs`, `fs/promises`) and prefixed (`node:fs`, `node:test`). */
const builtins = [...new Set(builtinModules.map((m) => m.replace(/^node:/, '')))];
const builtinAlternatives = builtins.map(escape).join('|');

/** Relative paths from a product folder into a development folder. */
const devFolderPattern = {
  regex: '^(?:\\.\\./)+(?:dev|test|scripts)(?:/.*)?$',
  caseSensitive: true,
  message:
    'product code (workflows/, activities/, worker/, client/, lib/) must not depend on development code: ' +
    'dev/, test/ and scripts/ are not part of the product. Move what both need into the product folder.',
};

const DETERMINISM = 'workflow code must be deterministic and runs bundled in the workflow sandbox';

/** What a file under workflows/ may not import, each with the reason. */
const workflowPatterns = [
  {
    regex: `^(?:node:.+|(?:${builtinAlternatives}))$`,
    caseSensitive: true,
    message:
      `${DETERMINISM}: Node built-in modules (files, network, clocks, processes) are not available there. ` +
      'Do the work in an activity and pass its result back.',
  },
  {
    regex: '^pg(?:-[^/]+)?(?:/.*)?$',
    caseSensitive: true,
    message:
      `${DETERMINISM}: the PostgreSQL driver (pg, pg-*) does I/O. ` +
      'Database work belongs in activities; the workflow calls them through proxyActivities.',
  },
  {
    regex: '^(?:\\.\\./)+(?:lib|client|worker)(?:/.*)?$',
    caseSensitive: true,
    allowTypeImports: true,
    message:
      `${DETERMINISM}: lib/, client/ and worker/ hold database, file and process code. ` +
      'Call it from an activity, or move pure helpers into workflows/ (`import type` is fine).',
  },
  {
    regex: '^(?:\\.\\./)+activities(?:/.*)?$',
    caseSensitive: true,
    allowTypeImports: true,
    message:
      `${DETERMINISM}: activity implementations must not run inside a workflow. ` +
      "Use `import type` and call them through proxyActivities<Activities>() from '@temporalio/workflow'.",
  },
  {
    // Any other package: only the Temporal workflow API and its common types are meant for workflow code.
    regex: `^(?![./]|node:|pg(?:-[^/]+)?(?:/|$)|@temporalio/(?:workflow|common)(?:/|$)|(?:${builtinAlternatives})(?:/|$))`,
    caseSensitive: true,
    allowTypeImports: true,
    message:
      `${DETERMINISM}: import only @temporalio/workflow, @temporalio/common and other files of workflows/ ` +
      '(`import type` from elsewhere is fine).',
  },
];

export default defineConfig(
  {
    ignores: ['dist/', 'node_modules/', '.tools/', '.data/', 'test/releases/', 'test/fixtures/', 'test-artifacts/'],
  },

  // Every JavaScript and TypeScript file: module resolution for the import-x rules.
  {
    files: ['**/*.{ts,js,mjs,cjs}'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js', '.mjs', '.cjs'],
      'import-x/external-module-folders': ['node_modules', 'node_modules/@types'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [
        createNodeResolver({ extensions: ['.ts', '.d.ts', '.js', '.mjs', '.cjs', '.json', '.node'] }),
      ],
    },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-self-import': 'error',
      'import-x/no-extraneous-dependencies': [
        'error',
        { devDependencies: true, optionalDependencies: false, peerDependencies: false },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
  },

  // TypeScript, with type information from tsconfig.json.
  {
    files: ['**/*.ts'],
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: { projectService: true, tsconfigRootDir: root },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's registration functions return promises that the runner itself awaits.
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['test', 'it', 'describe', 'suite', 'only', 'skip', 'todo'],
            },
          ],
        },
      ],
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { prefer: 'type-imports', fixStyle: 'separate-type-imports' },
      ],
    },
  },

  // Product folders: only `dependencies`, nothing from development folders; short files and functions.
  {
    files: productFiles,
    rules: {
      'max-lines': ['error', { max: 400 }],
      'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true, IIFEs: true }],
      'import-x/no-extraneous-dependencies': [
        'error',
        { devDependencies: false, optionalDependencies: false, peerDependencies: false },
      ],
    },
  },
  {
    files: PRODUCT.filter((dir) => dir !== 'workflows').map((dir) => `${dir}/**/*.ts`),
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: [devFolderPattern] }],
    },
  },

  // Workflow code: deterministic (the product-folder patterns repeated, since a later setting of a rule
  // replaces an earlier one).
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { patterns: [devFolderPattern, ...workflowPatterns] }],
    },
  },

  prettierConfig,
);
