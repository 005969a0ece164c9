/** `catalog-rebuild rejects`: lists a version's quarantined records with their reasons. */
import type { RejectListing, RejectsVersion } from '../../lib/catalog/reject-reads';
import { chooseRejectsVersion, listRejects } from '../../lib/catalog/reject-reads';
import type { CommandContext } from './context';
import { ExitCode, withCatalogPool } from './context';

/** Options of `rejects`. */
export interface RejectsOptions {
  catalog: string;
  /** Version id (decimal digits); default: the active version, else the newest with rejects. */
  version?: string;
  /** Print one JSON array instead of text. */
  json: boolean;
}

const CHOICE_TEXT: Record<RejectsVersion['choice'], string> = {
  requested: 'as requested',
  active: 'the active version',
  'latest with rejects': 'no active version; the newest version with quarantined records',
  latest: 'no active version and no version with quarantined records; the newest version',
};

/** The heading of the text listing: which version is shown and why. */
export function rejectsHeading(catalog: string, v: RejectsVersion): string {
  return `catalog ${catalog} version ${v.versionId} (${v.status}; ${CHOICE_TEXT[v.choice]}):`;
}

/** One quarantined record as a text line: `job key K · job id I · bucket B · <reason>`. */
export function formatReject(r: RejectListing): string {
  return `job key ${r.jobKey ?? '-'} · job id ${r.jobId ?? '-'} · bucket ${r.bucket ?? 'none'} · ${r.reason}`;
}

/**
 * Prints the quarantined records of the chosen version: a heading naming the version, one line per
 * record and a count; with `json`, one array of {@link RejectListing} objects, each with `versionId`.
 * @returns 0, also when the version has no quarantined record.
 * @throws ExitCode 1 when the catalog has no such version (or no version at all); the
 *   configuration or database error as it is.
 */
export async function rejectsCommand(ctx: CommandContext, o: RejectsOptions): Promise<number> {
  return withCatalogPool(ctx, async (pool) => {
    const v = await chooseRejectsVersion(pool, o.catalog, o.version);
    if (!v) {
      throw new ExitCode(
        1,
        o.version === undefined
          ? `catalog ${o.catalog} has no version (it was never rebuilt)`
          : `catalog ${o.catalog} has no version ${o.version}`,
      );
    }
    const rows = await listRejects(pool, v.versionId);
    if (o.json) {
      ctx.out(JSON.stringify(rows.map((r) => ({ versionId: v.versionId, ...r }))));
      return 0;
    }
    ctx.out(rejectsHeading(o.catalog, v));
    for (const r of rows) ctx.out(formatReject(r));
    ctx.out(`${rows.length} quarantined record${rows.length === 1 ? '' : 's'}`);
    return 0;
  });
}
