/**
 * Mocked activities for in-process workflow tests: every call is recorded with its input and
 * Temporal attempt, every input is checked against the rebuild it belongs to, and the steps a test
 * needs to hold (the plan, each page, each bucket repair) wait on gates the test opens. Failures are
 * scripted per page attempt, per bucket and per publish. Nothing here touches a database.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Activities } from '../../activities';
import type { PublishVersionInput, PublishVersionResult } from '../../workflows/activity-types';
import type { CopyPageResult, ReconcileSummary, RepairBucketResult } from '../../workflows/definitions';
import { waitFor } from './wait';

/** Names of the activities the workflows call. */
export type ActivityName = keyof Activities;

/** One recorded activity call. */
export interface ActivityCall {
  name: ActivityName;
  /** The input object, as the workflow sent it. */
  input: Record<string, unknown>;
  /** Temporal attempt number of this execution. */
  attempt: number;
  /** Activity id (`page-<n>` for pages). */
  activityId: string;
  /** Run of the workflow that scheduled it. */
  runId: string;
  /** How the call ended, once it ended: committed (returned), failed (threw) or cancelled. */
  outcome?: 'returned' | 'failed' | 'cancelled';
}

/** What a page attempt sees of itself, for {@link MockOptions.onPageStart}. */
export interface PageAttemptInfo {
  pageNo: number;
  attempt: number;
  workflowId: string;
  runId: string;
}

/** Behaviour of {@link MockActivities}. */
export interface MockOptions {
  /** Catalog and source of the rebuild: every input must name them. */
  catalog: string;
  source: string;
  /** Pages the plan returns. */
  pages: number;
  /** Version id the plan returns (default `'7'`); every later input must name it. */
  versionId?: string;
  /** Rows each committed page reports (default 10). */
  rowsPerPage?: number;
  /** Pages wait for {@link MockActivities.release} (default true); false: they commit at once. */
  holdPages?: boolean;
  /**
   * The plan waits for `release('plan')` (default false); `'past a cancel'`: a cancel does not end
   * the wait, as a real plan attempt runs on to its commit (`planCancelSeen` tells the test it came).
   */
  holdPlan?: boolean | 'past a cancel';
  /** A failure a plan attempt throws when it starts (undefined: it plans). */
  planFailure?: (attempt: number) => Error | undefined;
  /** Bucket repairs wait for `release('repair:<bucket>')` / `releaseRepairs()` (default false). */
  holdRepairs?: boolean;
  /** The publish waits for `release('publish')` (default false). */
  holdPublish?: boolean;
  /** A failure a page attempt throws when it starts instead of committing (undefined: it commits). */
  pageFailure?: (pageNo: number, attempt: number) => Error | undefined;
  /** Called when a page attempt starts, before it waits or fails (e.g. to report an operator pause). */
  onPageStart?: (info: PageAttemptInfo) => Promise<void> | void;
  /**
   * Called in the activity's context when a held page attempt is cancelled (by the workflow, the
   * worker's shutdown, or an operator's pause: see `Context.current().cancellationDetails`).
   */
  onPageCancelled?: (info: PageAttemptInfo) => Promise<void> | void;
  /** The reconcile summary of a round (default: every bucket matches); fields not given are filled in. */
  reconcile?: (round: number) => Partial<ReconcileSummary>;
  /** A failure a bucket's repair throws (undefined: it repairs). */
  repairFailure?: (bucket: string | null) => Error | undefined;
  /** The publish's answer or failure (default `{ previousVersionId: null }`). */
  publish?: (input: PublishVersionInput) => PublishVersionResult;
  /** Version ids retireVersions reports dropped (default none). */
  retired?: string[];
  /** A failure a retireVersions attempt throws (undefined: it retires). */
  retireFailure?: (attempt: number) => Error | undefined;
}

/**
 * Mocked activities of one rebuild, with call records, gates and concurrency counters.
 * `activities` is what `Worker.create` takes.
 */
