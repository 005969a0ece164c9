/**
 * The rebuild's workflow histories, read back for the bench: events per run and per child, and the
 * Temporal overhead around each completed page (dispatch and reaction times).
 */
import { defaultPayloadConverter } from '@temporalio/common';
import { tsToMs } from '@temporalio/common/lib/time';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { CopyPageResult } from '../../workflows/definitions';

/** History of one workflow run, with the facts the bench needs. */
export interface RunHistory {
  workflowType: string;
  workflowId: string;
  runId: string;
  events: number;
  nextRunId: string | null;
  children: { workflowId: string; runId: string }[];
  /** Per completed copyPage: Temporal overhead around the activity (ms). */
  dispatchMs: number[];
  reactionMs: number[];
  activityMs: number[];
}

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

/**
 * One run's history: its type, event count, continue-as-new successor, children, and per completed
 * copyPage the time from scheduled to completed minus the activity's own duration (dispatch) and
 * from completion to the next completed workflow task (reaction).
 */
async function runHistory(client: Client, workflowId: string, runId: string): Promise<RunHistory> {
  const h = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const events: HistoryEvent[] = h.events ?? [];
  const out: RunHistory = {
    workflowType: '',
    workflowId,
    runId,
    events: events.length,
    nextRunId: null,
    children: [],
    dispatchMs: [],
    reactionMs: [],
    activityMs: [],
  };
  const scheduled = new Map<string, { t: number; type: string }>();
  const wftCompleted: { id: number; t: number }[] = [];
  const completions: { id: number; t: number; scheduledAt: number; durationMs: number }[] = [];
  for (const e of events) {
    const id = Number(e.eventId);
    const t = tsToMs(e.eventTime);
    if (e.workflowExecutionStartedEventAttributes)
      out.workflowType = e.workflowExecutionStartedEventAttributes.workflowType?.name ?? '';
    if (e.workflowExecutionContinuedAsNewEventAttributes)
      out.nextRunId = e.workflowExecutionContinuedAsNewEventAttributes.newExecutionRunId ?? null;
    if (e.childWorkflowExecutionStartedEventAttributes?.workflowExecution) {
      const x = e.childWorkflowExecutionStartedEventAttributes.workflowExecution;
      out.children.push({ workflowId: x.workflowId!, runId: x.runId! });
    }
    if (e.workflowTaskCompletedEventAttributes) wftCompleted.push({ id, t });
    if (e.activityTaskScheduledEventAttributes)
      scheduled.set(String(id), { t, type: e.activityTaskScheduledEventAttributes.activityType?.name ?? '' });
    const done = e.activityTaskCompletedEventAttributes;
    if (done) {
      const s = scheduled.get(String(Number(done.scheduledEventId)));
      const payload = done.result?.payloads?.[0];
      if (s?.type === 'copyPage' && payload) {
        const r = defaultPayloadConverter.fromPayload<CopyPageResult>(payload);
        completions.push({ id, t, scheduledAt: s.t, durationMs: r.durationMs });
      }
    }
  }
  for (const c of completions) {
    out.activityMs.push(c.durationMs);
    out.dispatchMs.push(Math.max(0, c.t - c.scheduledAt - c.durationMs));
    const next = wftCompleted.find((w) => w.id > c.id);
    if (next) out.reactionMs.push(next.t - c.t);
  }
  return out;
}

/** Every run of the rebuild (following continue-as-new) and every run of its children. */
export async function allHistories(
  client: Client,
  workflowId: string,
  firstRunId: string,
): Promise<{ runs: RunHistory[]; children: RunHistory[] }> {
  const runs: RunHistory[] = [];
  const children: RunHistory[] = [];
  let runId: string | null = firstRunId;
  while (runId) {
    const r = await runHistory(client, workflowId, runId);
    runs.push(r);
    for (const c of r.children) children.push(await runHistory(client, c.workflowId, c.runId));
    runId = r.nextRunId;
  }
  return { runs, children };
}
