/**
 * The row mapping a version's rows were written with, recorded on the version (`row_mapping`): a
 * refresh builds only on a version of the same mapping, since its unchanged rows are kept as they
 * were written.
 */
import { createHash } from 'node:crypto';
import type { SourceConfig } from '../config';
import { isFileSource } from '../config';
import { ROW_MAPPING_VERSION } from './bareos-columns';

/**
 * Bumped whenever a listing's parser (lib/sources/listing*.ts) changes what a job row of a listing
 * record holds.
 */
export const LISTING_MAPPING_VERSION = 1;

/**
 * The row mapping of a source's rows: a director catalog's {@link ROW_MAPPING_VERSION}; for a listing,
 * a number (2 to 2^30 + 1) derived from its kind, {@link LISTING_MAPPING_VERSION} and its `client`
 * setting (which fills the client of records without a host), so a change of any of them makes
 * the next refresh a full rebuild even when the listing's bytes did not change.
 */
export function rowMappingOf(config: SourceConfig): number {
  if (!isFileSource(config)) return ROW_MAPPING_VERSION;
  const text = `${config.kind}\u001f${LISTING_MAPPING_VERSION}\u001f${config.client ?? ''}`;
  return (createHash('sha256').update(text).digest().readUInt32BE(0) & 0x3fffffff) + 2;
}

/**
 * Why a version's mapping `was` cannot be refreshed under `now` (one clause). For a listing it names
 * what maps its records now (kind, parser version, `client` setting): the numbers alone say only
 * that something changed.
 */
export function rowMappingChange(config: SourceConfig, was: number, now: number): string {
  if (!isFileSource(config)) return `the row mapping changed (version ${was} → ${now})`;
  const client = config.client === undefined ? 'no client setting' : `client setting "${config.client}"`;
  return (
    `the listing's row mapping changed: the active version was written under another kind, parser ` +
    `version or client setting than this source's (${config.kind}, parser version ${LISTING_MAPPING_VERSION}, ` +
    `${client}; mapping ${was} → ${now})`
  );
}