export class MockActivities {
  /** Every call, in the order the worker started them. */
  readonly calls: ActivityCall[] = [];
  /** Inputs that did not name the rebuild's catalog, source or version, or a planned page. */
  readonly inputErrors: string[] = [];
  /** Pages whose attempt is running in the worker now. */
  readonly pagesRunning = new Set<number>();
  /** Most page attempts running at once. */
  maxPagesRunning = 0;
  /** Bucket repairs running now, and the most at once. */
  repairsRunning = 0;
  maxRepairsRunning = 0;
  /** A plan held `'past a cancel'` was told of a cancel (Temporal's cancellation reached it). */
  planCancelSeen = false;
  /** The activity functions. */
  readonly activities: Activities;
  readonly versionId: string;
  private readonly gates = new Map<string, () => void>();
  private readonly opened = new Set<string>();
  private holdPages: boolean;

  constructor(private readonly opts: MockOptions) {
    this.versionId = opts.versionId ?? '7';
    this.holdPages = opts.holdPages ?? true;
    this.activities = this.build();
  }

  /** Calls of activity `name`, in order. */
  callsOf(name: ActivityName): ActivityCall[] {
    return this.calls.filter((c) => c.name === name);
  }

  /**
   * Page numbers of the `copyPage` calls, ascending (a retried page once per attempt): pages the
   * workflow schedules together reach the worker in no set order.
   */
  pagesStarted(): number[] {
    return this.callsOf('copyPage')
      .map((c) => c.input.pageNo as number)
      .sort((a, b) => a - b);
  }

  /**
   * Lets a held step go on: `page:<n>` (or a page number), `plan`, `repair:<bucket>` (`none` for
   * jobs without a start time). A gate released before its step waits lets the step pass at once.
   */
  release(key: string | number): void {
    const k = typeof key === 'number' ? `page:${key}` : key;
    const go = this.gates.get(k);
    if (go) {
      this.gates.delete(k);
      go();
    } else this.opened.add(k);
  }

  /** Releases every held page; with `andLater`, pages started from now on commit at once too. */
  releasePages(andLater = false): void {
    if (andLater) this.holdPages = false;
    for (const k of [...this.gates.keys()]) if (k.startsWith('page:')) this.release(k);
  }

  /** Releases every held bucket repair. */
  releaseRepairs(): void {
    for (const k of [...this.gates.keys()]) if (k.startsWith('repair:')) this.release(k);
  }

  /** Keys of the steps waiting on their gate now (e.g. `page:3`). */
  held(): string[] {
    return [...this.gates.keys()].sort();
  }

  /**
   * Waits until activity `name` has been called at least `n` times (polling the records).
   * @returns the calls of `name`.
   */
  async waitForCalls(name: ActivityName, n: number): Promise<ActivityCall[]> {
    await waitFor(`${n} ${name} calls (have ${this.callsOf(name).length})`, () => this.callsOf(name).length >= n, {
      timeoutMs: 20_000,
      intervalMs: 10,
    });
    return this.callsOf(name);
  }

  /** Waits until `key` (as for {@link release}) is held. */
  async waitForHeld(key: string | number): Promise<void> {
    const k = typeof key === 'number' ? `page:${key}` : key;
    await waitFor(`${k} to be held (held: ${this.held().join(', ')})`, () => this.gates.has(k), {
      timeoutMs: 20_000,
      intervalMs: 10,
    });
  }

  /** Records a call of the current activity and checks that its input names this rebuild. */
  private record(name: ActivityName, input: object): ActivityCall {
    const info = Context.current().info;
    const call: ActivityCall = {
      name,
      input: input as Record<string, unknown>,
      attempt: info.attempt,
      activityId: info.activityId,
      runId: info.workflowExecution?.runId ?? '',
    };
    this.calls.push(call);
    this.check(call);
    return call;
  }

