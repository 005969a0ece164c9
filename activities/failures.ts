/**
 * How activities report failures to Temporal: permanent ones non-retryable with their stable type,
 * transient ones retryable; and how a failed source read is told apart from an empty one.
 */
import { ApplicationFailure } from '@temporalio/activity';
import { CatalogRebuildError, FailureType, isTransientDbError } from '../lib/errors';

/**
 * Turns an error into a Temporal failure: a CatalogRebuildError keeps its code (non-retryable
 * unless it says otherwise), a transient database error becomes a retryable DB_TRANSIENT, any other
 * PostgreSQL error (a SQLSTATE code) a non-retryable DB_ERROR; anything else is returned as is.
 */
export function toFailure(err: unknown): unknown {
  if (err instanceof ApplicationFailure) return err;
  if (err instanceof CatalogRebuildError) {
    return err.retryable
      ? ApplicationFailure.retryable(err.message, err.code)
      : ApplicationFailure.create({ message: err.message, type: err.code, nonRetryable: true, cause: err });
  }
  if (isTransientDbError(err)) {
    return ApplicationFailure.retryable(
      `transient database error: ${(err as Error).message}`,
      FailureType.DB_TRANSIENT,
    );
  }
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
    return ApplicationFailure.create({
      message: `database error ${code}: ${(err as Error).message}`,
      type: FailureType.DB_ERROR,
      nonRetryable: true,
    });
  }
  return err;
}

/** Runs an activity body, throwing what it throws through {@link toFailure}. */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toFailure(err);
  }
}

/** A permanent failure to read from a source: `what` names what could not be read, `detail` why. */
export class SourceUnreadable extends Error {
  constructor(
    readonly what: string,
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${what} is unreadable: ${detail}`, options);
  }
}

/**
 * Runs one source read. A transient failure (connection loss, timeout, restart) stays retryable and
 * names what was read; any other failure becomes SourceUnreadable, so the caller can name the
 * bucket and never mistake an unreadable bucket for an empty one.
 * @throws ApplicationFailure (DB_TRANSIENT, retryable), SourceUnreadable, or a CatalogRebuildError / ApplicationFailure unchanged.
 */
export async function readSource<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof CatalogRebuildError || err instanceof ApplicationFailure) throw err;
    const code = (err as { code?: unknown } | null)?.code;
    const detail = `${(err as Error)?.message ?? String(err)}${typeof code === 'string' ? ` (${/^[0-9A-Z]{5}$/.test(code) ? 'SQLSTATE ' : ''}${code})` : ''}`;
    if (isTransientDbError(err))
      throw ApplicationFailure.retryable(
        `${what}: transient source read failure, retrying: ${detail}`,
        FailureType.DB_TRANSIENT,
      );
    throw new SourceUnreadable(what, detail, { cause: err });
  }
}
