/**
 * Listing text that is not UTF-8: each JSON string of a listing is kept as it is when its bytes are
 * valid UTF-8, else decoded from the source's `legacyEncoding` (a PostgreSQL encoding name), byte
 * for byte as PostgreSQL's `convert_from` decodes it, so a listing and a director catalog in the same
 * encoding read the same. The bytes are decoded before JSON unescaping: escapes are ASCII, which every
 * legacy encoding keeps, so `\u65e5` beside a raw `\xfc` in one string both come out right.
 */
import { isUtf8 } from 'node:buffer';
import type { LEGACY_ENCODINGS } from '../config';

/** A PostgreSQL encoding name accepted for `legacyEncoding`. */
export type LegacyEncoding = (typeof LEGACY_ENCODINGS)[number];

/**
 * WHATWG `TextDecoder` label giving each encoding's upper half (bytes 0x80..0xFF), before the
 * corrections of {@link UPPER_OVERRIDES}. null: no usable decoder (LATIN1 is true ISO-8859-1, byte =
 * code point, while WHATWG's `latin1` means windows-1252; ISO-8859-16 has no WHATWG decoder; Node 20
 * decodes `windows-1252` as ISO-8859-1).
 */
export const LEGACY_DECODER_LABELS: Record<LegacyEncoding, string | null> = {
  LATIN1: null,
  LATIN2: 'iso-8859-2',
  LATIN3: 'iso-8859-3',
  LATIN4: 'iso-8859-4',
  LATIN5: 'windows-1254', // ISO-8859-9 = windows-1254 above 0x9F; 0x80..0x9F are C1 controls (override)
  LATIN6: 'iso-8859-10',
  LATIN7: 'iso-8859-13',
  LATIN8: 'iso-8859-14',
  LATIN9: 'iso-8859-15',
  LATIN10: null,
  WIN1250: 'windows-1250',
  WIN1251: 'windows-1251',
  WIN1252: null,
  WIN1253: 'windows-1253',
  WIN1254: 'windows-1254',
  WIN1255: 'windows-1255',
  WIN1256: 'windows-1256',
  WIN1257: 'windows-1257',
  WIN1258: 'windows-1258',
  WIN866: 'ibm866',
  WIN874: 'windows-874',
  KOI8R: 'koi8-r',
  KOI8U: 'koi8-u',
  ISO_8859_5: 'iso-8859-5',
  ISO_8859_6: 'iso-8859-6',
  ISO_8859_7: 'iso-8859-7',
  ISO_8859_8: 'iso-8859-8',
};

const C1 = Array.from({ length: 32 }, (_, i) => 0x80 + i);
/** Code points of 0x80.. (-1: undefined) where the decoder of the label is absent or differs from PostgreSQL. */
const UPPER_OVERRIDES: Partial<Record<LegacyEncoding, { from: number; to: number[] }>> = {
  LATIN5: { from: 0x80, to: C1 },
  WIN1252: {
    from: 0x80,
    to: [
      0x20ac, -1, 0x201a, 0x0192, 0x201e, 0x2026, 0x2020, 0x2021, 0x02c6, 0x2030, 0x0160, 0x2039, 0x0152, -1, 0x017d,
      -1, -1, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014, 0x02dc, 0x2122, 0x0161, 0x203a, 0x0153, -1,
      0x017e, 0x0178,
    ],
  },
  LATIN10: {
    from: 0xa0,
    to: [
      0xa0, 0x104, 0x105, 0x141, 0x20ac, 0x201e, 0x160, 0xa7, 0x161, 0xa9, 0x218, 0xab, 0x179, 0xad, 0x17a, 0x17b, 0xb0,
      0xb1, 0x10c, 0x142, 0x17d, 0x201d, 0xb6, 0xb7, 0x17e, 0x10d, 0x219, 0xbb, 0x152, 0x153, 0x178, 0x17c, 0xc0, 0xc1,
      0xc2, 0x102, 0xc4, 0x106, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0x110, 0x143, 0xd2, 0xd3,
      0xd4, 0x150, 0xd6, 0x15a, 0x170, 0xd9, 0xda, 0xdb, 0xdc, 0x118, 0x21a, 0xdf, 0xe0, 0xe1, 0xe2, 0x103, 0xe4, 0x107,
      0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xeb, 0xec, 0xed, 0xee, 0xef, 0x111, 0x144, 0xf2, 0xf3, 0xf4, 0x151, 0xf6, 0x15b,
      0x171, 0xf9, 0xfa, 0xfb, 0xfc, 0x119, 0x21b, 0xff,
    ],
  },
};