  private check(call: ActivityCall): void {
    const i = call.input;
    const wrong: string[] = [];
    if ('catalog' in i && i.catalog !== this.opts.catalog) wrong.push(`catalog ${String(i.catalog)}`);
    if ('source' in i && i.source !== this.opts.source) wrong.push(`source ${String(i.source)}`);
    // Operator events of a rebuild not yet planned carry no version.
    const unplannedEvent = call.name === 'recordEvent' && i.versionId === null;
    if (call.name !== 'planRebuild' && !unplannedEvent && 'versionId' in i && i.versionId !== this.versionId)
      wrong.push(`versionId ${String(i.versionId)}`);
    if (call.name === 'copyPage') {
      const p = i.pageNo as number;
      if (!Number.isInteger(p) || p < 1 || p > this.opts.pages) wrong.push(`pageNo ${p}`);
      if (call.activityId !== `page-${p}`) wrong.push(`activity id ${call.activityId}`);
    }
    if (wrong.length) {
      const msg = `${call.name}: unexpected input (${wrong.join(', ')}): ${JSON.stringify(i)}`;
      this.inputErrors.push(msg);
      throw ApplicationFailure.nonRetryable(msg, 'MOCK_INPUT');
    }
  }

  /** Waits on gate `key` (unless opened), heartbeating so that a cancellation reaches the activity. */
  private async gate(key: string, call: ActivityCall, pastCancel = false): Promise<void> {
    if (this.opened.delete(key)) return;
    const ctx = Context.current();
    const released = new Promise<void>((resolve) => this.gates.set(key, resolve));
    // Heartbeats on a timer carry a cancellation to the activity while it waits on its gate.
    ctx.heartbeat();
    const beat = setInterval(() => ctx.heartbeat(), 200);
    try {
      if (pastCancel) {
        ctx.cancelled.catch(() => (this.planCancelSeen = true));
        await released;
        return;
      }
      await Promise.race([released, ctx.cancelled]);
    } catch (err) {
      this.gates.delete(key);
      call.outcome = 'cancelled';
      throw err;
    } finally {
      clearInterval(beat);
    }
  }

  /** Runs `body` for `call`, recording how it ended. */
  private async ends<T>(call: ActivityCall, body: () => Promise<T>): Promise<T> {
    try {
      const r = await body();
      call.outcome = 'returned';
      return r;
    } catch (err) {
      call.outcome ??= 'failed';
      throw err;
    }
  }

  private async copyPage(input: Parameters<Activities['copyPage']>[0]): Promise<CopyPageResult> {
    const call = this.record('copyPage', input);
    const { pageNo } = input;
    this.pagesRunning.add(pageNo);
    this.maxPagesRunning = Math.max(this.maxPagesRunning, this.pagesRunning.size);
    try {
      return await this.ends(call, async () => {
        const attempt: PageAttemptInfo = {
          pageNo,
          attempt: call.attempt,
          workflowId: Context.current().info.workflowExecution?.workflowId ?? '',
          runId: call.runId,
        };
        await this.opts.onPageStart?.(attempt);
        const failure = this.opts.pageFailure?.(pageNo, call.attempt);
        if (failure) throw failure;
        if (this.holdPages) {
          try {
            await this.gate(`page:${pageNo}`, call);
          } catch (err) {
            if (call.outcome === 'cancelled') await this.opts.onPageCancelled?.(attempt);
            throw err;
          }
        }
        return {
          pageNo,
          rows: this.opts.rowsPerPage ?? 10,
          rejects: 0,
          checksum: `md5-${pageNo}`,
          attempt: call.attempt,
          activityAttempt: call.attempt,
          alreadyCommitted: false,
          durationMs: 5,
          previousFailure: call.attempt > 1 ? `attempt ${call.attempt - 1} failed` : null,
        };
      });
    } finally {
      this.pagesRunning.delete(pageNo);
    }
  }

