/**
 * The registry of listing formats: one file per format in this folder, listed in {@link BUILT_IN}.
 * The configuration's listing kinds are the built-in formats' kinds (lib/config.ts); the shared
 * listing machinery asks {@link listingFormat} for the format of a source's kind.
 */
import { ConfigError } from '../../errors';
import { borgFormat } from './borg';
import { resticFormat } from './restic';
import type { ListingFormat } from './types';

export type * from './types';

/**
 * The formats every thread knows (the listing parser's and the files command's worker threads load
 * this module afresh), in the order messages list them. A new format is one file of this folder
 * and its entry here.
 */
const BUILT_IN = [resticFormat, borgFormat] as const;

/** A listing kind a source's configuration may name: `restic-json`, `borg-json`. */
export type ListingKind = (typeof BUILT_IN)[number]['kind'];

/** The listing kinds a source's configuration may name, in the order messages list them. */
export const LISTING_KINDS = BUILT_IN.map((f) => f.kind) as [ListingKind, ...ListingKind[]];

const formats = new Map<string, ListingFormat>(BUILT_IN.map((f) => [f.kind, f]));

/**
 * The format of listing kind `kind`.
 * @throws ConfigError (`CONFIG_INVALID`) when no format has that kind; the message names it and
 *   the known kinds.
 */
export function listingFormat(kind: string): ListingFormat {
  const f = formats.get(kind);
  if (!f)
    throw new ConfigError(
      `unknown listing kind ${JSON.stringify(kind)}: the listing formats are ${listingKinds()
        .map((k) => JSON.stringify(k))
        .join(', ')}`,
    );
  return f;
}

/** Every registered listing kind: the built-in ones, then those of {@link registerListingFormat}. */
export function listingKinds(): string[] {
  return [...formats.keys()];
}

/** True when `kind` is a built-in listing kind (one a source's configuration may name). */
export function isListingKind(kind: string): kind is ListingKind {
  return (LISTING_KINDS as string[]).includes(kind);
}

/**
 * Registers a format in this thread (tests and tools that define one of their own): the shared
 * machinery run in this thread (`parseListing`, `listingRecord`, `listedCopyText`) then reads its
 * kind. Worker threads and the configuration know the built-in formats only: a product format is
 * listed in {@link BUILT_IN} instead.
 * @throws Error when a format of that kind is registered already.
 */
export function registerListingFormat(format: ListingFormat): void {
  if (formats.has(format.kind)) throw new Error(`listing kind ${JSON.stringify(format.kind)} is registered already`);
  formats.set(format.kind, format);
}
