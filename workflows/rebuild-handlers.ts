/**
 * Handlers of the rebuild's messages: `pause` stops scheduling pages, `resume` continues from the
 * checkpoint, `cancel` cancels the rebuild's scope, `pageActivityPaused` / `pageActivityResumed`
 * (sent by page activities an operator paused with `temporal activity pause`, and by their next
 * attempt) hold and release the page window, `progress` answers from the state, `setThrottle`
 * changes the page window (validated by {@link validateThrottle}) and returns the settings in force.
 * Every operator action (pause, resume, cancel, throttle) is recorded in the catalog's event log,
 * and pause and resume in the memo. Deterministic: workflow code.
 */
import { setHandler } from '@temporalio/workflow';
import type { PageActivityReport } from './definitions';
import {
  cancelSignal,
  pageActivityPausedSignal,
  pageActivityResumedSignal,
  pauseSignal,
  progressQuery,
  resumeSignal,
  setThrottleUpdate,
} from './definitions';
import type { RebuildState } from './rebuild-state';
import { validateThrottle } from './validation';

/** Sets the handlers of `state`'s run; call once at the start of every run. */
export function setRebuildHandlers(state: RebuildState): void {
  const st = state.carried;
  setHandler(pauseSignal, async () => {
    if (st.paused) return;
    st.paused = true;
    st.pauseChangedAt = new Date().toISOString();
    state.note('paused by signal');
    state.memo();
    state.details();
    state.wake++;
    await state.operatorEvent('paused', `paused by signal at checkpoint ${st.checkpoint}`);
  });
  setHandler(resumeSignal, async () => {
    if (!st.paused) return;
    st.paused = false;
    st.pauseChangedAt = new Date().toISOString();
    state.note(`resumed by signal at checkpoint ${st.checkpoint}`);
    state.memo();
    state.details();
    state.wake++;
    await state.operatorEvent('resumed', `resumed by signal at checkpoint ${st.checkpoint}`);
  });
  setHandler(cancelSignal, async (arg) => {
    if (state.cancelRequested) return;
    state.cancelRequested = true;
    const reason = arg?.reason ? `: ${arg.reason}` : '';
    state.note(
      state.phase === 'publishing' || state.phase === 'done'
        ? `cancel requested${reason}: too late, the rebuild is ${state.phase === 'done' ? 'published' : 'publishing'} and publishes`
        : `cancel requested${reason}`,
    );
    state.root.cancel();
    await state.operatorEvent('cancel_requested', `cancel requested by signal${reason}`, {
      reason: arg?.reason ?? null,
    });
  });
  setHandler(pageActivityPausedSignal, (r: PageActivityReport) => {
    if (!state.pageOperatorPaused(r.pageNo)) return;
    state.note(
      `page ${r.pageNo} paused by an operator (temporal activity pause; attempt ${r.attempt} on ${r.workerIdentity}): no new page starts until it is unpaused`,
    );
    state.details();
    state.wake++;
  });
  setHandler(pageActivityResumedSignal, (r: PageActivityReport) => {
    if (!state.pageOperatorResumed(r.pageNo)) return;
    state.note(`page ${r.pageNo} runs again (attempt ${r.attempt} on ${r.workerIdentity}) after an operator pause`);
    state.details();
    state.wake++;
  });
  setHandler(progressQuery, () => state.progress());
  setHandler(
    setThrottleUpdate,
    async (s) => {
      if (s.concurrency !== undefined) st.concurrency = s.concurrency;
      if (s.pauseBetweenPagesMs !== undefined) st.pauseBetweenPagesMs = s.pauseBetweenPagesMs;
      const message = `throttle set: ${st.concurrency} pages in flight, ${st.pauseBetweenPagesMs} ms between pages`;
      state.note(message);
      state.wake++;
      const settings = { concurrency: st.concurrency, pauseBetweenPagesMs: st.pauseBetweenPagesMs };
      await state.operatorEvent('throttled', message, settings);
      return settings;
    },
    { validator: validateThrottle },
  );
}