  private async repairBucket(input: Parameters<Activities['repairBucket']>[0]): Promise<RepairBucketResult> {
    const call = this.record('repairBucket', input);
    this.repairsRunning++;
    this.maxRepairsRunning = Math.max(this.maxRepairsRunning, this.repairsRunning);
    try {
      return await this.ends(call, async () => {
        if (this.opts.holdRepairs) await this.gate(`repair:${input.bucket ?? 'none'}`, call);
        const failure = this.opts.repairFailure?.(input.bucket);
        if (failure) throw failure;
        return { bucket: input.bucket, upserted: 1, deleted: 0, ok: true };
      });
    } finally {
      this.repairsRunning--;
    }
  }

  private reconcileSummary(round: number): ReconcileSummary {
    const rows = this.opts.pages * (this.opts.rowsPerPage ?? 10);
    const given = this.opts.reconcile?.(round) ?? {};
    const mismatched = given.mismatched ?? [];
    return {
      round,
      ok: mismatched.length === 0,
      buckets: 3,
      sourceRows: rows,
      catalogRows: rows,
      rejects: 0,
      mismatched,
      delta: 0,
      duplicateJobNames: 0,
      sampleMismatches: 0,
      sampled: 5,
      ...given,
    };
  }

  private build(): Activities {
    const o = this.opts;
    const simple = <K extends ActivityName>(name: K, result: () => Awaited<ReturnType<Activities[K]>>) =>
      (async (input: object) => {
        const call = this.record(name, input);
        return this.ends(call, async () => result());
      }) as unknown as Activities[K];
    const acts: Partial<Activities> = {
      planRebuild: async (input) => {
        const call = this.record('planRebuild', input);
        return this.ends(call, async () => {
          const failure = o.planFailure?.(call.attempt);
          if (failure) throw failure;
          if (o.holdPlan) await this.gate('plan', call, o.holdPlan === 'past a cancel');
          return {
            versionId: this.versionId,
            pagesTotal: o.pages,
            pageSize: input.pageSize ?? 500,
            pageSizing: input.pageSize === undefined ? ('auto' as const) : ('fixed' as const),
            sourceRows: String(o.pages * (o.rowsPerPage ?? 10)),
            watermark: { jobKey: '999', time: '2026-11-01T00:00:00.000000Z' },
            timezone: 'UTC',
          };
        });
      },
      copyPage: (input) => this.copyPage(input),
      sealVersion: simple('sealVersion', () => ({ missingPages: [] })),
      indexVersion: simple('indexVersion', () => undefined),
      reconcile: async (input) => {
        const call = this.record('reconcile', input);
        return this.ends(call, async () => this.reconcileSummary(input.round));
      },
      repairBucket: (input) => this.repairBucket(input),
      publishVersion: async (input) => {
        const call = this.record('publishVersion', input);
        return this.ends(call, async () => {
          if (o.holdPublish) await this.gate('publish', call);
          return o.publish ? o.publish(input) : { previousVersionId: null };
        });
      },
      retireVersions: async (input) => {
        const call = this.record('retireVersions', input);
        return this.ends(call, async () => {
          const failure = o.retireFailure?.(call.attempt);
          if (failure) throw failure;
          return o.retired ?? [];
        });
      },
      endVersion: async (input) => {
        const call = this.record('endVersion', input);
        // Found by the rebuild's ids: the version, if a plan attempt returned it (committed).
        const planned = this.calls.some((c) => c.name === 'planRebuild' && c.outcome === 'returned');
        return this.ends(call, async () => input.versionId ?? (planned ? this.versionId : null));
      },
      recordEvent: simple('recordEvent', () => undefined),
      // As the worker's: through a Temporal client (here the activity context's, on the worker's connection).
      cancelRun: async (input) => {
        const call = this.record('cancelRun', input);
        return this.ends(call, async () => {
          await Context.current().client.workflow.getHandle(input.workflowId, input.runId).cancel();
        });
      },
    };
    return acts as Activities;
  }
}
