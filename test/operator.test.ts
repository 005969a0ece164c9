/**
 * Operator tools against a real private Temporal dev server (free ports, with the Web UI), real
 * PostgreSQL and real worker processes:
 * (a) the official `temporal` CLI pauses, queries, lists and resumes a rebuild, while our
 *     `status --follow` watches it to the end;
 * (b) with one worker and no restarts, the worker's Prometheus endpoint counts exactly the ledger;
 * (c) with its worker killed, `status --json` answers from the catalog database with a note and
 *     reports no polling worker, and `status --follow` warns (no answer, no worker, stalled) and
 *     ends with exit 1 when the rebuild is terminated;
 * (d) headless Chromium opens the Web UI page of the finished rebuild and finds its summary and
 *     current details;
 * (e) a rebuild cancelled with `catalog-rebuild cancel` ends CANCELLED: `wait`, `status` and
 *     `check --rebuild` say cancelled with the ledger's pages, `temporal workflow describe` says
 *     CANCELED, and the Web UI's workflow list shows it Canceled, not Completed.
 *
 * The worker of (c) is killed first, so that the no-poller window after which `status` stops
 * counting it (75 s, shortened here to {@link NO_POLLER_SECONDS} with
 * `CATALOG_REBUILD_CHECK_NO_POLLER_SECONDS`) passes while (a), (b) and (d) run.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import type { Browser, Page } from 'playwright-core';
import { generateBareosSource } from '../dev/bareos-generator';
import type { DevServer } from '../dev/env/dev-server';
import { freePort } from '../dev/env/dev-server';
import { projectRoot } from '../lib/paths';
import type { TemporalSession } from '../client';
import { QUERY_BUFFER_FULL, connectTemporal, rebuildHandle, startRebuild } from '../client';
import type { TestDatabases, WorkerProcess } from '../dev/harness/harness';
import {
  compareCatalogToSource,
  privateTemporal,
  runCliAsync,
  runCliProcess,
  spawnWorker,
  testDatabases,
  testEnv,
  uniqueQueue,
  writeConfig,
} from '../dev/harness/harness';
import { serverTimezone } from '../dev/harness/fixture';
import { waitFor } from '../dev/harness/wait';

const run = promisify(execFile);
/** Polling as this file's checks need it: every 100 ms, and an assertion failing inside a check fails the test at once. */
const POLL = { intervalMs: 100, rethrow: true };
const CHROMIUM = '/usr/bin/chromium';
/** The no-poller window of the CLI runs of (c) (s): a dead worker stops counting after it. */
const NO_POLLER_SECONDS = 15;

let server: DevServer;
let serverDir: string;
let uiUrl: string;
let temporalCli: string;
let dbs: TestDatabases;
let sourceTz: string;
let configFile: string;
const workers: WorkerProcess[] = [];
const children: ChildProcess[] = [];

/** Rebuild (c): its worker dies mid-copy. */
let dead: { env: NodeJS.ProcessEnv; killedAt: number; session: TemporalSession };

before(async () => {
  // privateTemporal starts it again on other ports when one was taken between the check and the bind.
  const t = await privateTemporal({ ui: true });
  server = t;
  temporalCli = t.cli;
  serverDir = t.dir;
  uiUrl = t.uiUrl!;
  dbs = await testDatabases('operator');
  await generateBareosSource({ databaseUrl: dbs.sourceUrl, jobs: 3000, seed: 7 });
  sourceTz = await serverTimezone(dbs.sourcePool);
  configFile = writeConfig(dbs);

  // (c), first half: a worker dies while rebuild `c` copies its pages.
  const env = testEnv({
    address: server.address,
    configFile,
    taskQueue: uniqueQueue('dead'),
    extra: { CATALOG_REBUILD_CHECK_NO_POLLER_SECONDS: String(NO_POLLER_SECONDS) },
  });
  const w = await spawnWorker(env);
  workers.push(w);
  const session = await connectTemporal(env);
  await startRebuild(
    session.client,
    { catalog: 'c', source: 'director', pageSize: 50, concurrency: 1, pauseBetweenPagesMs: 300 },
    { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
  );
  await waitFor('rebuild c commits 3 pages', async () => (await committedPages('c')) >= 3, {
    ...POLL,
    timeoutMs: 60_000,
  });
  w.kill('SIGKILL');
  await w.exited;
  dead = { env, killedAt: Date.now(), session };
});

after(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const w of workers) w.kill('SIGKILL');
  await dead?.session.close().catch(() => undefined);
  await server?.stop();
  await dbs?.drop();
  if (serverDir) fs.rmSync(serverDir, { recursive: true, force: true });
});

