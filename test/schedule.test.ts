/**
 * Scheduled refreshes (`catalog-rebuild schedule`) on a private Temporal dev server with real worker
 * processes and PostgreSQL, driven through the CLI and `temporal schedule`:
 * - a schedule triggered with `temporal schedule trigger` runs a refresh under `catalog-rebuild/<catalog>`
 *   that publishes; a second trigger while it runs starts nothing (overlap skip: no second launcher,
 *   the same rebuild run); a manual `start --refresh` attaches to the scheduled refresh, one with
 *   other flags is refused;
 * - `check --rebuild` is OK with `last_refresh_age_seconds` (the worker's gauge
 *   `catalog_rebuild_last_refresh_age_seconds` agrees), WARNING while the schedule is paused
 *   (`temporal schedule toggle --pause`), CRITICAL after a failed scheduled refresh, even once a
 *   manual rebuild published;
 * - `schedule --delete` leaves no schedule and no running launcher behind;
 * - a scheduled run meeting a manual rebuild with other flags is skipped with an event, not failed;
 * - with no worker at the scheduled time the launcher starts and waits, a later run is skipped, and
 *   the worker that comes refreshes once.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Client } from '@temporalio/client';
import type { ScheduledRefreshResult } from '../workflows/schedule-definitions';
import type { RebuildFixture } from '../dev/harness/fixture';
import { rebuildFixture } from '../dev/harness/fixture';
import { freePort } from '../dev/env/dev-server';
import { privateTemporal, runCliAsync } from '../dev/harness/harness';
import { waitFor } from '../dev/harness/wait';

let temporal: Awaited<ReturnType<typeof privateTemporal>>;
before(async () => {
  temporal = await privateTemporal();
});
after(async () => {
  await temporal?.stop();
  if (temporal?.dir) fs.rmSync(temporal.dir, { recursive: true, force: true });
});

/** Runs the Temporal CLI against the test server; its output. */
function temporalCli(args: string[]): string {
  const r = spawnSync(temporal.cli, [...args, '--address', temporal.address], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, `temporal ${args.join(' ')}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** Runs the CLI; exit code and output. */
async function cli(fx: RebuildFixture, args: string[]) {
  const r = await runCliAsync(args, fx.env, { timeoutMs: 120_000 });
  return { code: r.code, stdout: r.stdout, text: `${r.stdout}\n${r.stderr}` };
}

/** `check --rebuild`: exit code and its one status line. */
async function check(fx: RebuildFixture) {
  const r = await cli(fx, ['check', '--catalog', fx.catalog, '--rebuild']);
  const line = r.stdout.trim();
  assert.equal(line.split('\n').length, 1, r.text);
  return { code: r.code, line };
}

/** A fixture whose worker holds the first attempt of page 1 of every rebuild until released, and knows source `ghost`. */
async function heldFixture(t: Parameters<typeof rebuildFixture>[0], tag: string) {
  const dir = fs.mkdtempSync(path.join(temporal.dir, 'hold-'));
  const heldFile = path.join(dir, 'held');
  const releaseFile = `${heldFile}.release`;
  const metricsPort = await freePort();
  const fx = await rebuildFixture(t, {
    address: temporal.address,
    tag,
    jobs: 400,
    seed: 23,
    workerEnv: {
      CATALOG_REBUILD_FAULTS: JSON.stringify({ holdAfterRead: { pageNo: 1, attempt: 1, heldFile, releaseFile } }),
      CATALOG_REBUILD_METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
      CATALOG_REBUILD_METRICS_REFRESH_MS: '300',
    },
  });
  // A source whose database does not exist: a rebuild from it fails at the plan.
  const config = JSON.parse(fs.readFileSync(fx.env.CATALOG_REBUILD_CONFIG!, 'utf8'));
  config.sources.ghost = {
    kind: 'bareos',
    databaseUrl: fx.dbs.sourceUrl.replace(/\/[^/?]+(\?|$)/, '/crt_no_such_db$1'),
  };
  fs.writeFileSync(fx.env.CATALOG_REBUILD_CONFIG!, JSON.stringify(config));
  await fx.spawn();
  return { fx, heldFile, metricsPort, release: () => fs.writeFileSync(releaseFile, '') };
}

/** Value of a catalog's series of a Prometheus metric of the worker, or null when absent. */
async function metric(port: number, name: string, catalog: string): Promise<number | null> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = new RegExp(`^${name}\\{[^}]*catalog="${catalog}"[^}]*\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

/**
 * A daily cron expression (UTC) 12 hours from now: the schedule never fires on its own while a test
 * runs, so only `temporal schedule trigger` starts runs (an `--every 1h` schedule fires at each hour
 * boundary, and one inside a test adds a run or an overlap skip).
 */
function quietCron(): string {
  const at = new Date(Date.now() + 12 * 3600_000);
  return `${at.getUTCMinutes()} ${at.getUTCHours()} * * *`;
}
/** `cron "<expression>"` as the CLI prints it, as a regular expression source. */
const cronText = (cron: string) => `cron "${cron.replaceAll('*', '\\*')}"`;

/** The schedule's description (Temporal's own). */
const describeSchedule = (client: Client, catalog: string) =>
  client.schedule.getHandle(`catalog-rebuild/${catalog}`).describe();

/** The launcher of the schedule's newest run, once it has closed: its status and result or failure. */
async function newestLauncher(client: Client, catalog: string, runs: number) {
  const d = await waitFor(`${runs} run(s) of the schedule`, async () => {
    const x = await describeSchedule(client, catalog);
    return x.info.recentActions.length >= runs && x;
  });
  const { workflowId, firstExecutionRunId } = d.info.recentActions.at(-1)!.action.workflow;
  const handle = client.workflow.getHandle(workflowId, firstExecutionRunId);
  const settled = await handle.result().then(
    (r: ScheduledRefreshResult) => ({ result: r, error: null }),
    (e: Error) => ({ result: null, error: e }),
  );
  return { workflowId, ...settled, status: (await handle.describe()).status.name };
}

test('trigger → one refresh under catalog-rebuild/<catalog>; second trigger skipped; paused WARNING; failed CRITICAL; delete leaves nothing', async (t) => {
  const { fx, heldFile, metricsPort, release } = await heldFixture(t, 'sched');
  /** `temporal …` with its command and output in the test's diagnostics. */
  const shown = (args: string[]) => t.diagnostic(`$ temporal ${args.join(' ')}\n${temporalCli(args).trim()}`);
  const { client, catalog } = fx;
  const id = `catalog-rebuild/${catalog}`;

  const cron = quietCron();
  const unknown = await cli(fx, ['schedule', '--catalog', catalog, '--source', 'nosuch', '--every', '1h']);
  assert.equal(unknown.code, 2, unknown.text);
  assert.match(unknown.text, /unknown source "nosuch"; the workers of task queue \S+ serve: director, ghost/);
  const created = await cli(fx, ['schedule', '--catalog', catalog, '--source', 'director', '--cron', cron]);
  assert.equal(created.code, 0, created.text);
  t.diagnostic(created.stdout.trim());
  assert.match(
    created.stdout,
    new RegExp(`^created schedule ${id}: refresh of catalog ${catalog} from source director ${cronText(cron)}`),
  );
  const listed = await waitFor('the schedule in schedule --list', async () => {
    const r = await cli(fx, ['schedule', '--list']);
    return r.stdout.includes(id) && r;
  });
  t.diagnostic(listed.stdout.trim());

  // The first trigger: the launcher starts the refresh under the catalog's one id; page 1 is held.
  shown(['schedule', 'trigger', '--schedule-id', id]);
  await waitFor('the scheduled refresh holding page 1', () => fs.existsSync(heldFile), { timeoutMs: 60_000 });
  const rebuild = await client.workflow.getHandle(id).describe();
  assert.equal(rebuild.status.name, 'RUNNING');
  assert.equal(rebuild.type, 'RebuildCatalog');
  assert.deepEqual((rebuild.memo as { flags: { refresh: boolean } }).flags.refresh, true);

  // A second trigger while it runs starts nothing new.
  shown(['schedule', 'trigger', '--schedule-id', id]);
  const skipped = await waitFor('the second trigger skipped for overlap', async () => {
    const d = await describeSchedule(client, catalog);
    return d.info.numActionsSkippedOverlap >= 1 && d;
  });
  assert.equal(skipped.info.recentActions.length, 1, 'one launcher only');
  assert.equal(skipped.info.numActionsSkippedOverlap, 1);
  assert.equal((await client.workflow.getHandle(id).describe()).runId, rebuild.runId, 'the same rebuild run');
  // Manual starts meet the scheduled refresh as any running rebuild: same flags attach, others are refused.
  const attach = await cli(fx, ['start', '--catalog', catalog, '--source', 'director', '--refresh']);
  assert.equal(attach.code, 0, attach.text);
  assert.match(attach.stdout, new RegExp(`^attached to running rebuild ${id}`));
  const other = await cli(fx, ['start', '--catalog', catalog, '--source', 'director', '--page-size', '50']);
  assert.equal(other.code, 1, other.text);
  assert.match(
    other.text,
    /already running with different flags: pageSize: running "auto", requested 50; refresh: running true, requested false/,
  );

  release();
  const first = await newestLauncher(client, catalog, 1);
  assert.equal(first.status, 'COMPLETED', String(first.error));
  assert.equal(first.result?.outcome, 'published');
  assert.match(first.workflowId, new RegExp(`^${id}/scheduled-`));
  const active = await fx.dbs.catalogPool.query<{ v: string }>(
    `SELECT version_id::text AS v FROM active WHERE catalog_name = $1`,
    [catalog],
  );
  assert.equal(active.rows[0]?.v, first.result?.versionId, 'the scheduled refresh published the active version');
  const described = await cli(fx, ['schedule', '--catalog', catalog, '--describe']);
  assert.equal(described.code, 0, described.text);
  t.diagnostic(described.stdout.trim());
  assert.match(described.stdout, /runs skipped while one ran: 1/);
  assert.match(
    described.stdout,
    new RegExp(`${first.workflowId} published: published version ${first.result?.versionId}`),
  );

  const ok = await check(fx);
  t.diagnostic(ok.line);
  assert.equal(ok.code, 0, ok.line);
  assert.match(
    ok.line,
    /^REBUILD OK - .*; schedule catalog-rebuild\/\S+: newest scheduled refresh published, last successful refresh \d+s ago \| .* last_refresh_age_seconds=\d+$/,
  );
  // The worker exports the same age (from the launcher's scheduled_refresh_done event).
  const checkAge = Number(/last_refresh_age_seconds=(\d+)$/.exec(ok.line)![1]);
  const gauge = await waitFor('the refresh age gauge', () =>
    metric(metricsPort, 'catalog_rebuild_last_refresh_age_seconds', catalog),
  );
  assert.ok(Math.abs(gauge - checkAge) <= 3, `gauge ${gauge} s, check ${checkAge} s`);

  // Paused for director maintenance: WARNING, naming the reason.
  shown(['schedule', 'toggle', '--schedule-id', id, '--pause', '--reason', 'director maintenance']);
  const paused = await check(fx);
  t.diagnostic(paused.line);
  assert.equal(paused.code, 1, paused.line);
  assert.match(paused.line, /^REBUILD WARNING - .*schedule is paused \(director maintenance\)/);
  shown(['schedule', 'toggle', '--schedule-id', id, '--unpause', '--reason', 'maintenance done']);

  // A scheduled refresh that fails: CRITICAL, and still so once a manual rebuild published.
  const updated = await cli(fx, ['schedule', '--catalog', catalog, '--source', 'ghost', '--cron', cron]);
  assert.equal(updated.code, 0, updated.text);
  assert.match(
    updated.stdout,
    new RegExp(`^updated schedule ${id}: refresh of catalog ${catalog} from source ghost ${cronText(cron)}`),
  );
  shown(['schedule', 'trigger', '--schedule-id', id]);
  const failed = await newestLauncher(client, catalog, 2);
  assert.equal(failed.status, 'FAILED');
  assert.match(
    String((failed.error?.cause as Error | undefined)?.message),
    new RegExp(`^rebuild ${id} failed: .*crt_no_such_db`),
  );
  const critical = await check(fx);
  t.diagnostic(critical.line);
  assert.equal(critical.code, 2, critical.line);
  assert.match(critical.line, /newest scheduled refresh \S+ failed: .*crt_no_such_db/);
  const manual = await cli(fx, ['start', '--catalog', catalog, '--source', 'director', '--refresh', '--wait']);
  assert.equal(manual.code, 0, manual.text);
  const stillCritical = await check(fx);
  t.diagnostic(stillCritical.line);
  assert.equal(stillCritical.code, 2, stillCritical.line);
  assert.match(
    stillCritical.line,
    /^REBUILD CRITICAL - (rebuild of \S+ published|refresh of \S+ found nothing changed).*; schedule .*failed/,
  );

  // Delete: no schedule, no running launcher.
  const deleted = await cli(fx, ['schedule', '--catalog', catalog, '--delete']);
  assert.equal(deleted.code, 0, deleted.text);
  t.diagnostic(deleted.stdout.trim());
  const gone = await cli(fx, ['schedule', '--catalog', catalog, '--describe']);
  assert.equal(gone.code, 1, gone.text);
  assert.match(gone.text, new RegExp(`catalog ${catalog} has no schedule`));
  await waitFor('the schedule gone from schedule --list and temporal schedule list', async () => {
    const r = await cli(fx, ['schedule', '--list']);
    return !r.stdout.includes(id) && !temporalCli(['schedule', 'list']).includes(id);
  });
  const launchers = await client.workflow.count(`WorkflowType = 'ScheduledRefresh' AND ExecutionStatus = 'Running'`);
  assert.equal(launchers.count, 0, 'no launcher runs');
});

test('a scheduled run that meets a manual rebuild with other flags is skipped with an event, not failed', async (t) => {
  const { fx, heldFile, release } = await heldFixture(t, 'schedskip');
  const { client, catalog } = fx;
  const id = `catalog-rebuild/${catalog}`;
  const manual = await fx.start({ pageSize: 100 });
  await waitFor('the manual rebuild holding page 1', () => fs.existsSync(heldFile), { timeoutMs: 60_000 });
  const manualRunId = (await manual.describe()).runId;
  const cron = quietCron();
  const created = await cli(fx, ['schedule', '--catalog', catalog, '--source', 'director', '--cron', cron]);
  assert.equal(created.code, 0, created.text);
  assert.match(created.stdout, new RegExp(cronText(cron)));
  temporalCli(['schedule', 'trigger', '--schedule-id', id]);
  const run = await newestLauncher(client, catalog, 1);
  assert.equal(run.status, 'COMPLETED', String(run.error));
  assert.equal(run.result?.outcome, 'skipped');
  assert.match(
    run.result!.message,
    /a rebuild of \S+ with other flags is running \(pageSize: running 100, requested "auto"; refresh: running false, requested true\)/,
  );
  const events = await fx.dbs.catalogPool.query<{ message: string }>(
    `SELECT message FROM event WHERE catalog_name = $1 AND kind = 'scheduled_refresh_skipped'`,
    [catalog],
  );
  assert.equal(events.rowCount, 1);
  assert.equal((await client.workflow.getHandle(id).describe()).runId, manualRunId);
  release();
  assert.equal((await fx.result(manual)).published, true, 'the manual rebuild went on and published');
  const described = await cli(fx, ['schedule', '--catalog', catalog, '--describe']);
  t.diagnostic(described.stdout.trim());
  assert.match(described.stdout, /skipped: scheduled refresh skipped/);
  assert.equal((await cli(fx, ['schedule', '--catalog', catalog, '--delete'])).code, 0);
});

test('no worker at the scheduled time: the launcher starts on time and waits, later runs are skipped, a worker then refreshes once', async (t) => {
  const fx = await rebuildFixture(t, { address: temporal.address, tag: 'schednow', jobs: 300, seed: 29 });
  const { client, catalog } = fx;
  const id = `catalog-rebuild/${catalog}`;
  const created = await cli(fx, ['schedule', '--catalog', catalog, '--source', 'director', '--cron', quietCron()]);
  assert.equal(created.code, 0, created.text);
  temporalCli(['schedule', 'trigger', '--schedule-id', id]);
  const waiting = await waitFor('the launcher running without a worker', async () => {
    const d = await describeSchedule(client, catalog);
    return d.info.runningActions.length === 1 && d;
  });
  temporalCli(['schedule', 'trigger', '--schedule-id', id]);
  await waitFor(
    'the second run skipped',
    async () => (await describeSchedule(client, catalog)).info.numActionsSkippedOverlap === 1,
  );
  assert.equal((await describeSchedule(client, catalog)).info.recentActions.length, 1);
  const launcherId = waiting.info.runningActions[0].workflow.workflowId;
  const launcher = await client.workflow.getHandle(launcherId).describe();
  assert.equal(launcher.status.name, 'RUNNING', 'the launcher waits in the task queue');
  await fx.spawn();
  const run = await newestLauncher(client, catalog, 1);
  assert.equal(run.status, 'COMPLETED', String(run.error));
  assert.equal(run.result?.outcome, 'published');
  assert.equal(run.workflowId, launcherId);
  assert.equal((await cli(fx, ['schedule', '--catalog', catalog, '--delete'])).code, 0);

  // An --every schedule: Temporal's interval, whose runs fall on multiples of it (UTC hours here).
  const every = await cli(fx, ['schedule', '--catalog', catalog, '--source', 'director', '--every', '1h']);
  assert.equal(every.code, 0, every.text);
  assert.match(every.stdout, new RegExp(`^created schedule ${id}: refresh of catalog ${catalog} .* every 1h`));
  const hourly = await cli(fx, ['schedule', '--catalog', catalog, '--describe']);
  assert.match(hourly.stdout, /next runs: (\S+T\d\d:00:00\.000Z, ){2}\S+T\d\d:00:00\.000Z\n/, hourly.text);
  assert.equal((await cli(fx, ['schedule', '--catalog', catalog, '--delete'])).code, 0);
});
