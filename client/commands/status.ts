/**
 * `catalog-rebuild status`: a rebuild's progress from the workflow's `progress` query, else from
 * the catalog database; `--follow` shows it live until the rebuild ends.
 */
import type { Pool } from 'pg';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { RebuildProgress, TemporalSession } from '../index';
import { getProgress, rebuildHandle } from '../index';
import {
  catalogStatusFromDatabase,
  followStatus,
  formatProgress,
  livePollers,
  LIVE_POLLER_WINDOW_SECONDS,
} from '../status';
import type { CommandContext } from './context';
import { ExitCode, withCatalogPool, withTemporal } from './context';
import { rebuildOutcome } from './outcome';

/** Options of `status`. */
export interface StatusOptions {
  catalog: string;
  /** Print one JSON object. */
  json: boolean;
  /** Live progress until the rebuild ends. */
  follow: boolean;
  /** Warn when no page committed for this long (s). */
  stallAfter: number;
}

/** Milliseconds the `progress` query may take before the catalog database answers instead. */
const QUERY_TIMEOUT_MS = 5_000;

/**
 * Prints the rebuild's progress once (`--json`: one object with `answeredBy` `workflow` or
 * `database`), or follows it with `--follow`.
 * @returns 0; with `follow`, 0 when the rebuild was published, 1 otherwise.
 * @throws ExitCode 2 for `--follow` with `--json`; ExitCode 1 when the catalog has neither a
 *   workflow nor a version.
 */
export async function statusCommand(ctx: CommandContext, o: StatusOptions): Promise<number> {
  if (o.follow && o.json) throw new ExitCode(2, '--follow and --json cannot be combined');
  return withTemporal(ctx, (s) => (o.follow ? followCommand(ctx, s, o) : statusOnce(ctx, s, o)));
}

/** `status --follow`: live progress; the catalog database pool is opened only when needed. */
async function followCommand(ctx: CommandContext, s: TemporalSession, o: StatusOptions): Promise<number> {
  const handle = rebuildHandle(s.client, o.catalog);
  let pool: Pool | null = null;
  try {
    return await followStatus(
      {
        query: () => getProgress(handle, QUERY_TIMEOUT_MS),
        fromDatabase: () => {
          pool ??= ctx.catalogPool({ purpose: 'cli', max: 1 });
          return catalogStatusFromDatabase(pool, o.catalog);
        },
        pollers: async () => (await livePollers(s)).length,
        outcome: rebuildOutcome(s, o.catalog),
      },
      { catalog: o.catalog, taskQueue: s.taskQueue, out: ctx.out, tty: ctx.tty, stallAfterMs: o.stallAfter * 1000 },
    );
  } finally {
    await (pool as Pool | null)?.end().catch(() => undefined);
  }
}

/** `status` without `--follow`: the workflow's answer, else the catalog database's view. */
async function statusOnce(ctx: CommandContext, s: TemporalSession, o: StatusOptions): Promise<number> {
  const handle = rebuildHandle(s.client, o.catalog);
  const noPollers = `no worker polled task queue ${s.taskQueue} in the last ${LIVE_POLLER_WINDOW_SECONDS} s`;
  let progress: RebuildProgress | null = null;
  let note = '';
  let notFound = false;
  try {
    progress = await getProgress(handle, QUERY_TIMEOUT_MS);
  } catch (e) {
    note = (e as Error).message;
    notFound = e instanceof WorkflowNotFoundError || /workflow not found/i.test(note);
  }
  const workers = await livePollers(s)
    .then((p) => p.length)
    .catch(() => -1);
  if (progress) {
    if (o.json) ctx.out(JSON.stringify({ answeredBy: 'workflow', workersPolling: workers, ...progress }));
    else {
      ctx.out(formatProgress(progress));
      if (workers === 0) ctx.out(`warning: ${noPollers}`);
    }
    return 0;
  }
  const fromDb = await withCatalogPool(ctx, (pool) => catalogStatusFromDatabase(pool, o.catalog));
  if (notFound && !fromDb.latest) {
    throw new ExitCode(
      1,
      `no rebuild of catalog ${o.catalog} has been started (no workflow ${handle.workflowId}, no version in the catalog database); start one with: catalog-rebuild start --catalog ${o.catalog} --source NAME`,
    );
  }
  const why = notFound
    ? `no workflow ${handle.workflowId} on the Temporal service (its history may be past the namespace's retention); this is the catalog database's view of the latest version`
    : `no worker answered the progress query within 5 s (${note}); this is the catalog database's view of the latest version`;
  if (o.json) {
    ctx.out(
      JSON.stringify({ answeredBy: 'database', note: why, workersPolling: workers, queryError: note, ...fromDb }),
    );
  } else {
    ctx.out(`${why}:`);
    ctx.out(JSON.stringify(fromDb, null, 2));
    if (workers === 0) ctx.out(`warning: ${noPollers}`);
  }
  return 0;
}
