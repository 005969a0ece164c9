/**
 * Listing text that is not UTF-8: each JSON string valid as UTF-8 is kept, any other is decoded from
 * the source's legacyEncoding (raw bytes decoded before JSON unescaping), counted per field, and
 * decoded as PostgreSQL's convert_from decodes it (checked against the server, read-only).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Client } from 'pg';
import { LEGACY_ENCODINGS } from '../lib/config';
import { LEGACY_DECODER_LABELS, decodeLegacy, legacyTable } from '../lib/sources/legacy-text';
import { parseListing } from '../lib/sources/listing';
import { parseListingInThread } from '../lib/sources/listing-thread';
import { plannedMessage } from '../activities/messages';

const ADMIN_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

/** A listing's bytes from pieces: strings as UTF-8, arrays of numbers as raw bytes. */
const bytes = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));

const T = '"time":"2024-05-01T10:00:00Z"';

describe('listing text that is not UTF-8', () => {
  test('restic: Latin-1 values decoded, UTF-8 and \\u escapes kept, counted per field', () => {
    const listing = bytes(
      `[{${T},"id":"a1","hostname":"M`,
      [0xfc],
      'ller-pc","paths":["/srv/caf',
      [0xe9],
      '","/srv/日本","/srv/\\u00e9t\\u00e9"],"tags":["\\u65e5 ',
      [0xfc],
      ` \\"q\\""],"username":"root"}]`,
    );
    const l = parseListing('restic-json', listing, { source: 's' });
    assert.equal(l.sha256, createHash('sha256').update(listing).digest('hex'));
    assert.equal(l.records.length, 1);
    const r = l.records[0];
    assert.equal(r.rejectReason, null);
    assert.equal(r.client, 'Müller-pc');
    assert.equal(r.jobName, '/srv/café, /srv/日本, /srv/été');
    assert.deepEqual(JSON.parse(r.extra!).tags, ['日 ü "q"']);
    assert.deepEqual(l.decoded, { hostname: 1, paths: 1, tags: 1 });
  });

  test('a valid UTF-8 listing is unchanged and decodes nothing', () => {
    const l = parseListing('restic-json', bytes(`[{${T},"id":"a1","hostname":"Müller-pc"}]`), { source: 's' });
    assert.equal(l.records[0].client, 'Müller-pc');
    assert.deepEqual(l.decoded, {});
  });

  test('WIN1252: 0x80 is the euro sign; LATIN1 keeps it as U+0080', () => {
    const listing = bytes(`[{${T},"id":"a1","hostname":"price `, [0x80], '"}]');
    assert.equal(
      parseListing('restic-json', listing, { source: 's', legacyEncoding: 'WIN1252' }).records[0].client,
      'price €',
    );
    assert.equal(parseListing('restic-json', listing, { source: 's' }).records[0].client, 'price \u0080');
  });

  test('a byte the encoding leaves undefined quarantines its record alone, raw as decoded text', () => {
    const listing = bytes(
      `[{${T},"id":"a1","hostname":"bad`,
      [0x81],
      `"},{${T},"id":"a2","hostname":"M`,
      [0xfc],
      `ller"},{"id":"a3","hostname":"M`,
      [0xfc],
      'ller"}]',
    );
    const l = parseListing('restic-json', listing, { source: 's', legacyEncoding: 'win1252' });
    assert.equal(l.records.length, 3);
    assert.match(l.records[0].rejectReason!, /^hostname: is neither UTF-8 nor WIN1252 text \(byte 0x81/);
    assert.equal(l.records[1].rejectReason, null);
    assert.equal(l.records[1].client, 'Müller');
    assert.match(l.records[2].rejectReason!, /time/);
    assert.match(l.records[2].raw!, /"hostname":"Müller"/);
    assert.deepEqual(l.decoded, { hostname: 3 });
  });

  test('borg: archive name and comment decoded; keys count as keys', () => {
    const listing = bytes(
      '{"archives":[{"id":"b1","name":"Sch',
      [0xf6],
      'n","start":"2024-05-01T10:00:00","comment":"r',
      [0xe9],
      'sum',
      [0xe9],
      '","x',
      [0xe9],
      '":1}],"repository":{"location":"/srv/borg"}}',
    );
    const l = parseListing('borg-json', listing, { source: 's' });
    assert.equal(l.records[0].rejectReason, null);
    assert.equal(l.records[0].job, 'Schön');
    assert.equal(l.records[0].comment, 'résumé');
    assert.deepEqual(l.decoded, { name: 1, comment: 1, 'xé (key)': 1 });
  });

  test('a listing that is not JSON keeps its error', () => {
    assert.throws(
      () => parseListing('restic-json', Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0xff]), { source: 's' }),
      /not valid UTF-8 \(byte 1\) and holds a byte above 0x7F outside any JSON string \(byte 1\)/,
    );
    assert.throws(
      () => parseListing('restic-json', bytes('[{"id":"a","hostname":"', [0xfc], '"},,]'), { source: 's' }),
      /not valid JSON/,
    );
  });

  test('the parser thread returns the counts; the planned message names them', async () => {
    const listing = bytes(`\ufeff[{${T},"id":"a1","hostname":"M`, [0xfc], 'ller"}]');
    const l = await parseListingInThread('restic-json', listing, { source: 's', legacyEncoding: 'LATIN1' });
    assert.deepEqual(l.decoded, { hostname: 1 });
    assert.match(Buffer.from(l.copyText).toString('utf8'), /\tMüller\t/);
    const msg = plannedMessage({
      versionId: '1',
      pagesTotal: 1,
      pageSize: 10,
      maxKey: '1',
      rows: '1',
      time: 't',
      snapshot: l.sha256,
      duplicates: 0,
      decoded: { encoding: 'LATIN1', values: l.decoded },
    });
    assert.match(msg, /1 values that were not UTF-8 decoded from LATIN1 \(hostname 1\)/);
  });
});

