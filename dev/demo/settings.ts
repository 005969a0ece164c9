/** Fixed settings of `npm run demo`, and its command-line options. */
import { Command, InvalidArgumentError } from 'commander';
import { LIMITS } from '../../workflows/definitions';

/**
 * Fixed settings of the demo. Its names on shared servers (databases, catalog, task queue, Worker
 * Deployment) belong to the checkout: see identity.ts.
 */
export const DEMO = {
  grpcPort: 7233,
  uiPort: 8233,
  /** Zone of the generated director's wall clock, written into the demo's configuration as the source's `timezone`. */
  timezone: 'UTC',
  seed: 1,
  /** Share of the pages after which the first worker is killed. */
  killAt: 0.3,
  pollMs: 500,
} as const;

/** Commander parser for an integer option value from `min` to `max`. */
function intAtLeast(min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`must be an integer from ${min} to ${max}.`);
    }
    return n;
  };
}

/** The demo's options. */
export interface DemoOptions {
  jobs: number;
  pageSize: number;
  /** Page heartbeat timeout of the rebuild (ms): how long the killed worker's pages wait to be retried. */
  heartbeatTimeoutMs: number;
  /** Rebuild file records too (`start --files`). */
  files: boolean;
  /** File records of the generated source, with `files`. */
  fileRows: number;
  /** gRPC port of the Temporal dev server on 127.0.0.1 the demo uses, or starts when nothing listens (default 7233). */
  temporalPort: number;
  /** Web UI port on 127.0.0.1 of that dev server (default 8233): where it is started, and the links the demo prints. */
  temporalUiPort: number;
}

/** The demo's options from the command line (prints the error and help, and exits 1, on a usage error). */
export function parseOptions(): DemoOptions {
  const program = new Command('demo')
    .description('Rebuild a 200,000-job Bareos catalog on a local Temporal dev server, killing a worker on the way.')
    .option('--jobs <n>', 'jobs in the generated source', intAtLeast(1, 10_000_000), 200_000)
    .option('--page-size <n>', 'jobs per page', intAtLeast(LIMITS.pageSize.min, LIMITS.pageSize.max), 2_000)
    .option(
      '--heartbeat-timeout-ms <n>',
      "the rebuild's page heartbeat timeout: the killed worker's pages are retried after it",
      intAtLeast(LIMITS.heartbeatTimeoutMs.min, LIMITS.heartbeatTimeoutMs.max),
      LIMITS.heartbeatTimeoutMs.default,
    )
    .option('--files', 'generate file records (File/Path) too and rebuild with start --files', false)
    .option(
      '--file-rows <n>',
      'file records of the generated source, with --files',
      intAtLeast(0, 2_000_000_000),
      1_000_000,
    )
    .option(
      '--temporal-port <n>',
      'gRPC port on 127.0.0.1 of the Temporal dev server to use (started there when nothing listens)',
      intAtLeast(1, 65_535),
      DEMO.grpcPort,
    )
    .option(
      '--temporal-ui-port <n>',
      'Web UI port on 127.0.0.1 of that dev server (where it is started, and the links printed)',
      intAtLeast(1, 65_535),
      DEMO.uiPort,
    )
    .showHelpAfterError();
  program.parse(process.argv);
  return program.opts<DemoOptions>();
}
