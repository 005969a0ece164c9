/**
 * Typed client library over @temporalio/client for catalog-rebuild. The CLI is a thin layer over it.
 *
 * @example
 * const { client, close } = await connectTemporal();
 * const { handle } = await startRebuild(client, { catalog: 'main', source: 'director' });
 * console.log(await getProgress(handle));
 * const result = await waitForResult(handle);
 * await close();
 */
import { randomUUID } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import { CancelledFailure, Client, Connection, WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type {
  RebuildCatalogInput,
  RebuildCatalogResult,
  RebuildProgress,
  ThrottleSettings,
} from '../workflows/definitions';
import { cancelSignal, pauseSignal, progressQuery, resumeSignal, setThrottleUpdate } from '../workflows/definitions';
import { rebuildWorkflowId } from '../workflows/names';
import { CatalogNameKey, RebuildPhaseKey } from '../workflows/search-attributes';
import { taskQueue as defaultTaskQueue } from '../lib/config';
import { liveWindowSeconds } from './status';
import { cancelledOutcomeOf, listPollers } from './temporal-facts';

export * from '../workflows/definitions';
export { rebuildWorkflowId } from '../workflows/names';

/** A connected Temporal client and a function that closes its connection. */
export interface TemporalSession {
  client: Client;
  connection: Connection;
  namespace: string;
  taskQueue: string;
  close(): Promise<void>;
}

/**
 * Connects to Temporal with the `@temporalio/envconfig` conventions (TEMPORAL_ADDRESS default
 * localhost:7233, TEMPORAL_NAMESPACE default `default`, TEMPORAL_API_KEY, TLS variables, config profiles).
 * @throws the connection error when the service is unreachable.
 */
export async function connectTemporal(env: NodeJS.ProcessEnv = process.env): Promise<TemporalSession> {
  const { connectionOptions, namespace } = loadClientConnectConfig({ overrideEnvVars: env as Record<string, string> });
  const connection = await Connection.connect({ ...connectionOptions, connectTimeout: '10s' } as Parameters<
    typeof Connection.connect
  >[0]);
  const ns = namespace ?? 'default';
  const client = new Client({ connection, namespace: ns });
  return { client, connection, namespace: ns, taskQueue: defaultTaskQueue(env), close: () => connection.close() };
}

/**
 * Flags that identify a rebuild; `start` with different ones on a running rebuild is refused.
 * `pageSize` is the number given, or `auto` without one (the plan sizes pages), so an omitted page
 * size attaches to a running auto-sized rebuild. `files` is `start --files`.
 */
const IDENTITY_FLAGS = ['source', 'pageSize', 'concurrency', 'allowShrink', 'files', 'refresh', 'verify'] as const;

/** The identifying flags of a rebuild, as `startRebuild` records them in the workflow's memo. */
export interface RebuildFlags {
  source: string;
  /** `--page-size`, or `auto` without one. */
  pageSize: number | 'auto';
  concurrency: number;
  allowShrink: boolean;
  /** `--files`. */
  files: boolean;
  /** `--refresh`. */
  refresh: boolean;
  /** `--verify full`, else `stored` (the rebuild's own verification). */
  verify: 'full' | 'stored';
}

/** The identifying flags of `input` (defaults filled in: page size `auto`, concurrency 4, booleans false). */
export function rebuildFlags(input: RebuildCatalogInput): RebuildFlags {
  return {
    source: input.source,
    pageSize: input.pageSize ?? 'auto',
    concurrency: input.concurrency ?? 4,
    allowShrink: !!input.allowShrink,
    files: !!input.files,
    refresh: !!input.refresh,
    verify: input.verify === 'full' ? 'full' : 'stored',
  };
}

/**
 * The identifying flags in which `requested` differs from the running rebuild's memo flags, as
 * `name: running X, requested Y` (JSON values). A flag the running rebuild did not record is not
 * compared, except `files`: a rebuild started by a release without `--files` has none (false).
 */
export function flagConflicts(running: Record<string, unknown>, requested: RebuildFlags): string[] {
  const known: Record<string, unknown> = { files: false, refresh: false, verify: 'stored', ...running };
  return IDENTITY_FLAGS.filter((k) => known[k] !== undefined && known[k] !== requested[k]).map(
    (k) => `${k}: running ${JSON.stringify(known[k])}, requested ${JSON.stringify(requested[k])}`,
  );
}

/** Result of `startRebuild`. */
export interface StartResult {
  handle: WorkflowHandle;
  /** True when a rebuild of this catalog was already running and this call attached to it. */
  attached: boolean;
  /** Flags that differ from the running rebuild's (only when attached). */
  conflicts: string[];
}

/**
 * Starts `RebuildCatalog` for a catalog with workflow id `catalog-rebuild/<catalog>`, or attaches to
 * the running one (conflict policy use-existing); a finished rebuild does not block a new one.
 * Sets the static summary and the CatalogName / RebuildPhase search attributes.
 * `opts.startToken` (default a random UUID) is recorded in the memo: a second call with the same
 * token (a retried activity of the `ScheduledRefresh` launcher) finds the rebuild it started itself
 * (`attached: false`). `opts.startedBy` is appended to the static summary (e.g. `schedule catalog-rebuild/C`).
 */
export async function startRebuild(
  client: Client,
  input: RebuildCatalogInput,
  opts: { taskQueue?: string; startToken?: string; startedBy?: string } = {},
): Promise<StartResult> {
  const token = opts.startToken ?? randomUUID();
  const flags = rebuildFlags(input);
  const pageSizeText = input.pageSize === undefined ? 'jobs sized by the plan' : `${input.pageSize} jobs`;
  const handle = await client.workflow.start('RebuildCatalog', {
    taskQueue: opts.taskQueue ?? defaultTaskQueue(),
    workflowId: rebuildWorkflowId(input.catalog),
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    memo: { startToken: token, flags },
    staticSummary: `Rebuild catalog ${input.catalog} from source ${input.source}${flags.files ? ' with files' : ''}, ${pageSizeText} per page${opts.startedBy ? `, started by ${opts.startedBy}` : ''}`,
    staticDetails: `catalog: ${input.catalog}\nsource: ${input.source}\nfiles: ${flags.files}\npage size: ${pageSizeText}\nconcurrency: ${flags.concurrency}\nallow shrink: ${flags.allowShrink}`,
    typedSearchAttributes: [
      { key: CatalogNameKey, value: input.catalog },
      { key: RebuildPhaseKey, value: 'planning' },
    ],
  });
  const desc = await handle.describe();
  const memo = (desc.memo ?? {}) as { startToken?: string; flags?: Record<string, unknown> };
  if (memo.startToken === token) return { handle, attached: false, conflicts: [] };
  return { handle, attached: true, conflicts: flagConflicts(memo.flags ?? {}, flags) };
}

/**
 * Whether the run of `handle` is being cancelled: its history holds the `cancel` signal or a
 * Temporal cancellation request (the run then abandons its version and ends; a `start` meanwhile
 * would attach to a rebuild about to end). Reads the run's history (one call per page of events).
 */
export async function beingCancelled(handle: WorkflowHandle): Promise<boolean> {
  const history = await handle.fetchHistory();
  return (history.events ?? []).some(
    (e) =>
      e.workflowExecutionCancelRequestedEventAttributes != null ||
      e.workflowExecutionSignaledEventAttributes?.signalName === cancelSignal.name,
  );
}

/** Handle of a catalog's rebuild (the latest run). */
export function rebuildHandle(client: Client, catalog: string): WorkflowHandle {
  return client.workflow.getHandle(rebuildWorkflowId(catalog));
}

/**
 * The server's refusal of a query while another query already waits for the same workflow's task
 * (it buffers one per workflow: `status --follow`, the Web UI and `temporal workflow query` side by
 * side meet it). Transient: asking again a moment later is answered.
 */
export const QUERY_BUFFER_FULL = /consistent query buffer is full/;

/**
 * Queries `progress`. A query the server refuses with {@link QUERY_BUFFER_FULL} is asked again
 * every 200 ms. Rejects after `timeoutMs` (default 5,000 ms) when no worker answers.
 */
export async function getProgress(handle: WorkflowHandle, timeoutMs = 5_000): Promise<RebuildProgress> {
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new Error(`no worker answered the progress query within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  const ask = async (): Promise<RebuildProgress> => {
    for (;;) {
      try {
        return await handle.query(progressQuery);
      } catch (err) {
        if (timedOut || !QUERY_BUFFER_FULL.test(String((err as Error).message))) throw err;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  };
  try {
    return await Promise.race([ask(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Signals `pause`: no new page starts; pages in flight finish. */
export async function pause(handle: WorkflowHandle): Promise<void> {
  await handle.signal(pauseSignal);
}

/** Signals `resume`: pages continue from the checkpoint. */
export async function resume(handle: WorkflowHandle): Promise<void> {
  await handle.signal(resumeSignal);
}

/** Signals `cancel`: the version becomes abandoned; the active version is untouched. */
export async function cancel(handle: WorkflowHandle, reason?: string): Promise<void> {
  await handle.signal(cancelSignal, reason ? { reason } : undefined);
}

/**
 * Runs the `setThrottle` update; the workflow's validator rejects out-of-range values.
 * @returns the settings in force after the update.
 */
export async function setThrottle(
  handle: WorkflowHandle,
  settings: ThrottleSettings,
): Promise<Required<ThrottleSettings>> {
  return handle.executeUpdate(setThrottleUpdate, { args: [settings] });
}

/**
 * Waits for the rebuild to end (following continue-as-new). A rebuild that ended CANCELLED (the
 * `cancel` signal, or a Temporal cancellation request) answers with the result it left in its memo:
 * `cancelled` true, its abandoned version and pages done.
 * @throws WorkflowFailedError when the rebuild failed (e.g. not publishable), was terminated or timed
 *   out, or was cancelled without a result in its memo (a run of an earlier build).
 */
export async function waitForResult(handle: WorkflowHandle): Promise<RebuildCatalogResult> {
  try {
    return (await handle.result()) as RebuildCatalogResult;
  } catch (err) {
    if (!(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure)) throw err;
    // The latest run of the id: the cancelled one, unless a new rebuild has started since.
    const desc = await handle.describe();
    const outcome = desc.status.name === 'CANCELLED' ? cancelledOutcomeOf(desc.memo) : null;
    if (!outcome) throw err;
    return outcome;
  }
}

/**
 * Workers polling the task queue now: identities seen by the server within the last
 * liveWindowSeconds() (75 s; a killed worker stays in the server's poller list for minutes;
 * a live idle one refreshes its entry about once a minute).
 */
export async function workersPolling(session: TemporalSession): Promise<number> {
  const seen = await listPollers(session, session.taskQueue);
  const since = Date.now() - liveWindowSeconds() * 1000;
  return new Set(seen.filter((p) => p.lastPollAtMs === null || p.lastPollAtMs >= since).map((p) => p.identity)).size;
}

export { WorkflowNotFoundError };
