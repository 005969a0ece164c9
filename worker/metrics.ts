/**
 * Worker metrics: the Temporal SDK runtime's Prometheus endpoint, with catalog-rebuild's own
 * counters and histograms created through the runtime's `metricMeter` (one listener per worker
 * process, serving the SDK's metrics and ours on `/metrics`).
 *
 * - `CATALOG_REBUILD_METRICS_ADDRESS` (e.g. `127.0.0.1:9464`, `0.0.0.0:9464`) turns the endpoint on.
 *   The runtime must be installed before the worker's first native connection; it is installed once
 *   per process.
 * - Our instruments, all tagged with `catalog`:
 *   `catalog_rebuild_pages_committed` (pages this worker committed),
 *   `catalog_rebuild_rows_upserted` (rows of those pages),
 *   `catalog_rebuild_page_duration` (ms histogram, per committed page attempt),
 *   `catalog_rebuild_page_retries` (attempts before the committing one),
 *   `catalog_rebuild_rejects` (quarantined source records).
 *   A page found already committed by an earlier attempt is not counted again.
 * - Gauges of every rebuild in progress in the worker's catalog database (versions `building`), the
 *   figures of `catalog-rebuild check --rebuild`, read from the ledger every 15 s
 *   (`CATALOG_REBUILD_METRICS_REFRESH_MS`), tagged with `catalog`; every worker on the catalog
 *   database exports the same values (aggregate with `max by (catalog)`):
 *   `catalog_rebuild_pages_done`, `catalog_rebuild_pages_total`,
 *   `catalog_rebuild_rows_per_second` (rows committed in the last minute / 60),
 *   `catalog_rebuild_retries` (page attempts beyond the first),
 *   `catalog_rebuild_seconds_since_commit` (since the newest page commit; since the plan before the
 *   first). When the version leaves `building`, its gauges are set a last time, with rows per
 *   second and seconds since commit 0.
 * - `catalog_rebuild_last_refresh_age_seconds`, tagged with `catalog`: seconds since the last
 *   successful scheduled refresh (the newest `scheduled_refresh_done` event) of each published
 *   catalog that has one, the `last_refresh_age_seconds` of `check --rebuild`; same refresh period.
 */
import { activityInfo } from '@temporalio/activity';
import type { MetricMeter } from '@temporalio/common';
import { Runtime } from '@temporalio/worker';
import type { CopyPageResult } from '../workflows/definitions';
import type { Queryable } from '../lib/db';
import { countPageRetries, listBuildingVersions, newestEventAges, readLedgerProgress } from '../lib/catalog';
import { SCHEDULE_EVENTS } from '../workflows/schedule-definitions';
import { ConfigError } from '../lib/errors';

/** Environment variable naming the Prometheus bind address. */
export const METRICS_ADDRESS_ENV = 'CATALOG_REBUILD_METRICS_ADDRESS';

/** Names of our instruments (also the Prometheus metric names). */
export const METRIC_NAMES = {
  pagesCommitted: 'catalog_rebuild_pages_committed',
  rowsUpserted: 'catalog_rebuild_rows_upserted',
  pageDuration: 'catalog_rebuild_page_duration',
  pageRetries: 'catalog_rebuild_page_retries',
  rejects: 'catalog_rebuild_rejects',
} as const;

let installedAddress: string | null = null;

/**
 * Installs the SDK runtime with a Prometheus exporter on `CATALOG_REBUILD_METRICS_ADDRESS`, once per
 * process; call it before creating any native connection or worker.
 * @returns the bind address, or null when the variable is not set.
 * @throws ConfigError when the address is malformed or another runtime was already created without it.
 */
export function installMetricsRuntime(env: NodeJS.ProcessEnv = process.env): string | null {
  const address = env[METRICS_ADDRESS_ENV]?.trim();
  if (!address) return null;
  if (!/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(address)) {
    throw new ConfigError(
      `${METRICS_ADDRESS_ENV}: ${JSON.stringify(address)} is not host:port (e.g. 127.0.0.1:9464 or 0.0.0.0:9464)`,
    );
  }
  if (installedAddress === address) return address;
  if (installedAddress !== null) {
    throw new ConfigError(
      `${METRICS_ADDRESS_ENV}: the metrics runtime already listens on ${installedAddress} in this process; it cannot move to ${address}`,
    );
  }
  try {
    Runtime.install({
      telemetryOptions: {
        metrics: {
          // Our names carry their own prefix; the SDK's keep theirs (temporal_...).
          prometheus: {
            bindAddress: address,
            // Pages take from milliseconds (small pages) to minutes (100,000 rows on a slow source).
            histogramBucketOverrides: {
              [METRIC_NAMES.pageDuration]: [10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000],
            },
          },
        },
      },
    });
  } catch (err) {
    throw new ConfigError(`${METRICS_ADDRESS_ENV}: cannot install the metrics runtime: ${(err as Error).message}`, {
      cause: err,
    });
  }
  installedAddress = address;
  return address;
}

