/**
 * Errors with a stable `code` from the one registry, `workflows/failures.ts`. Activities turn the
 * permanent ones into `ApplicationFailure.nonRetryable(message, code)` so the workflow fails fast.
 */
import type { FailureTypeName } from '../workflows/failures';
import { FailureType } from '../workflows/failures';

export { FailureType, NON_RETRYABLE_TYPES } from '../workflows/failures';

/** Base class: every product error carries a stable machine-readable `code`. */
export class CatalogRebuildError extends Error {
  /** Stable error type, also used as the Temporal ApplicationFailure type. */
  readonly code: FailureTypeName;
  /** Whether retrying the same operation can succeed. */
  readonly retryable: boolean;
  constructor(code: FailureTypeName, message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = new.target.name;
    this.code = code;
    this.retryable = options?.retryable ?? false;
  }
}

/** Thrown when the configuration file or environment is invalid; the message names the key. */
export class ConfigError extends CatalogRebuildError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(FailureType.CONFIG_INVALID, message, options);
  }
}

/** Thrown when a workflow names a source that the worker's configuration does not define. */
export class UnknownSourceError extends CatalogRebuildError {
  constructor(source: string, known: string[]) {
    super(
      FailureType.SOURCE_UNKNOWN,
      `source "${source}" is not defined in the worker configuration (sources.${source}); known sources: ${known.join(', ') || 'none'}`,
    );
  }
}

/** Thrown when a page or repair write finds its version no longer writable (published, abandoned, failed). */
export class VersionFencedError extends CatalogRebuildError {
  constructor(versionId: string, status: string) {
    super(FailureType.VERSION_FENCED, `version ${versionId} is ${status}, not building: write refused`);
  }
}

/**
 * Thrown (VERSION_FENCED, non-retryable) when a plan attempt would store a version for a rebuild
 * that ended (cancelled or failed) before its plan committed one (`ended_plan`, migration 18): an
 * attempt whose worker was frozen or cut off while the rebuild ended. Nothing is stored.
 */
export class PlanEndedError extends CatalogRebuildError {
  constructor(workflowId: string, firstRunId: string) {
    super(
      FailureType.VERSION_FENCED,
      `rebuild ${workflowId} (first run ${firstRunId}) ended before its plan committed a version: plan refused, nothing stored`,
    );
  }
}

/** Thrown when the catalog schema is newer than this build knows (a newer release migrated it). */
export class SchemaTooNewError extends CatalogRebuildError {
  constructor(found: number, known: number) {
    super(
      FailureType.SCHEMA_TOO_NEW,
      `catalog schema is at migration ${found}, this build knows up to ${known}: upgrade catalog-rebuild before running it`,
    );
  }
}

/** Thrown when a rebuild cannot be published: reconciliation mismatch, reject threshold, unreadable bucket. */
export class NotPublishableError extends CatalogRebuildError {
  constructor(message: string) {
    super(FailureType.NOT_PUBLISHABLE, message);
  }
}

/**
 * Thrown when a source cannot be used as data: a listing that is not JSON or not of its kind's
 * shape, a listing file that cannot be read, a listing command that fails. Retrying cannot help;
 * the message names the source and the fix.
 */
export class SourceDataInvalidError extends CatalogRebuildError {
  constructor(message: string) {
    super(FailureType.SOURCE_DATA_INVALID, message);
  }
}

/**
 * Thrown (retryable) when a page attempt's cancellation signal fired: before its transaction began
 * (`writing` false), or while it wrote, the statement in flight cancelled and the transaction rolled
 * back (`writing` true, `cause` the error the cancel produced). Another attempt retries the page.
 */
export class PageCancelledError extends CatalogRebuildError {
  constructor(
    readonly pageNo: number,
    readonly writing: boolean,
    options?: { cause?: unknown },
  ) {
    const detail = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(
      FailureType.PAGE_CANCELLED,
      `page ${pageNo} given up ${writing ? 'while' : 'before'} writing: activity cancelled${detail}`,
      { ...options, retryable: true },
    );
  }
}

/** SQLSTATE classes and codes after which retrying can succeed (restart, connection loss, conflicts). */
const RETRYABLE_SQLSTATE = new Set(['40001', '40P01', '57P01', '57P02', '57P03', '55P03', '57014']);
const RETRYABLE_NODE_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH']);

/**
 * Whether a PostgreSQL / network error is transient.
 * Retryable: serialization failure 40001, deadlock 40P01, admin shutdown 57P01/57P02, cannot connect now 57P03,
 * lock not available 55P03, statement timeout / cancel 57014, connection exceptions 08xxx, socket errors.
 * Anything else (syntax, permission, constraint, data) fails fast.
 */
export function isTransientDbError(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (RETRYABLE_SQLSTATE.has(code) || code.startsWith('08')) return true;
    if (RETRYABLE_NODE_CODES.has(code)) return true;
  }
  const msg = (err as { message?: unknown }).message;
  if (
    typeof msg === 'string' &&
    /Connection terminated|connection timeout|terminating connection|Client has encountered a connection error/i.test(
      msg,
    )
  ) {
    return true;
  }
  return false;
}
