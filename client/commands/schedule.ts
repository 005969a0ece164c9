/**
 * `catalog-rebuild schedule`: scheduled refreshes of a catalog on a Temporal Schedule
 * (client/schedule.ts). `--catalog C --source S (--every D | --cron C) [--files]` creates or updates
 * the schedule `catalog-rebuild/<catalog>`; `--list` lists every catalog's schedule; `--describe`
 * shows one schedule's next runs and recent results; `--delete` removes it.
 */
import { formatDuration } from '../check';
import type { ScheduleListEntry, ScheduleView } from '../schedule';
import {
  cadenceText,
  deleteSchedule,
  describeSchedule,
  listSchedules,
  ScheduleRequest,
  upsertSchedule,
} from '../schedule';
import { recentWorkerSourceNames } from '../../lib/catalog';
import type { CommandContext } from './context';
import { ExitCode, withTemporal } from './context';
import { startCheckSettings } from './start';

/** Options of `schedule`, as commander parsed them. */
export interface ScheduleCommandOptions {
  catalog?: string;
  source?: string;
  /** `--every` as given (e.g. `1h`). */
  every?: string;
  /** `--cron` as given (e.g. `0 2 * * *`). */
  cron?: string;
  files?: boolean;
  list?: boolean;
  describe?: boolean;
  delete?: boolean;
  /** `--describe`, `--list`: print JSON. */
  json?: boolean;
}

const iso = (ms: number | null): string => (ms === null ? '-' : new Date(ms).toISOString());

/** The lines of `schedule --describe`. */
export function formatScheduleView(v: ScheduleView): string[] {
  const lines = [
    `schedule ${v.scheduleId}: ${v.summary || `refresh of catalog ${v.catalog} from source ${v.input.source}`}`,
    `state: ${v.paused ? `paused${v.note ? ` (${v.note})` : ''}` : 'active'}`,
    `task queue: ${v.taskQueue}; overlap: ${v.overlap.toLowerCase()}; catch-up window: ${formatDuration(Math.round(v.catchupWindowMs / 1000))}; runs skipped while one ran: ${v.skippedOverlap}; missed beyond the catch-up window: ${v.missedCatchup}`,
    `next runs: ${v.nextRunsMs.length ? v.nextRunsMs.slice(0, 3).map(iso).join(', ') : 'none'}`,
  ];
  if (!v.recent.length) lines.push('recent runs: none yet');
  else {
    lines.push('recent runs (oldest first):');
    for (const r of v.recent) {
      const result =
        r.status === 'COMPLETED' ? `${r.outcome}: ${r.message}` : r.message ? `${r.status}: ${r.message}` : r.status;
      lines.push(`  ${iso(r.takenAtMs)} ${r.workflowId} ${result.replace(/\s+/g, ' ')}`);
    }
  }
  if (v.running.length) lines.push(`running: ${v.running.join(', ')}`);
  return lines;
}

/** The lines of `schedule --list`. */
export function formatScheduleList(entries: ScheduleListEntry[]): string[] {
  if (!entries.length) return ['no scheduled refreshes'];
  return entries.map(
    (e) => `${e.scheduleId} ${e.paused ? 'paused' : 'active'} next ${iso(e.nextRunMs)} last ${iso(e.lastRunMs)}`,
  );
}

/** The one mode of `o`, or a usage error. */
function modeOf(o: ScheduleCommandOptions): 'list' | 'describe' | 'delete' | 'upsert' {
  const modes = (['list', 'describe', 'delete'] as const).filter((m) => o[m]);
  if (modes.length > 1) throw new ExitCode(2, `give only one of --${modes.join(', --')}`);
  const mode: ReturnType<typeof modeOf> = modes.length ? modes[0] : 'upsert';
  if (mode !== 'list' && !o.catalog)
    throw new ExitCode(2, mode === 'upsert' ? 'schedule needs --catalog' : `schedule --${mode} needs --catalog`);
  return mode;
}

