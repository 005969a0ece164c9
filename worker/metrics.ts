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
 */
import { activityInfo } from '@temporalio/activity';
import type { MetricMeter } from '@temporalio/common';
import { Runtime } from '@temporalio/worker';
import type { CopyPageResult } from '../workflows/definitions';
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
