/**
 * File records compared field by field: a director catalog's, decoded in Node independently of
 * the product's SQL (Bacula's base 64, Latin-1 for bytes that are not UTF-8), and a catalog's.
 */
import type { Pool } from 'pg';

const DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
/** Bacula's base 64, decoded in Node (independent of the catalog's SQL functions). */
function b64(t: string): bigint {
  const neg = t.startsWith('-');
  let v = 0n;
  for (const ch of neg ? t.slice(1) : t) v = v * 64n + BigInt(DIGITS.indexOf(ch));
  return neg ? -v : v;
}

/** Source bytes as the catalog's text: kept when valid UTF-8, else decoded as Latin-1. */
function asText(b: Buffer | null): { text: string | null; bytes: string | null } {
  if (!b) return { text: null, bytes: null };
  const utf8 = b.toString('utf8');
  if (Buffer.from(utf8, 'utf8').equals(b)) return { text: utf8, bytes: null };
  return { text: b.toString('latin1'), bytes: b.toString('hex') };
}

/**
 * Every file record of a director catalog whose job exists and that the catalog can write (its
 * path exists, its LStat decodes), as the catalog must hold it: JSON of its catalog fields by
 * FileId, decoded in Node. `name` is the SQL of the name column (default `f.name`, Bareos; Bacula
 * 13 `f.filename`; Bacula 9 `n.name` with `joins` naming its Filename table `n`).
 */
export async function sourceFileRecords(
  source: Pool,
  o: { name?: string; joins?: string } = {},
): Promise<Map<string, string>> {
  const nameSql = o.name ?? 'f.name';
  const joins = o.joins ?? '';
  const { rows } = await source.query<{
    file_id: string;
    job_id: string;
    path: Buffer | null;
    name: Buffer | null;
    file_index: number;
    delta_seq: number;
    lstat: string;
    md5: string;
  }>(
    `SELECT f.fileid::text AS file_id, f.jobid::text AS job_id, convert_to(p.path, 'SQL_ASCII') AS path,
            convert_to(${nameSql}, 'SQL_ASCII') AS name, f.fileindex AS file_index, f.deltaseq AS delta_seq,
            f.lstat, f.md5
     FROM file f JOIN job j ON j.jobid = f.jobid LEFT JOIN path p ON p.pathid = f.pathid ${joins}`,
  );
  const out = new Map<string, string>();
  for (const r of rows) {
    const p = asText(r.path);
    const n = asText(r.name);
    const fields = r.lstat.split(' ');
    // 16 fields, each '-'? and 1 to 11 base-64 digits fitting int64 (11 digits: the first below 'I').
    const digit = (x: string) => /^-?([A-Za-z0-9+/]{1,10}|[A-H][A-Za-z0-9+/]{10})$/.test(x);
    const ok = p.text !== null && fields.length === 16 && fields.every(digit);
    if (!ok) continue;
    const [mode, uid, gid, size, mtime] = [2, 4, 5, 7, 11].map((i) => b64(fields[i]));
    out.set(
      r.file_id,
      JSON.stringify([
        r.job_id,
        p.text,
        n.text,
        p.bytes,
        n.bytes,
        r.file_index,
        r.delta_seq,
        r.file_index <= 0, // not saved: 0, or negative (Bacula 9.6 Accurate mode)
        size.toString(),
        Number(mode),
        uid.toString(),
        gid.toString(),
        new Date(Number(mtime) * 1000).toISOString(),
        r.md5,
        r.lstat,
      ]),
    );
  }
  return out;
}

/**
 * A version's file records (`{ versionId }`, from `file`) or a catalog's published ones
 * (`{ catalog }`, from the reader view `active_files`), field by field as JSON, by FileId.
 */
export async function catalogFileRecords(
  catalogDb: Pool,
  of: { versionId: string } | { catalog: string },
): Promise<Map<string, string>> {
  const [from, value] =
    'versionId' in of
      ? ['file WHERE version_id = $1', of.versionId]
      : ['active_files WHERE catalog_name = $1', of.catalog];
  const { rows } = await catalogDb.query<Record<string, unknown>>(
    `SELECT file_id::text, job_id, path, name, encode(path_bytes, 'hex') AS pb, encode(name_bytes, 'hex') AS nb,
            file_index, delta_seq, deleted, size::text, mode, uid::text, gid::text, mtime, md5, lstat
     FROM ${from}`,
    [value],
  );
  return new Map(
    rows.map((r) => [
      r.file_id as string,
      JSON.stringify([
        r.job_id,
        r.path,
        r.name,
        r.pb,
        r.nb,
        r.file_index,
        r.delta_seq,
        r.deleted,
        r.size,
        r.mode,
        r.uid,
        r.gid,
        (r.mtime as Date).toISOString(),
        r.md5,
        r.lstat,
      ]),
    ]),
  );
}