/** The validated request of a create or update. @throws ExitCode 2 naming what is wrong. */
function requestOf(o: ScheduleCommandOptions): ScheduleRequest {
  const parsed = ScheduleRequest.safeParse({
    catalog: o.catalog,
    source: o.source ?? '',
    every: o.every,
    cron: o.cron,
    files: !!o.files,
  });
  if (!parsed.success) throw new ExitCode(2, parsed.error.issues.map((i) => i.message).join('; '));
  return parsed.data;
}

/**
 * The source names the workers of `taskQueue` recorded recently (as `start` reads them); null when
 * the catalog database cannot tell (not configured, unreachable, schema before migration 3).
 */
async function servedSources(ctx: CommandContext, taskQueue: string): Promise<string[] | null> {
  let pool;
  try {
    pool = ctx.catalogPool({ purpose: 'cli', max: 1 });
    const names = await recentWorkerSourceNames(pool, taskQueue, startCheckSettings().recordMaxAgeMs / 1000);
    return [...new Set(names)].sort();
  } catch {
    return null;
  } finally {
    await pool?.end().catch(() => undefined);
  }
}

/**
 * Refuses a source that no worker of the task queue serves while some worker records others (as
 * `start` does: a schedule of a misspelt source would fail every run).
 * @throws ExitCode 2 naming the sources served.
 */
async function checkSource(ctx: CommandContext, source: string, taskQueue: string): Promise<void> {
  const names = await servedSources(ctx, taskQueue);
  if (names?.length && !names.includes(source))
    throw new ExitCode(
      2,
      `unknown source "${source}"; the workers of task queue ${taskQueue} serve: ${names.join(', ')}`,
    );
}

/**
 * Runs `schedule` in its mode and prints the result.
 * @returns 0.
 * @throws ExitCode 2 for a usage error (modes combined, no catalog, no source, not exactly one of
 *   --every and --cron, a bad duration) or a source no worker of the task queue serves while the
 *   workers record others (a source is not checked when no worker recorded any); ExitCode 1 when the catalog has no schedule (describe,
 *   delete) or Temporal refuses the spec.
 */
export async function scheduleCommand(ctx: CommandContext, o: ScheduleCommandOptions): Promise<number> {
  const mode = modeOf(o);
  const request = mode === 'upsert' ? requestOf(o) : null;
  return withTemporal(ctx, async (s) => {
    const catalog = o.catalog!;
    if (mode === 'list') {
      const entries = await listSchedules(s.client);
      for (const line of o.json ? [JSON.stringify(entries)] : formatScheduleList(entries)) ctx.out(line);
      return 0;
    }
    if (mode === 'describe') {
      const v = await describeSchedule(s.client, catalog);
      if (!v) throw new ExitCode(1, `catalog ${catalog} has no schedule`);
      for (const line of o.json ? [JSON.stringify(v)] : formatScheduleView(v)) ctx.out(line);
      return 0;
    }
    if (mode === 'delete') {
      const d = await deleteSchedule(s.client, catalog);
      if (!d) throw new ExitCode(1, `catalog ${catalog} has no schedule`);
      ctx.out(`deleted schedule catalog-rebuild/${catalog}`);
      for (const id of d.cancelledLaunchers)
        ctx.out(`cancelled ${id}; the refresh it waited for keeps running as catalog-rebuild/${catalog}`);
      return 0;
    }
    await checkSource(ctx, request!.source, s.taskQueue);
    let created: boolean;
    try {
      created = await upsertSchedule(s.client, request!, s.taskQueue);
    } catch (err) {
      throw new ExitCode(1, `Temporal refused the schedule: ${(err as Error).message}`);
    }
    const v = await describeSchedule(s.client, catalog);
    ctx.out(
      `${created ? 'created' : 'updated'} schedule catalog-rebuild/${catalog}: refresh of catalog ${catalog} from source ${request!.source}${request!.files ? ' with files' : ''} ${cadenceText(request!)} (task queue ${s.taskQueue})${v?.paused ? '; the schedule is paused' : ''}`,
    );
    ctx.out(`next runs: ${v?.nextRunsMs.length ? v.nextRunsMs.slice(0, 3).map(iso).join(', ') : 'none'}`);
    return 0;
  });
}