/** Committed pages of the newest version of a catalog (the ledger). */
async function committedPages(catalog: string): Promise<number> {
  const { rows } = await dbs.catalogPool.query<{ n: number }>(
    `SELECT count(p.committed_at)::int AS n FROM version v LEFT JOIN page p USING (version_id)
     WHERE v.version_id = (SELECT max(version_id) FROM version WHERE catalog_name = $1)`,
    [catalog],
  );
  return rows[0]?.n ?? 0;
}

/** Runs the official Temporal CLI against the private server. */
/**
 * Runs the Temporal CLI against the test server. A query the server refuses because another one
 * (the `status --follow` running beside it) already waits on the workflow task ("consistent query
 * buffer is full": the server buffers one query per workflow) is asked again, as an operator would.
 */
async function temporal(args: string[]): Promise<string> {
  const env = { ...process.env, TEMPORAL_ADDRESS: server.address, TEMPORAL_NAMESPACE: 'default' };
  for (let attempt = 1; ; attempt++) {
    try {
      const { stdout } = await run(temporalCli, [...args, '--address', server.address, '--namespace', 'default'], {
        env,
        timeout: 60_000,
      });
      return stdout;
    } catch (err) {
      const stderr = String((err as { stderr?: unknown }).stderr ?? '');
      if (attempt >= 20 || !QUERY_BUFFER_FULL.test(stderr)) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** A JSON document, or JSON lines, as one list. */
function parseJsonOrLines<T>(text: string): T[] {
  const t = text.trim();
  if (!t) return [];
  try {
    const v = JSON.parse(t);
    return Array.isArray(v) ? v : [v];
  } catch {
    return t
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as T);
  }
}

/** Our CLI as a background process whose output can be awaited while it runs. */
function cliInBackground(args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, [path.join(projectRoot(), 'bin/catalog-rebuild.js'), ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return {
    output: () => stdout,
    errors: () => stderr,
    exited,
    waitFor: (re: RegExp, timeoutMs: number) =>
      waitFor(`output matches ${re}:\n${stdout}\n${stderr}`, () => re.test(stdout), { ...POLL, timeoutMs }),
  };
}

test('(a) the temporal CLI pauses, queries, lists and resumes a rebuild; status --follow watches it to the end', async (t) => {
  const t0 = Date.now();
  const mark = (what: string) => t.diagnostic(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${what}`);
  const env = testEnv({ address: server.address, configFile, taskQueue: uniqueQueue('cli') });
  workers.push(await spawnWorker(env));
  const session = await connectTemporal(env);
  try {
    await startRebuild(
      session.client,
      { catalog: 'x', source: 'director', pageSize: 100, concurrency: 1, pauseBetweenPagesMs: 50 },
      { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
    );
    mark('worker up, rebuild started');
    const follow = cliInBackground(['status', '--catalog', 'x', '--follow'], env);
    await waitFor('rebuild x commits 3 pages', async () => (await committedPages('x')) >= 3, {
      ...POLL,
      timeoutMs: 60_000,
    });
    mark('3 pages committed');

    await temporal(['workflow', 'signal', '--workflow-id', 'catalog-rebuild/x', '--name', 'pause']);
    let progress: Record<string, unknown> = {};
    await waitFor(
      'the query shows the rebuild paused and drained',
      async () => {
        const out = await temporal([
          'workflow',
          'query',
          '--workflow-id',
          'catalog-rebuild/x',
          '--type',
          'progress',
          '--output',
          'json',
        ]);
        const parsed = JSON.parse(out) as { queryResult: Record<string, unknown>[] };
        progress = parsed.queryResult[0];
        return progress.paused === true && progress.inFlight === 0;
      },
      { ...POLL, timeoutMs: 30_000 },
    );
    mark('paused and drained');
    assert.equal(progress.phase, 'copying');
    assert.equal(progress.pagesTotal, 30);
    const pagesDone = progress.pagesDone as number;
    assert.ok(pagesDone >= 3 && pagesDone < 30, `pagesDone ${pagesDone}`);
    assert.equal(await committedPages('x'), pagesDone, 'the query agrees with the ledger');
    // The text output of the query shows the same fields.
    const text = await temporal(['workflow', 'query', '--workflow-id', 'catalog-rebuild/x', '--type', 'progress']);
    assert.match(text, /"pagesDone":\s*\d+/);
    assert.match(text, /"paused":\s*true/);

    // No page starts while paused: our follower reports it, and the ledger does not move.
    await follow.waitFor(/\(paused\)/, 15_000);
    assert.equal(await committedPages('x'), pagesDone, 'no page committed while paused');

    // Visibility: the CatalogName search attribute finds the rebuild.
    let listed: { execution?: { workflowId?: string }; status?: string }[] = [];
    await waitFor(
      'temporal workflow list --query "CatalogName=\'x\'" lists catalog-rebuild/x',
      async () => {
        listed = parseJsonOrLines(
          await temporal(['workflow', 'list', '--query', "CatalogName='x'", '--output', 'json']),
        );
        return listed.some((w) => w.execution?.workflowId === 'catalog-rebuild/x');
      },
      { ...POLL, timeoutMs: 15_000 },
    );
    assert.ok(
      listed.every((w) => w.execution?.workflowId?.startsWith('catalog-rebuild/x')),
      JSON.stringify(listed),
    );
    const none = await temporal(['workflow', 'list', '--query', "CatalogName='nosuch'", '--output', 'json']);
    assert.doesNotMatch(none, /catalog-rebuild\/x/);

    mark('listed');
    await temporal(['workflow', 'signal', '--workflow-id', 'catalog-rebuild/x', '--name', 'resume']);
    const code = await follow.exited;
    mark('follow exited');
    assert.equal(code, 0, `${follow.output()}\n${follow.errors()}`);
    const lines = follow.output().trim().split('\n');
    // A progress line (paused, draining or neither: after the resume the rebuild may finish between two samples).
    assert.ok(
      lines.some((l) =>
        /x: copying( \((paused|draining)\))* · page \d+\/30 \(\d+%\) · \d+ rows · \d+ rows\/s · eta \S+ · 0 retries/.test(
          l,
        ),
      ),
      follow.output(),
    );
    assert.match(follow.output(), /catalog x: version \d+ published; 30 pages, 3000 rows/);
    assert.doesNotMatch(follow.output(), /warning:/, 'a healthy rebuild raises no warning');

    const cmp = await compareCatalogToSource(dbs.catalogPool, dbs.sourcePool, 'x', sourceTz);
    assert.equal(cmp.rows, 3000);
    assert.equal(cmp.catalog, cmp.source);
    mark('catalog compared with the source');
  } finally {
    await session.close();
    mark('session closed');
  }
});

test('(b) with one worker and no restarts, the Prometheus counters equal the ledger', async () => {
  const port = await freePort();
  const env = testEnv({
    address: server.address,
    configFile,
    taskQueue: uniqueQueue('metrics'),
    extra: { CATALOG_REBUILD_METRICS_ADDRESS: `127.0.0.1:${port}` },
  });
  const w = await spawnWorker(env);
  workers.push(w);
  assert.match(w.output(), new RegExp(`serves metrics on http://127\\.0\\.0\\.1:${port}/metrics`));
  const r = await runCliAsync(
    ['start', '--catalog', 'm', '--source', 'director', '--page-size', '70', '--concurrency', '3', '--wait'],
    env,
  );
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);

  const ledger = (
    await dbs.catalogPool.query<{ pages: number; rows: string }>(
      `SELECT count(*)::int AS pages, sum(p.rows)::text AS rows FROM page p JOIN version v USING (version_id) WHERE v.catalog_name = 'm'`,
    )
  ).rows[0];
  assert.equal(ledger.pages, 43);
  assert.equal(ledger.rows, '3000');

  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (name: string): number => {
    const m = new RegExp(`^${name}\\{[^}]*catalog="m"[^}]*\\} (\\S+)$`, 'm').exec(text);
    assert.ok(
      m,
      `${name}{catalog="m"} in\n${text
        .split('\n')
        .filter((l) => l.includes('catalog_rebuild'))
        .join('\n')}`,
    );
    return Number(m[1]);
  };
  assert.equal(value('catalog_rebuild_pages_committed'), ledger.pages);
  assert.equal(value('catalog_rebuild_rows_upserted'), Number(ledger.rows));
  assert.equal(value('catalog_rebuild_page_duration_count'), ledger.pages);
  assert.ok(value('catalog_rebuild_page_duration_sum') > 0);
  assert.equal(value('catalog_rebuild_page_retries'), 0);
  assert.equal(value('catalog_rebuild_rejects'), 0);
  assert.match(text, /^# TYPE catalog_rebuild_page_duration histogram$/m);
  // The SDK's own metrics share the endpoint.
  assert.match(text, /^temporal_activity_execution_latency_bucket\{.*activity_type="copyPage"/m);
  w.kill('SIGKILL');
});

/** Headless Chromium ({@link CHROMIUM}) as these tests run it. */
async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-background-networking',
      '--disable-gpu',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/**
 * A page that reaches only this machine's loopback: the UI's external requests (news feed, fonts)
 * are refused and listed in `blocked`.
 */
async function loopbackPage(browser: Browser): Promise<{ page: Page; blocked: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const blocked: string[] = [];
  await page.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname) || url.protocol === 'data:') return route.continue();
    blocked.push(url.href);
    return route.abort();
  });
  return { page, blocked };
}

test('(d) headless Chromium opens the Web UI page of the finished rebuild and finds its summary and current details', async (t) => {
  if (!fs.existsSync(CHROMIUM)) {
    t.skip(`${CHROMIUM} is missing (Debian package chromium; .ci/run installs it)`);
    return;
  }
  const browser = await launchChromium();
  try {
    const { page, blocked } = await loopbackPage(browser);
    const url = `${uiUrl}/namespaces/default/workflows/${encodeURIComponent('catalog-rebuild/x')}`;
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60_000 });
    // The workflow page; its "User Metadata" tab shows the static summary and details (the UI
    // renders that markdown in a sandboxed iframe, so every frame is searched).
    const inAnyFrame = async (text: string, timeoutMs: number): Promise<boolean> => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        for (const frame of page.frames()) {
          if (
            await frame
              .getByText(text)
              .filter({ visible: true })
              .count()
              .catch(() => 0)
          )
            return true;
        }
        if (Date.now() > deadline) return false;
        await page.waitForTimeout(250);
      }
    };
    let found = false;
    let details = false;
    try {
      await page
        .getByText('RebuildCatalog')
        .filter({ visible: true })
        .first()
        .waitFor({ state: 'visible', timeout: 60_000 });
      await page
        .getByText('User Metadata', { exact: true })
        .filter({ visible: true })
        .first()
        .click({ timeout: 30_000 });
      found = await inAnyFrame('Rebuild catalog x from source director', 30_000);
      // Current details come from the workflow (a query its worker answers): the final state.
      details = found && (await inAnyFrame('done · page 30 of 30', 30_000));
    } catch (err) {
      t.diagnostic(`waiting for the summary: ${(err as Error).message.split('\n')[0]}`);
    }
    const dir = path.join(projectRoot(), 'test-artifacts');
    fs.mkdirSync(dir, { recursive: true });
    const shot = path.join(dir, 'web-ui-rebuild-x.png');
    await page.screenshot({ path: shot, fullPage: true });
    assert.ok(
      found,
      `summary text not found on ${url} (screenshot ${shot}; blocked ${blocked.join(', ') || 'nothing'})`,
    );
    assert.ok(details, `current details "done · page 30 of 30" not shown (screenshot ${shot})`);
    assert.ok(fs.statSync(shot).size > 10_000, 'a real screenshot');
    t.diagnostic(`screenshot: ${shot}`);
  } finally {
    await browser.close();
  }
});