describe('legacy encodings', () => {
  test('every legacyEncoding name maps to a decoder Node accepts', () => {
    assert.deepEqual(Object.keys(LEGACY_DECODER_LABELS).sort(), [...LEGACY_ENCODINGS].sort());
    for (const name of LEGACY_ENCODINGS) {
      const label = LEGACY_DECODER_LABELS[name];
      if (label) assert.doesNotThrow(() => new TextDecoder(label, { fatal: true }), name);
      const table = legacyTable(name);
      assert.equal(table.length, 128, name);
      assert.ok(table.filter((cp) => cp >= 0).length >= 80, `${name} defines most bytes`);
    }
  });

  test('known code points', () => {
    const cp = (enc: string, b: number) => decodeLegacy(Uint8Array.of(b), enc).text.codePointAt(0);
    assert.equal(cp('LATIN1', 0x80), 0x80);
    assert.equal(cp('LATIN1', 0xfc), 0xfc);
    assert.equal(cp('WIN1252', 0x80), 0x20ac);
    assert.equal(cp('LATIN5', 0x80), 0x80);
    assert.equal(cp('LATIN5', 0xfd), 0x131);
    assert.equal(cp('LATIN9', 0xa4), 0x20ac);
    assert.equal(cp('LATIN10', 0xa4), 0x20ac);
    assert.equal(cp('KOI8R', 0xc1), 0x430);
    assert.equal(cp('WIN866', 0x80), 0x410);
    assert.equal(cp('ISO_8859_5', 0xb0), 0x410);
    assert.deepEqual(decodeLegacy(Uint8Array.of(0x41, 0x81), 'WIN1252'), { text: 'A\ufffd', undefinedByte: 0x81 });
  });

  test("decodes every byte as PostgreSQL's convert_from does", async () => {
    const c = new Client({ connectionString: ADMIN_URL });
    await c.connect();
    try {
      await c.query(`CREATE FUNCTION pg_temp.dec(b int, e text) RETURNS int LANGUAGE plpgsql AS $$
        BEGIN RETURN ascii(convert_from(decode(lpad(to_hex(b), 2, '0'), 'hex'), e));
        EXCEPTION WHEN others THEN RETURN -1; END $$`);
      const { rows } = await c.query<{ e: string; cps: number[] }>(
        `SELECT e, array_agg(pg_temp.dec(b, e) ORDER BY b) AS cps
         FROM unnest($1::text[]) e, generate_series(128, 255) b GROUP BY e`,
        [[...LEGACY_ENCODINGS]],
      );
      assert.equal(rows.length, LEGACY_ENCODINGS.length);
      for (const r of rows) {
        const mine = [...legacyTable(r.e)];
        const diff = mine.flatMap((cp, i) =>
          cp === r.cps[i] ? [] : [`0x${(i + 0x80).toString(16)}: ${cp} vs ${r.cps[i]}`],
        );
        assert.deepEqual(diff, [], r.e);
      }
    } finally {
      await c.end();
    }
  });
});