/** The catalog a page activity works for, from its workflow id `catalog-rebuild/<catalog>`. */
function currentCatalog(): string {
  try {
    const id = activityInfo().workflowExecution?.workflowId ?? '';
    const m = /^catalog-rebuild\/([^/]+)$/.exec(id);
    return m ? m[1] : id;
  } catch {
    return 'unknown';
  }
}

/**
 * Builds the `onPageCommitted` hook of the activities over a metric meter (the SDK runtime's
 * `metricMeter`; a no-op meter when the runtime exports no metrics).
 */
export function pageMetrics(meter: MetricMeter): (r: CopyPageResult) => void {
  const pages = meter.createCounter(
    METRIC_NAMES.pagesCommitted,
    'pages',
    'Pages committed by this worker (ledger rows it wrote)',
  );
  const rows = meter.createCounter(
    METRIC_NAMES.rowsUpserted,
    'rows',
    'Catalog rows written by pages this worker committed',
  );
  const duration = meter.createHistogram(
    METRIC_NAMES.pageDuration,
    'int',
    'ms',
    'Time of a committed page attempt, read and write (ms)',
  );
  const retries = meter.createCounter(
    METRIC_NAMES.pageRetries,
    'attempts',
    'Attempts before the one that committed a page',
  );
  const rejects = meter.createCounter(
    METRIC_NAMES.rejects,
    'records',
    'Source records quarantined by pages this worker committed',
  );
  return (r) => {
    // The page has committed: a metrics failure must not fail the activity.
    try {
      const tags = { catalog: currentCatalog() };
      pages.add(1, tags);
      rows.add(r.rows, tags);
      duration.record(Math.max(0, Math.round(r.durationMs)), tags);
      retries.add(Math.max(0, r.activityAttempt - 1), tags);
      rejects.add(r.rejects, tags);
    } catch {
      /* metrics are best effort */
    }
  };
}

/** The hook over the process's SDK runtime meter (call after the runtime exists). */
export function runtimePageMetrics(): (r: CopyPageResult) => void {
  return pageMetrics(Runtime.instance().metricMeter);
}

/** Names of the rebuild gauges (also the Prometheus metric names). */
export const REBUILD_GAUGE_NAMES = {
  pagesDone: 'catalog_rebuild_pages_done',
  pagesTotal: 'catalog_rebuild_pages_total',
  rowsPerSecond: 'catalog_rebuild_rows_per_second',
  retries: 'catalog_rebuild_retries',
  secondsSinceCommit: 'catalog_rebuild_seconds_since_commit',
} as const;

/** Environment variable of the gauges' refresh period (ms); default {@link DEFAULT_GAUGE_REFRESH_MS}. */
export const GAUGE_REFRESH_ENV = 'CATALOG_REBUILD_METRICS_REFRESH_MS';
/** Default refresh period of the rebuild gauges (ms). */
export const DEFAULT_GAUGE_REFRESH_MS = 15_000;
/** The rate window of `catalog_rebuild_rows_per_second` (s). */
const RATE_WINDOW_SECONDS = 60;

/** One refresh's figures of a rebuild. */
interface RebuildFigures {
  pagesDone: number;
  pagesTotal: number;
  rowsPerSecond: number;
  retries: number;
  secondsSinceCommit: number;
}

/**
 * Runs `task` now and every `everyMs` (ms), never two at once; a failed run is skipped (metrics are
 * best effort: the next run tries again). The timer does not keep the process alive.
 * @returns a function that stops the runs.
 */
