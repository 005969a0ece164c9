/**
 * Validation of a rebuild's settings (the `RebuildCatalog` input and the `setThrottle` update)
 * against {@link LIMITS}. Deterministic: imported by workflow code.
 */
import { ApplicationFailure } from '@temporalio/workflow';
import type { RebuildCatalogInput, ThrottleSettings } from './definitions';
import { FailureType } from './failures';
import { CATALOG_NAME_PATTERN } from './names';
import { DEFAULT_MAX_REPAIR_ROUNDS, DEFAULT_RETENTION, LIMITS } from './policies';

/**
 * `value`, or `dflt` when it is absent, checked to be an integer from `lim.min` to `lim.max` (inclusive).
 * @param name the field's name, as the message shows it
 * @throws ApplicationFailure CONFIG_INVALID (non-retryable) naming the field, its bounds and the value.
 */
export function intIn(
  name: string,
  value: number | undefined,
  lim: { min: number; max: number },
  dflt: number,
): number {
  const v = value ?? dflt;
  if (!Number.isInteger(v) || v < lim.min || v > lim.max) {
    throw ApplicationFailure.nonRetryable(
      `${name} must be an integer from ${lim.min} to ${lim.max}, got ${value}`,
      FailureType.CONFIG_INVALID,
    );
  }
  return v;
}

/**
 * Validator of the `setThrottle` update: runs before the update is accepted, so a refused update
 * leaves no trace in the history.
 * @throws ApplicationFailure CONFIG_INVALID when a value is out of range or neither is given.
 */
export function validateThrottle(s: ThrottleSettings): void {
  if (s.concurrency !== undefined) intIn('concurrency', s.concurrency, LIMITS.concurrency, LIMITS.concurrency.default);
  if (s.pauseBetweenPagesMs !== undefined)
    intIn('pauseBetweenPagesMs', s.pauseBetweenPagesMs, LIMITS.pauseBetweenPagesMs, 0);
  if (s.concurrency === undefined && s.pauseBetweenPagesMs === undefined) {
    throw ApplicationFailure.nonRetryable(
      'setThrottle needs concurrency and/or pauseBetweenPagesMs',
      FailureType.CONFIG_INVALID,
    );
  }
}

/** Settings of one run of `RebuildCatalog`, defaults filled in. */
export interface RunSettings {
  /** Jobs per page; undefined: sized by the plan from measured cost. */
  pageSize: number | undefined;
  /** Heartbeat timeout of page activities (ms). */
  heartbeatTimeoutMs: number;
  /** Pages this run may schedule before it continues as new. */
  maxPagesPerRun: number;
  /** Retired versions kept with their rows after the publish. */
  retention: number;
  /** Reconcile → repair rounds before the rebuild fails. */
  maxRepairRounds: number;
}

/**
 * Validates the catalog name, then `pageSize` (when given), `heartbeatTimeoutMs` and
 * `maxPagesPerRun` (in this order, so the first invalid field is the one named); `retention` and
 * `maxRepairRounds` take their defaults when absent.
 * @throws ApplicationFailure CONFIG_INVALID (non-retryable) naming the first invalid field.
 */
export function runSettings(input: RebuildCatalogInput): RunSettings {
  if (!CATALOG_NAME_PATTERN.test(input.catalog)) {
    throw ApplicationFailure.nonRetryable(
      `catalog name ${JSON.stringify(input.catalog)} must match ${CATALOG_NAME_PATTERN}`,
      FailureType.CONFIG_INVALID,
    );
  }
  return {
    pageSize: input.pageSize === undefined ? undefined : intIn('pageSize', input.pageSize, LIMITS.pageSize, 0),
    heartbeatTimeoutMs: intIn(
      'heartbeatTimeoutMs',
      input.heartbeatTimeoutMs,
      LIMITS.heartbeatTimeoutMs,
      LIMITS.heartbeatTimeoutMs.default,
    ),
    maxPagesPerRun: intIn('maxPagesPerRun', input.maxPagesPerRun, LIMITS.maxPagesPerRun, LIMITS.maxPagesPerRun.default),
    retention: input.retention ?? DEFAULT_RETENTION,
    maxRepairRounds: input.maxRepairRounds ?? DEFAULT_MAX_REPAIR_ROUNDS,
  };
}

/**
 * The page window of a first run: `concurrency` and `pauseBetweenPagesMs` from the input, validated
 * (later runs carry the window in force, `setThrottle` included).
 * @throws ApplicationFailure CONFIG_INVALID (non-retryable) naming the invalid field.
 */
export function initialThrottle(input: RebuildCatalogInput): Required<ThrottleSettings> {
  return {
    concurrency: intIn('concurrency', input.concurrency, LIMITS.concurrency, LIMITS.concurrency.default),
    pauseBetweenPagesMs: intIn('pauseBetweenPagesMs', input.pauseBetweenPagesMs, LIMITS.pauseBetweenPagesMs, 0),
  };
}
