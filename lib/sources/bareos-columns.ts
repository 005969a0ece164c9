/**
 * The one mapping of a Bareos/Bacula director catalog's `job` row to catalog columns, read by the
 * source adapter (`bareos.ts`), the fingerprint (`../fingerprint.ts`) and the development tooling
 * (the demo's comparison, the benchmark's baseline). Pure SQL text; `$1` is the source's IANA zone
 * unless a builder is given the zone as a literal.
 */
import format from 'pg-format';
import { JOB_COLUMNS } from './types';
import type { JobColumn } from './types';
import { pageCopySelectList } from '../rows';
import { UTC_OFFSET, zoneOperand } from './zone-operand';

/** Text form of a naive source timestamp as a UTC instant, in the source's zone (`zone`, default `$1`). */
export const bareosUtcText = (col: string, zone = '$1'): string =>
  `to_char((${col} AT TIME ZONE ${zone}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * A regular expression (PostgreSQL ARE) matching text whose bytes are valid UTF-8, for a
 * `SQL_ASCII` database, where each byte of a text value is one character of the same code.
 */
export const UTF8_TEXT = `'^(?:[\\x01-\\x7f]|[\\xc2-\\xdf][\\x80-\\xbf]|\\xe0[\\xa0-\\xbf][\\x80-\\xbf]|[\\xe1-\\xec\\xee\\xef][\\x80-\\xbf]{2}|\\xed[\\x80-\\x9f][\\x80-\\xbf]|\\xf0[\\x90-\\xbf][\\x80-\\xbf]{2}|[\\xf1-\\xf3][\\x80-\\xbf]{3}|\\xf4[\\x80-\\x8f][\\x80-\\xbf]{2})*$'`;

/**
 * How a source database's text is read. `utf8`: the database checks its text (any encoding but
 * SQL_ASCII); values pass unchanged. `legacy`: a `SQL_ASCII` database, whose text may hold any
 * bytes: a value that is valid UTF-8 is kept as it is, any other is decoded from `legacyEncoding`.
 */
export interface SourceTextMode {
  /** `legacy` for a SQL_ASCII source database, else `utf8`. */
  kind: 'utf8' | 'legacy';
  /** PostgreSQL name of the encoding non-UTF-8 text is decoded from (e.g. LATIN1, WIN1252). */
  legacyEncoding: string;
}

/** Source text read as it is (a database that checks its encoding). */
export const UTF8_MODE: SourceTextMode = { kind: 'utf8', legacyEncoding: 'LATIN1' };

/** SQL that is true when the text expression `col` is valid UTF-8 (always true in `utf8` mode). */
export function isUtf8(col: string, mode: SourceTextMode): string {
  return mode.kind === 'legacy' ? `(${col} ~ ${UTF8_TEXT})` : 'true';
}

/**
 * A text column as UTF-8: unchanged in `utf8` mode; in `legacy` mode, unchanged when it is ASCII or
 * valid UTF-8, else its bytes converted from the legacy encoding to UTF-8 (handed to the client
 * without conversion: a SQL_ASCII server converts nothing).
 */
export function sourceText(col: string, mode: SourceTextMode): string {
  if (mode.kind !== 'legacy') return col;
  return format(
    `CASE WHEN %s ~ '^[\\x01-\\x7f]*$' OR %s ~ ${UTF8_TEXT} THEN %s
          ELSE convert_from(convert(convert_to(%s, 'SQL_ASCII'), %L, 'UTF8'), 'SQL_ASCII') END`,
    col,
    col,
    col,
    col,
    mode.legacyEncoding,
  );
}

/** The text columns of the mapping that may hold non-UTF-8 bytes, by catalog column. */
export const BAREOS_TEXT_COLUMNS = {
  job: 'j.job',
  job_name: 'j.name',
  client: 'c.name',
  type: 'j.type::text',
  level: 'j.level::text',
  status: 'j.jobstatus::text',
  pool: 'p.name',
  fileset: 'f.fileset',
  comment: 'j.comment',
} as const;

/** How the builders render times: SourceRow text form, or native timestamptz (for COPY). */
type TimeForm = 'text' | 'native';

function time(col: string, form: TimeForm, zone: string): string {
  return form === 'text' ? bareosUtcText(col, zone) : `(${col} AT TIME ZONE ${zone})`;
}

/** The mapping's expressions per catalog column, text columns decoded per `mode`. */
function columnExpressions(mode: SourceTextMode, form: TimeForm, zone: string): Record<JobColumn, string> {
  const t = (c: keyof typeof BAREOS_TEXT_COLUMNS) => sourceText(BAREOS_TEXT_COLUMNS[c], mode);
  return {
    job_key: 'j.jobid::text',
    job_id: 'j.jobid::text',
    job: t('job'),
    job_name: t('job_name'),
    client: t('client'),
    type: `NULLIF(${t('type')}, '')`,
    level: `NULLIF(${t('level')}, '')`,
    status: `NULLIF(${t('status')}, '')`,
    sched_time: time('j.schedtime', form, zone),
    start_time: time('j.starttime', form, zone),
    end_time: time('j.endtime', form, zone),
    real_end_time: time('j.realendtime', form, zone),
    files: 'j.jobfiles::text',
    bytes: 'j.jobbytes::text',
    read_bytes: 'j.readbytes::text',
    job_errors: 'j.joberrors::text',
    pool: t('pool'),
    fileset: t('fileset'),
    prior_job_id: 'NULLIF(j.priorjobid, 0)::text',
    job_tdate: 'j.jobtdate::text',
    vol_session_id: 'j.volsessionid::text',
    vol_session_time: 'j.volsessiontime::text',
    comment: t('comment'),
    bucket: 'j.starttime::date::text',
    extra: 'NULL::text',
  };
}

/** The SELECT list of the mapping, in JOB_COLUMNS order, text columns decoded per `mode`. */
function selectList(mode: SourceTextMode, form: TimeForm, zone: string): string {
  const exprs = columnExpressions(mode, form, zone);
  return `\n       ${JOB_COLUMNS.map((c) => `${exprs[c]} AS ${c}`).join(',\n       ')}`;
}

/** The FROM clause of the mapping: `job j` LEFT JOINed to client `c`, pool `p`, fileset `f`. */
export const BAREOS_FROM_JOB = `
FROM job j
LEFT JOIN client c  ON c.clientid = j.clientid
LEFT JOIN pool p    ON p.poolid = j.poolid
LEFT JOIN fileset f ON f.filesetid = j.filesetid`;

/**
 * The SELECT mapping a Bareos/Bacula `job` row (LEFT JOINed to client, pool, fileset: ids 0 or
 * dangling keep the job with a NULL name) to catalog columns, all as text (SourceRow form), text
 * decoded per `mode`; `$1` is the source's zone.
 */
export function bareosJobSelect(mode: SourceTextMode): string {
  return `SELECT ${selectList(mode, 'text', '$1')}${BAREOS_FROM_JOB}`;
}

/** {@link bareosJobSelect} of a source database that checks its encoding. */
export const BAREOS_JOB_SELECT = bareosJobSelect(UTF8_MODE);

/** Longest client name (bytes): an index key of the reader index (lib/validate.ts MAX_KEY_BYTES). */
const MAX_KEY_BYTES = 1024;

/** `'<field>: <problem> (<value as JSON, at most 80 characters>)'`, the wording of lib/validate.ts. */
function problem(field: string, message: string, value: string): string {
  return format(
    `%L || CASE WHEN length(to_json(%s)::text) > 80 THEN left(to_json(%s)::text, 77) || '…' ELSE to_json(%s)::text END || ')'`,
    `${field}: ${message} (`,
    value,
    value,
    value,
  );
}

/**
 * True when a naive time cannot be written as a catalog instant: infinite, or not safely inside
 * years 1–9999 (a day of margin at each end covers any zone's offset). Plain comparisons: no zone
 * conversion per row.
 */
function badTime(col: string): string {
  return `NOT (${col} > '0001-01-02' AND ${col} < '9999-12-30')`;
}

/**
 * The checks lib/validate.ts makes that a Bareos/Bacula job row can fail, as (condition, reason)
 * pairs over `j` and `c` (the client check first): client name longer than 1,024 bytes (an index
 * key), a negative job id (the paging key), a time that is not a
 * finite instant of years 1–9999, negative files or bytes. Reasons are worded as there.
 */
function rowChecks(mode: SourceTextMode): [string, string][] {
  const client = sourceText(BAREOS_TEXT_COLUMNS.client, mode);
  const times: [string, string][] = [
    ['sched_time', 'j.schedtime'],
    ['start_time', 'j.starttime'],
    ['end_time', 'j.endtime'],
    ['real_end_time', 'j.realendtime'],
  ].map(([field, col]) => [`${col} IS NOT NULL AND ${badTime(col)}`, problem(field, 'is not a time', `${col}::text`)]);
  const bytes = 'must be a non-negative whole number of at most 20 digits';
  // Decoding at most triples a name's bytes: only a name above a third of the limit is decoded here.
  const tooLong =
    mode.kind === 'legacy'
      ? `CASE WHEN octet_length(c.name) * 3 <= ${MAX_KEY_BYTES} THEN false ELSE octet_length(${client}) > ${MAX_KEY_BYTES} END`
      : `octet_length(${client}) > ${MAX_KEY_BYTES}`;
  return [
    [tooLong, problem('client', `is longer than ${MAX_KEY_BYTES} bytes (an index key)`, client)],
    ['j.jobid < 0', problem('job_key', 'paging key must be a non-negative whole number', 'j.jobid::text')],
    ...times,
    ['j.jobfiles < 0', problem('files', 'must be a non-negative whole number', 'j.jobfiles::text')],
    ['j.jobbytes < 0', problem('bytes', bytes, 'j.jobbytes::text')],
    ['j.readbytes < 0', problem('read_bytes', bytes, 'j.readbytes::text')],
  ];
}

/**
 * True for a Bareos/Bacula job row that is quarantined (cheap: no text is built for good rows).
 * In `utf8` mode the client name check is `j.clientid = ANY (longClientIds)` (ids from
 * {@link LONG_CLIENT_IDS_SQL}), so the check reads `job` alone (`c` in `legacy` mode).
 */
export function bareosRejectCondition(mode: SourceTextMode, longClientIds: string): string {
  const checks = rowChecks(mode).map(([cond]) => cond);
  if (mode.kind === 'utf8') checks[0] = format('j.clientid = ANY (%L::bigint[])', longClientIds);
  return `(${checks.map((cond) => `coalesce(${cond}, false)`).join(' OR ')})`;
}

/** SQL returning (as `ids`, a bigint array literal) the clients whose name is longer than an index key. */
export const LONG_CLIENT_IDS_SQL = `SELECT coalesce(array_agg(clientid), '{}')::text AS ids FROM client WHERE octet_length(name) > ${MAX_KEY_BYTES}`;

/** The reason a Bareos/Bacula job row is quarantined (the failed checks `; `-joined), NULL for a good row. */
export function bareosRejectReason(mode: SourceTextMode): string {
  return `NULLIF(concat_ws('; ', ${rowChecks(mode)
    .map(([cond, reason]) => `CASE WHEN ${cond} THEN ${reason} END`)
    .join(', ')}), '')`;
}

/**
 * An array of the catalog columns whose source value is not valid UTF-8 (decoded from the legacy
 * encoding), per row; NULL in `utf8` mode.
 */
function legacyColumns(mode: SourceTextMode): string {
  if (mode.kind !== 'legacy') return 'NULL::text[]';
  const cols = Object.entries(BAREOS_TEXT_COLUMNS).map(
    ([name, col]) => `CASE WHEN NOT ${isUtf8(col, mode)} THEN ${format('%L', name)} END`,
  );
  return `array_remove(ARRAY[${cols.join(', ')}], NULL)`;
}

/** A JSON object (text) counting, per catalog column, the page's values decoded from the legacy encoding. */
function decodedCounts(mode: SourceTextMode): string {
  if (mode.kind !== 'legacy') return `'{}'::text`;
  const counts = Object.keys(BAREOS_TEXT_COLUMNS).map((name) =>
    format('%L, count(*) FILTER (WHERE %L = ANY (s.legacy))', name, name),
  );
  return `json_build_object(${counts.join(', ')})::text`;
}

/**
 * A job row's text columns as escaped bytes (`encode(…, 'escape')`: bytes above 0x7F as `\\ooo`),
 * JSON text: readable whatever the bytes, for a row whose text cannot be decoded.
 */
export const BAREOS_ESCAPED_ROW = `json_build_object('job_id', j.jobid::text, ${Object.entries(BAREOS_TEXT_COLUMNS)
  .map(([name, col]) => `'${name}', encode(convert_to(${col}, 'SQL_ASCII'), 'escape')`)
  .join(', ')})::text`;

/**
 * The job-id range of one page, as validated decimal literals; a refresh's page names its jobs
 * (`keys`, all within the range).
 */
export interface KeyRange {
  /** First job id (decimal text). */
  firstKey: string;
  /** Last job id (decimal text). */
  lastKey: string;
  /** The page's only jobs (decimal text), for a page of a refresh; absent: every job of the range. */
  keys?: string[];
}

/** A job id as a validated SQL literal (for statements that take no parameters, COPY). @throws Error when it is not a decimal integer. */
export function jobIdLiteral(id: string): string {
  if (!/^-?\d{1,19}$/.test(id)) throw new Error(`not a job id: ${id}`);
  return id;
}

/** Job ids as a validated SQL bigint array literal. @throws Error when one is not a decimal integer. */
export function jobIdArrayLiteral(jobIds: string[]): string {
  return format('%L::bigint[]', `{${jobIds.map(jobIdLiteral).join(',')}}`);
}

function rangeCondition(r: KeyRange): string {
  const between = `j.jobid BETWEEN ${jobIdLiteral(r.firstKey)} AND ${jobIdLiteral(r.lastKey)}`;
  return r.keys ? `${between} AND j.jobid = ANY (${jobIdArrayLiteral(r.keys)})` : between;
}

/**
 * Bumped whenever the mapping changes what a job row holds, or how its row hash is computed: a
 * refresh across it is a full rebuild. 2: the row hash combines typed per-column hashes (it hashed
 * the row's text form, whose four time conversions cost the source about 2.5 CPU µs per row).
 */
export const ROW_MAPPING_VERSION = 2;

/**
 * SQL (over `j`, `c`, `p`, `f`; `zone` the operand of `AT TIME ZONE`, {@link zoneOperand}): the job's 64-bit row hash, from the values the
 * catalog would hold (text decoded per `mode`, times converted from `zone`) and the director's own
 * file facts (`JobFiles` is a column, `PurgedFiles` is added), so that any change to what a refresh
 * would write, or to the job's file records as the director accounts for them, changes the hash.
 * Each column is hashed by its type's own 64-bit hash function, seeded with its position (so equal
 * values in two columns, or two values swapped, do not cancel), NULL as minus its position; the
 * hashes are combined with XOR. No value is rendered as text (`job_key` and `bucket` follow from
 * `jobid` and `starttime`; `extra` is NULL). Computed by the source at every read: the page's COPY
 * stores it (`job.row_hash`), a refresh's detection pass compares against it.
 */
export function bareosRowHash(mode: SourceTextMode, zone: string): string {
  const t = (c: keyof typeof BAREOS_TEXT_COLUMNS) => ['text', sourceText(BAREOS_TEXT_COLUMNS[c], mode)] as const;
  const int = (e: string) => ['int', e] as const;
  // The instant as a UTC timestamp: AT TIME ZONE 'UTC' would look the zone up per value.
  const time = (col: string) => ['time', `(${col} AT TIME ZONE ${zone}) AT TIME ZONE ${UTC_OFFSET}`] as const;
  const terms = [
    int('j.jobid'),
    t('job'),
    t('job_name'),
    t('client'),
    ['text', `NULLIF(${t('type')[1]}, '')`] as const,
    ['text', `NULLIF(${t('level')[1]}, '')`] as const,
    ['text', `NULLIF(${t('status')[1]}, '')`] as const,
    time('j.schedtime'),
    time('j.starttime'),
    time('j.endtime'),
    time('j.realendtime'),
    int('j.jobfiles'),
    int('j.jobbytes'),
    int('j.readbytes'),
    int('j.joberrors'),
    t('pool'),
    t('fileset'),
    int('NULLIF(j.priorjobid, 0)'),
    int('j.jobtdate'),
    int('j.volsessionid'),
    int('j.volsessiontime'),
    t('comment'),
    int('j.purgedfiles'),
  ];
  const hashed = terms.map(([kind, e], i) => {
    const seed = i + 1;
    const h =
      kind === 'text'
        ? `hashtextextended(${e}, ${seed})`
        : kind === 'time'
          ? `timestamp_hash_extended(${e}, ${seed})`
          : `hashint8extended((${e})::bigint, ${seed})`;
    return `coalesce(${h}, ${-seed})`;
  });
  return `(${hashed.join(' # ')})`;
}

/**
 * One query over a page's job-id range that builds no text for good rows: the job ids of its
 * quarantined records (`reject_ids`, a bigint array literal) and the values decoded from the legacy
 * encoding per column (`decoded`, JSON). `longClientIds`: the result of {@link LONG_CLIENT_IDS_SQL}.
 * Unknown type, level and status codes are counted by reconciliation, per bucket, not here.
 */
export function bareosPageCheckQuery(mode: SourceTextMode, range: KeyRange, longClientIds: string): string {
  const from = mode.kind === 'utf8' ? 'FROM job j' : BAREOS_FROM_JOB;
  return `SELECT coalesce(array_agg(s.jobid) FILTER (WHERE s.rejected), '{}')::text AS reject_ids,
            ${decodedCounts(mode)} AS decoded
     FROM (SELECT j.jobid, ${bareosRejectCondition(mode, longClientIds)} AS rejected, ${legacyColumns(mode)} AS legacy
           ${from}
           WHERE ${rangeCondition(range)}) s`;
}

/**
 * The quarantined records among `jobIds` (from {@link bareosPageCheckQuery}): `job_key, job_id,
 * bucket, fingerprint_row, reason, raw` (raw: the row's SourceRow text form as JSON).
 * `fingerprintRow` is the fingerprint input over `j` (lib/fingerprint.ts) with the zone as `$1`.
 */
export function bareosRejectsQuery(mode: SourceTextMode, zone: string, jobIds: string, fingerprintRow: string): string {
  const z = zoneOperand(zone);
  return `SELECT m.job_key, m.job_id, m.bucket, m.fingerprint_row, m.reason, json_build_object(${COLUMN_PAIRS})::text AS raw
     FROM (SELECT ${selectList(mode, 'text', z)}, ${bareosRejectReason(mode)} AS reason,
                  ${fingerprintRow.replaceAll('$1', z)} AS fingerprint_row
           ${BAREOS_FROM_JOB}
           WHERE j.jobid = ANY (${format('%L', jobIds)}::bigint[])) m
     ORDER BY m.job_key::bigint`;
}

const COLUMN_PAIRS = JOB_COLUMNS.map((c) => `'${c}', m.${c}`).join(', ');

/**
 * `COPY (SELECT …) TO STDOUT` of a page's good rows (all but `rejectIds`), in the field order of
 * a page's COPY line (lib/rows.ts PAGE_COPY_COLUMNS), times as timestamptz (the session must run
 * with `TimeZone` UTC and `DateStyle` ISO). Every value is a literal: COPY takes no parameters.
 */
export function bareosPageCopyQuery(
  mode: SourceTextMode,
  zone: string,
  range: KeyRange,
  page: { versionId: string; pageNo: number; rejectIds: string },
): string {
  const z = zoneOperand(zone);
  const exprs = columnExpressions(mode, 'native', z);
  const fields = pageCopySelectList(page, bareosRowHash(mode, z), (c) => exprs[c], ',\n       ');
  const skip = page.rejectIds === '{}' ? '' : format(' AND j.jobid <> ALL (%L::bigint[])', page.rejectIds);
  return `COPY (SELECT ${fields}${BAREOS_FROM_JOB}
          WHERE ${rangeCondition(range)}${skip}) TO STDOUT`;
}