function everyInterval(everyMs: number, task: () => Promise<void>): () => void {
  let busy = false;
  const run = async () => {
    if (busy) return;
    busy = true;
    try {
      await task();
    } catch {
      /* best effort: the next run tries again */
    } finally {
      busy = false;
    }
  };
  void run();
  const timer = setInterval(() => void run(), everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Starts refreshing the rebuild gauges every `everyMs` from the catalog database: the figures of each
 * version being built, and a last time those of a version that left `building` since the previous
 * refresh. A failed refresh is skipped (the next one tries again); refreshes never overlap.
 * @param meter the SDK runtime's metric meter.
 * @param db pool on the catalog database.
 * @returns a function that stops the refreshes.
 */
export function startRebuildGauges(meter: MetricMeter, db: Queryable, everyMs = DEFAULT_GAUGE_REFRESH_MS): () => void {
  const gauge = (name: string, unit: string, description: string) => meter.createGauge(name, 'int', unit, description);
  const gauges: Record<keyof RebuildFigures, ReturnType<typeof gauge>> = {
    pagesDone: gauge(REBUILD_GAUGE_NAMES.pagesDone, 'pages', 'Pages committed of the rebuild in progress'),
    pagesTotal: gauge(REBUILD_GAUGE_NAMES.pagesTotal, 'pages', 'Pages in the plan of the rebuild in progress'),
    rowsPerSecond: gauge(REBUILD_GAUGE_NAMES.rowsPerSecond, 'rows/s', 'Rows committed in the last minute / 60'),
    retries: gauge(REBUILD_GAUGE_NAMES.retries, 'attempts', 'Page attempts beyond the first of each page'),
    secondsSinceCommit: gauge(
      REBUILD_GAUGE_NAMES.secondsSinceCommit,
      's',
      'Seconds since the newest page commit (since the plan before the first)',
    ),
  };
  const set = (catalog: string, f: RebuildFigures) => {
    for (const k of Object.keys(gauges) as (keyof RebuildFigures)[]) gauges[k].set(Math.round(f[k]), { catalog });
  };
  /** Versions reported by the previous refresh, by catalog. */
  let reported = new Map<string, { versionId: string; pagesTotal: number }>();
  return everyInterval(everyMs, async () => {
    const now = new Map<string, { versionId: string; pagesTotal: number }>();
    for (const v of await listBuildingVersions(db)) {
      const l = await readLedgerProgress(db, v.versionId, RATE_WINDOW_SECONDS);
      set(v.catalog, {
        pagesDone: l.pagesCommitted,
        pagesTotal: v.pagesTotal,
        rowsPerSecond: l.rowsInWindow / RATE_WINDOW_SECONDS,
        retries: await countPageRetries(db, v.versionId),
        secondsSinceCommit: l.secondsSinceLastCommit ?? v.secondsSinceCreated,
      });
      now.set(v.catalog, { versionId: v.versionId, pagesTotal: v.pagesTotal });
    }
    for (const [catalog, v] of reported) {
      if (now.has(catalog)) continue;
      const l = await readLedgerProgress(db, v.versionId, RATE_WINDOW_SECONDS);
      set(catalog, {
        pagesDone: l.pagesCommitted,
        pagesTotal: v.pagesTotal,
        rowsPerSecond: 0,
        retries: await countPageRetries(db, v.versionId),
        secondsSinceCommit: 0,
      });
    }
    reported = now;
  });
}

/** Name of the scheduled refresh age gauge (also the Prometheus metric name). */
export const REFRESH_AGE_GAUGE = 'catalog_rebuild_last_refresh_age_seconds';

/**
 * Starts refreshing {@link REFRESH_AGE_GAUGE} every `everyMs` from the catalog's event log. A failed
 * refresh is skipped (the next one tries again); refreshes never overlap.
 * @returns a function that stops the refreshes.
 */
export function startRefreshAgeGauge(
  meter: MetricMeter,
  db: Queryable,
  everyMs = DEFAULT_GAUGE_REFRESH_MS,
): () => void {
  const gauge = meter.createGauge(REFRESH_AGE_GAUGE, 'int', 's', 'Seconds since the last successful scheduled refresh');
  return everyInterval(everyMs, async () => {
    for (const a of await newestEventAges(db, SCHEDULE_EVENTS.done)) gauge.set(a.ageSeconds, { catalog: a.catalog });
  });
}

/**
 * Starts the rebuild gauges and the scheduled refresh age gauge on the process's SDK runtime meter
 * (call after `installMetricsRuntime` returned an address), refreshed every `CATALOG_REBUILD_METRICS_REFRESH_MS` (default 15,000 ms).
 * @returns a function that stops them.
 */
export function runtimeRebuildGauges(db: Queryable, env: NodeJS.ProcessEnv = process.env): () => void {
  const raw = Number(env[GAUGE_REFRESH_ENV]);
  const everyMs = Number.isFinite(raw) && raw >= 100 ? raw : DEFAULT_GAUGE_REFRESH_MS;
  const meter = Runtime.instance().metricMeter;
  const stops = [startRebuildGauges(meter, db, everyMs), startRefreshAgeGauge(meter, db, everyMs)];
  return () => stops.forEach((stop) => stop());
}