/** Bytes PostgreSQL leaves undefined where the WHATWG decoder maps them (to C1 controls or private use). */
const UNDEFINED: Partial<Record<LegacyEncoding, number[]>> = {
  WIN1250: [0x81, 0x83, 0x88, 0x90, 0x98],
  WIN1251: [0x98],
  WIN1253: [0x81, 0x88, 0x8a, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x98, 0x9a, 0x9c, 0x9d, 0x9e, 0x9f, 0xaa],
  WIN1254: [0x81, 0x8d, 0x8e, 0x8f, 0x90, 0x9d, 0x9e],
  WIN1255: [0x81, 0x8a, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x9a, 0x9c, 0x9d, 0x9e, 0x9f],
  WIN1257: [0x81, 0x83, 0x88, 0x8a, 0x8c, 0x90, 0x98, 0x9a, 0x9c, 0x9f],
  WIN1258: [0x81, 0x8a, 0x8d, 0x8e, 0x8f, 0x90, 0x9a, 0x9d, 0x9e],
  WIN874: [
    0x81, 0x82, 0x83, 0x84, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f, 0x90, 0x98, 0x99, 0x9a, 0x9b,
    0x9c, 0x9d, 0x9e, 0x9f, 0xdb, 0xdc, 0xdd, 0xde, 0xfc, 0xfd, 0xfe, 0xff,
  ],
};

const tables = new Map<string, Int32Array>();

/**
 * Code points of bytes 0x80..0xFF (index byte - 0x80) in `encoding`, -1 for a byte it leaves undefined.
 * @throws Error for a name outside LEGACY_ENCODINGS.
 */
export function legacyTable(encoding: string): Int32Array {
  const name = encoding.toUpperCase() as LegacyEncoding;
  const cached = tables.get(name);
  if (cached) return cached;
  if (!(name in LEGACY_DECODER_LABELS)) throw new Error(`unknown legacy encoding ${encoding}`);
  const label = LEGACY_DECODER_LABELS[name];
  const decoder = label ? new TextDecoder(label, { fatal: true }) : null;
  const table = new Int32Array(128);
  for (let b = 0x80; b <= 0xff; b++) {
    if (!decoder) table[b - 0x80] = b;
    else {
      try {
        table[b - 0x80] = decoder.decode(Uint8Array.of(b)).codePointAt(0)!;
      } catch {
        table[b - 0x80] = -1;
      }
    }
  }
  const o = UPPER_OVERRIDES[name];
  o?.to.forEach((cp, i) => (table[o.from - 0x80 + i] = cp));
  for (const b of UNDEFINED[name] ?? []) table[b - 0x80] = -1;
  tables.set(name, table);
  return table;
}

/**
 * Decodes bytes from a single-byte legacy encoding; a byte the encoding leaves undefined becomes
 * U+FFFD and is reported as `undefinedByte` (the first one).
 */
export function decodeLegacy(bytes: Uint8Array, encoding: string): { text: string; undefinedByte: number | null } {
  const table = legacyTable(encoding);
  let text = '';
  let undefinedByte: number | null = null;
  for (let i = 0; i < bytes.length;) {
    const end = Math.min(bytes.length, i + 4096);
    const cps: number[] = [];
    for (; i < end; i++) {
      const b = bytes[i];
      const cp = b < 0x80 ? b : table[b - 0x80];
      if (cp < 0) undefinedByte ??= b;
      cps.push(cp < 0 ? 0xfffd : cp);
    }
    text += String.fromCodePoint(...cps);
  }
  return { text, undefinedByte };
}

