/** What the client reads from a rebuild's pending activities (`describe().raw.pendingActivities`). */
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';

/**
 * The page a pending copyPage activity works on: from its activity id `page-<n>`, else from
 * `pageNo` of its last heartbeat details (rebuilds started before readable ids).
 * @returns the page number, or null when neither tells.
 */
export function pendingActivityPage(a: temporal.api.workflow.v1.IPendingActivityInfo): number | null {
  const m = /^page-(\d+)$/.exec(a.activityId ?? '');
  if (m) return Number(m[1]);
  const payload = a.heartbeatDetails?.payloads?.[0];
  if (!payload) return null;
  try {
    const d = defaultPayloadConverter.fromPayload<{ pageNo?: unknown }>(payload);
    return typeof d?.pageNo === 'number' ? d.pageNo : null;
  } catch {
    return null;
  }
}