test('(e) a rebuild cancelled from the CLI ends Canceled in the temporal CLI and the Web UI list, not a green Completed', async (t) => {
  const env = testEnv({ address: server.address, configFile, taskQueue: uniqueQueue('cancel') });
  const w = await spawnWorker(env);
  workers.push(w);
  const session = await connectTemporal(env);
  try {
    await startRebuild(
      session.client,
      { catalog: 'k', source: 'director', pageSize: 100, concurrency: 1, pauseBetweenPagesMs: 1_000 },
      { taskQueue: env.CATALOG_REBUILD_TASK_QUEUE },
    );
    await waitFor('rebuild k commits a page', async () => (await committedPages('k')) >= 1, {
      ...POLL,
      timeoutMs: 60_000,
    });
    const sent = await runCliAsync(['cancel', '--catalog', 'k'], env);
    assert.equal(sent.code, 0, sent.stderr);
    const waited = await runCliAsync(['wait', '--catalog', 'k'], env);
    assert.equal(waited.code, 1, waited.stderr);
    const done = /^catalog k: version \d+ cancelled \(abandoned\); (\d+) of 30 pages, /.exec(waited.stdout);
    assert.ok(done, waited.stdout);
    assert.equal(Number(done[1]), await committedPages('k'), "the pages done are the ledger's");

    // Temporal's own status: the CLI an operator uses, and the Web UI's list.
    const described = await temporal([
      'workflow',
      'describe',
      '--workflow-id',
      'catalog-rebuild/k',
      '--output',
      'json',
    ]);
    const info = (JSON.parse(described) as { workflowExecutionInfo: { status: string } }).workflowExecutionInfo;
    assert.equal(info.status, 'WORKFLOW_EXECUTION_STATUS_CANCELED');
    const checked = await runCliAsync(['check', '--catalog', 'k', '--rebuild'], env);
    assert.equal(checked.code, 1, checked.stdout);
    assert.match(
      checked.stdout,
      new RegExp(`^REBUILD WARNING - rebuild of k was cancelled after ${done[1]} of 30 pages: `),
    );
    const shown = await runCliAsync(['status', '--catalog', 'k'], env);
    assert.match(shown.stdout, /^catalog k: rebuild catalog-rebuild\/k cancelled at /);
    // Signals and updates to the ended rebuild, and to a catalog never rebuilt: exit 1 saying which.
    for (const args of [['pause'], ['resume'], ['throttle', '--concurrency', '2']]) {
      const late = await runCliAsync([...args, '--catalog', 'k'], env);
      assert.equal(late.code, 1, late.stdout);
      assert.match(
        late.stderr,
        new RegExp(`the rebuild of catalog k \\(catalog-rebuild/k\\) has ended \\(cancelled\\): ${args[0]} not sent`),
      );
    }
    const never = await runCliAsync(['cancel', '--catalog', 'never-rebuilt'], env);
    assert.equal(never.code, 1, never.stdout);
    assert.match(
      never.stderr,
      /no rebuild of catalog never-rebuilt exists \(workflow catalog-rebuild\/never-rebuilt\): cancel not sent/,
    );

    if (!fs.existsSync(CHROMIUM)) {
      t.diagnostic(`${CHROMIUM} is missing: the Web UI list is not looked at`);
      return;
    }
    const browser = await launchChromium();
    try {
      const { page } = await loopbackPage(browser);
      const query = encodeURIComponent('WorkflowId="catalog-rebuild/k"');
      await page.goto(`${uiUrl}/namespaces/default/workflows?query=${query}`, {
        waitUntil: 'domcontentloaded',
        timeout: 60_000,
      });
      // The list's row of the rebuild (a table row; the status badge is its first cell's text).
      const row = page
        .locator('tr')
        .filter({ has: page.getByRole('link', { name: 'catalog-rebuild/k', exact: true }) })
        .filter({ visible: true })
        .first();
      let status = '';
      try {
        await row.waitFor({ state: 'visible', timeout: 60_000 });
        status = await row.innerText();
      } finally {
        const dir = path.join(projectRoot(), 'test-artifacts');
        fs.mkdirSync(dir, { recursive: true });
        await page.screenshot({ path: path.join(dir, 'web-ui-cancelled-k.png'), fullPage: true });
      }
      assert.match(status, /\bcanceled\b/i, `the Web UI's list row: ${status}`);
      assert.doesNotMatch(status, /\bcompleted\b/i, `the Web UI's list row: ${status}`);
    } finally {
      await browser.close();
    }
  } finally {
    w.kill('SIGKILL');
    await session.close();
  }
});

