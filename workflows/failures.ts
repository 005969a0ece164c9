/**
 * Failure types of catalog-rebuild: the one registry of the stable `type` strings carried by
 * Temporal `ApplicationFailure`s and by `CatalogRebuildError.code`, and of which of them are never
 * retried. Pure definitions: imported by workflow code, `lib/errors.ts`, activities and the client.
 */

/** Every failure type the product raises, by name. The values are an external interface (events, the Web UI). */
export const FailureType = {
  /** Configuration file, environment or workflow input is invalid; the message names the key. */
  CONFIG_INVALID: 'CONFIG_INVALID',
  /** A workflow names a source the worker's configuration does not define. */
  SOURCE_UNKNOWN: 'SOURCE_UNKNOWN',
  /** A write found its version no longer writable (published, abandoned, failed). */
  VERSION_FENCED: 'VERSION_FENCED',
  /** The catalog schema is newer than this build knows. */
  SCHEMA_TOO_NEW: 'SCHEMA_TOO_NEW',
  /** The rebuild cannot be published: reconciliation, reject threshold, unreadable bucket, shrink guard. */
  NOT_PUBLISHABLE: 'NOT_PUBLISHABLE',
  /** A source cannot be used as data (a listing that is not JSON of its kind, a failing command). */
  SOURCE_DATA_INVALID: 'SOURCE_DATA_INVALID',
  /** A PostgreSQL error that retrying cannot fix (syntax, permission, constraint, data): SQLSTATE in the message. */
  DB_ERROR: 'DB_ERROR',
  /** A PostgreSQL or network error after which a retry can succeed (restart, connection loss, conflict). */
  DB_TRANSIENT: 'DB_TRANSIENT',
  /** A page attempt gave its page up because its activity was cancelled (worker shutdown); retried elsewhere. */
  PAGE_CANCELLED: 'PAGE_CANCELLED',
  /** A page's ledger row is held by an attempt that did not commit; retried. */
  PAGE_CONFLICT: 'PAGE_CONFLICT',
  /** A scheduled refresh (`ScheduledRefresh`) whose rebuild failed, was terminated or timed out. */
  REFRESH_FAILED: 'REFRESH_FAILED',
  /** The catalog's rebuild is being cancelled: a scheduled refresh starts once it ended (retried). */
  REBUILD_CANCELLING: 'REBUILD_CANCELLING',
  /** `rollback` found no retired version with its rows to return to (CLI only). */
  NOTHING_TO_ROLL_BACK: 'NOTHING_TO_ROLL_BACK',
} as const;

/** One of the failure type strings of {@link FailureType}. */
export type FailureTypeName = (typeof FailureType)[keyof typeof FailureType];

/**
 * Failure types that are deterministic: retrying the same activity cannot succeed, so every
 * activity proxy lists them in `nonRetryableErrorTypes` and the workflow fails fast.
 */
export const NON_RETRYABLE_TYPES: readonly FailureTypeName[] = [
  FailureType.CONFIG_INVALID,
  FailureType.SOURCE_UNKNOWN,
  FailureType.VERSION_FENCED,
  FailureType.SCHEMA_TOO_NEW,
  FailureType.NOT_PUBLISHABLE,
  FailureType.SOURCE_DATA_INVALID,
  FailureType.DB_ERROR,
];

/** Whether a failure of type `type` is never retried. */
export function isNonRetryableType(type: string | undefined | null): boolean {
  return !!type && (NON_RETRYABLE_TYPES as readonly string[]).includes(type);
}