/** A listing decoded string by string. */
export interface DecodedListing {
  /** The listing as text (JSON still escaped), ready to parse. */
  text: string;
  /** Values (and keys) decoded from the legacy encoding, by field name (the key they are under). */
  decoded: Record<string, number>;
  /** Decoded values holding a byte the encoding leaves undefined (as U+FFFD), with the reason. */
  undecodable: Map<string, string>;
}

interface Frame {
  object: boolean;
  /** Field name the container is the value of (null at the top level). */
  field: string | null;
  /** In an object, the key of the member being read. */
  key: string | null;
  expectKey: boolean;
}

const unescape = (s: string): string | null => {
  if (!s.includes('\\')) return s;
  try {
    return JSON.parse(`"${s}"`) as string;
  } catch {
    return null;
  }
};

/**
 * Decodes a listing that is not valid UTF-8 as a whole: each JSON string's bytes are kept when they
 * are valid UTF-8, else decoded from `encoding`. A leading UTF-8 byte order mark is dropped.
 * @returns the decoded listing, or `{ badByte }`: the offset of a byte above 0x7F outside any string
 *   (JSON structure is ASCII: the file is not a listing, or was damaged or converted).
 */
export function decodeListing(bytes: Buffer, encoding: string): DecodedListing | { badByte: number } {
  const parts: string[] = [];
  const decoded: Record<string, number> = {};
  const undecodable = new Map<string, string>();
  const stack: Frame[] = [];
  const fieldHere = (): string | null => {
    const top = stack[stack.length - 1];
    return top ? (top.object ? top.key : top.field) : null;
  };
  let i = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  let seg = i;
  for (; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === 0x22) {
      let j = i + 1;
      let high = false;
      for (; j < bytes.length && bytes[j] !== 0x22; j++) {
        if (bytes[j] === 0x5c) j++;
        if (bytes[j] >= 0x80) high = true;
      }
      const body = bytes.subarray(i + 1, Math.min(j, bytes.length));
      let s = high ? null : body.toString('latin1');
      const top = stack[stack.length - 1];
      const isKey = !!top?.object && top.expectKey;
      if (s === null && isUtf8(body)) s = body.toString('utf8');
      if (s === null) {
        const d = decodeLegacy(body, encoding);
        s = d.text;
        const field = isKey ? `${unescape(s) ?? s} (key)` : (fieldHere() ?? '(value)');
        decoded[field] = (decoded[field] ?? 0) + 1;
        const value = unescape(s);
        if (d.undefinedByte !== null && value !== null) {
          const hex = d.undefinedByte.toString(16).padStart(2, '0');
          undecodable.set(
            value,
            `is neither UTF-8 nor ${encoding.toUpperCase()} text (byte 0x${hex} is not defined in ${encoding.toUpperCase()})`,
          );
        }
      }
      if (isKey) {
        top.key = unescape(s) ?? s;
        top.expectKey = false;
      }
      parts.push(bytes.toString('latin1', seg, i), '"', s);
      i = j;
      seg = j;
      continue;
    }
    if (b >= 0x80) return { badByte: i };
    if (b === 0x7b || b === 0x5b) {
      stack.push({ object: b === 0x7b, field: fieldHere(), key: null, expectKey: b === 0x7b });
    } else if (b === 0x7d || b === 0x5d) {
      stack.pop();
    } else if (b === 0x2c && stack[stack.length - 1]?.object) {
      stack[stack.length - 1].expectKey = true;
    }
  }
  parts.push(bytes.toString('latin1', seg, bytes.length));
  return { text: parts.join(''), decoded, undecodable };
}
