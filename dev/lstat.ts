/**
 * Bacula's LStat encoding, for fixtures, the demo and the benchmark (the product decodes LStat in
 * the catalog database only: migrations/008_files.sql). An LStat is 16 space-separated integers
 * (st_dev, st_ino, st_mode, st_nlink, st_uid, st_gid, st_rdev, st_size, st_blksize, st_blocks,
 * st_atime, st_mtime, st_ctime, LinkFI, st_flags, data_stream), each in Bacula's base 64: digits
 * `A–Z a–z 0–9 + /`, most significant first, no padding, a leading `-` for negatives.
 */

const DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** One integer (a JS number when safe, else a BigInt) in Bacula's base 64. */
export function baculaBase64(value: number | bigint): string {
  let v = BigInt(value);
  const neg = v < 0n;
  if (neg) v = -v;
  let out = '';
  do {
    out = DIGITS[Number(v % 64n)] + out;
    v /= 64n;
  } while (v > 0n);
  return neg ? `-${out}` : out;
}

/** The stat fields of one file an LStat carries (times in epoch seconds). */
export interface StatFields {
  dev?: number;
  ino?: number | bigint;
  mode: number;
  nlink?: number;
  uid: number | bigint;
  gid: number | bigint;
  rdev?: number;
  size: number | bigint;
  blksize?: number;
  blocks?: number | bigint;
  atime?: number;
  mtime: number | bigint;
  ctime?: number;
  linkFi?: number;
  flags?: number;
  dataStream?: number;
}

/** The LStat text of `s`: the 16 fields in Bacula's base 64, space-separated. */
export function encodeLStat(s: StatFields): string {
  const size = BigInt(s.size);
  return [
    s.dev ?? 2049,
    s.ino ?? 1,
    s.mode,
    s.nlink ?? 1,
    s.uid,
    s.gid,
    s.rdev ?? 0,
    size,
    s.blksize ?? 4096,
    s.blocks ?? (size + 511n) / 512n,
    s.atime ?? Number(s.mtime),
    s.mtime,
    s.ctime ?? Number(s.mtime),
    s.linkFi ?? 0,
    s.flags ?? 0,
    s.dataStream ?? 1,
  ]
    .map((x) => baculaBase64(x))
    .join(' ');
}
