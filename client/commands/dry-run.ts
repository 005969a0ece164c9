/**
 * `start --dry-run`: what a rebuild (or with `--refresh`, a refresh) of the catalog would do now,
 * planned on a worker by the `DryRunCatalog` workflow (workflow id
 * `catalog-rebuild/<catalog>/dry-run-<id>`: it never starts or attaches to the catalog's rebuild, and
 * it runs while one does). Nothing changes: no version, no staged listing, no event. Exit 0.
 */
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import type { DryRunInput, DryRunResult } from '../../workflows/definitions';
import { dryRunWorkflowId } from '../../workflows/names';
import type { TemporalSession } from '../index';
import { deepestMessage } from '../temporal-facts';
import { ExitCode } from './context';
import { watchForPoller } from './start-watch';

/** How long the dry run may take before the CLI gives up waiting (ms); the workflow ends by itself. */
export const DRY_RUN_TIMEOUT_MS = 15 * 60_000;

/**
 * Runs `DryRunCatalog` on the task queue of `s` and returns its plan. When its workflow task waits
 * `wait.noPollerMs` with no worker taking it (no worker polls the task queue: a worker that served
 * the source died since it last recorded it), `wait.note` is told so; when it still waits
 * `wait.dryRunNoWorkerMs` after its start, the dry run is ended (it changes nothing) and the command fails
 * saying so, instead of waiting for a worker.
 * @throws ExitCode 1 when no worker took the dry run, or when it failed (`dry run of catalog C
 *   failed, nothing changed: <the innermost cause>`, e.g. the source database's error).
 */
export async function runDryRun(
  s: TemporalSession,
  input: DryRunInput,
  wait: { noPollerMs: number; pollMs: number; dryRunNoWorkerMs: number; note?: (line: string) => void },
): Promise<DryRunResult> {
  const started = Date.now();
  const handle = await s.client.workflow.start('DryRunCatalog', {
    taskQueue: s.taskQueue,
    workflowId: dryRunWorkflowId(input.catalog, randomUUID().slice(0, 8)),
    args: [input],
    workflowExecutionTimeout: DRY_RUN_TIMEOUT_MS,
  });
  const result = handle.result().then(
    (r) => ({ r: r as DryRunResult }),
    (err: unknown) => {
      if (!(err instanceof WorkflowFailedError)) throw err;
      throw new ExitCode(1, `dry run of catalog ${input.catalog} failed, nothing changed: ${deepestMessage(err)}`);
    },
  );
  const stop = new AbortController();
  const noWorker = `no worker polls task queue ${s.taskQueue}`;
  try {
    const first = await Promise.race([
      result,
      watchForPoller(handle, {
        taskQueue: s.taskQueue,
        settings: wait,
        signal: stop.signal,
        activities: false,
        note: () =>
          wait.note?.(
            `${noWorker}: the dry run waits for one (a worker that served the source may have died); start one with \`npm run worker\``,
          ),
      }),
    ]);
    if (first) return first.r;
    const giveUp = Math.max(wait.dryRunNoWorkerMs, wait.noPollerMs) - (Date.now() - started);
    const second = await Promise.race([
      result,
      new Promise<null>((r) => setTimeout(() => r(null), Math.max(0, giveUp))),
    ]);
    if (second) return second.r;
  } finally {
    stop.abort();
  }
  await handle.terminate('no worker polls the task queue: the dry run changes nothing and is ended').catch(() => {});
  throw new ExitCode(
    1,
    `${noWorker}: the dry run's workflow task waited ${Math.round((Date.now() - started) / 1000)} s and no worker took it ` +
      `(a worker that served the source may have died); it was ended, nothing changed. Start one with \`npm run worker\` ` +
      `(CATALOG_REBUILD_TASK_QUEUE=${s.taskQueue}) and run the dry run again`,
  );
}

/** `1,234` */
const n = (x: number) => x.toLocaleString('en-US');

/** The dry run's plan as lines for people. */
export function formatDryRun(r: DryRunResult): string[] {
  const c = r.jobs;
  const what = r.refresh
    ? `a refresh of version ${r.activeVersionId}: ${n(c.new)} new, ${n(c.changed)} changed, ${n(c.gone)} gone jobs; ${n(r.rows)} jobs read from the source in ${n(r.pages)} pages`
    : `a full rebuild${r.fullRebuildBecause ? ` (a refresh would be one: ${r.fullRebuildBecause})` : ''}: ${n(r.rows)} jobs in ${n(r.pages)} pages`;
  const lines = [`dry run of catalog ${r.catalog} from source ${r.source} (it changes nothing):`, `  ${what}`];
  if (r.fileRecords.copy || r.fileRecords.drop)
    lines.push(
      `  file records: ${n(r.fileRecords.copy)} to copy, ${n(r.fileRecords.drop)} of the active version replaced`,
    );
  lines.push(
    `  watermark job ${r.watermark.jobKey ?? 'none'} at ${r.watermark.time}; about ${n(r.estimateSeconds)} s to copy; active version ${r.activeVersionId ?? 'none'}`,
  );
  return lines;
}