test('(c) with its worker dead, status answers from the database, reports no polling worker, and --follow warns', async () => {
  const env = dead.env;
  // Followed from now on: it warns that no worker answers, that no page commits and (the no-poller
  // window has passed) that no worker polls.
  const follow = cliInBackground(['status', '--catalog', 'c', '--follow', '--stall-after', '1s'], env);
  // The server lists a dead worker's pollers for minutes; status counts only recent polls.
  let s: Record<string, unknown> = {};
  await waitFor(
    'status --json reports workersPolling 0',
    async () => {
      const r = runCliProcess(['status', '--catalog', 'c', '--json'], env, 60_000);
      assert.equal(r.code, 0, r.stderr);
      s = JSON.parse(r.stdout);
      return s.workersPolling === 0;
    },
    { ...POLL, timeoutMs: Math.max(30_000, dead.killedAt + (NO_POLLER_SECONDS + 30) * 1000 - Date.now()) },
  );
  assert.equal(s.answeredBy, 'database');
  assert.match(String(s.note), /no worker answered the progress query within 5 s.*catalog database/);
  const latest = s.latest as {
    status: string;
    pagesCommitted: number;
    pagesTotal: number;
    rows: number;
    secondsSinceProgress: number;
  };
  assert.equal(latest.status, 'building');
  assert.equal(latest.pagesTotal, 60);
  assert.equal(latest.pagesCommitted, await committedPages('c'));
  assert.ok(latest.pagesCommitted >= 3 && latest.pagesCommitted < 60);
  assert.equal(latest.rows, latest.pagesCommitted * 50);
  assert.ok(latest.secondsSinceProgress >= 1);

  const text = runCliProcess(['status', '--catalog', 'c'], env, 60_000);
  assert.equal(text.code, 0);
  assert.match(text.stdout, /no worker answered the progress query/);
  assert.match(
    text.stdout,
    new RegExp(
      `warning: no worker polled task queue catalog-rebuild-test-dead-\\w+ in the last ${NO_POLLER_SECONDS} s`,
    ),
  );

  // --follow: every warning, then exit 1 once the rebuild ends without a publish.
  await follow.waitFor(/warning: no worker polls task queue catalog-rebuild-test-dead-/, 30_000);
  const out = follow.output();
  assert.match(out, /warning: stalled: no page committed for \d+/);
  assert.match(out, /warning: no worker answered the progress query within 5 s; showing the catalog database/);
  assert.match(
    out,
    /c: version \d+ building · page \d+\/60 \(\d+%\) · \d+ rows · last page \S+ ago \(from the database\) · STALLED/,
  );
  await rebuildHandle(dead.session.client, 'c').terminate('operator test: worker gone');
  const code = await follow.exited;
  assert.equal(code, 1, `${follow.output()}\n${follow.errors()}`);
  assert.match(follow.output(), /rebuild of c failed, not published: operator test: worker gone/);
});
