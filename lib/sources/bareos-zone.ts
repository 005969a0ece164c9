/**
 * The cross-check of a director catalog's naive times against its own epoch column, at plan.
 *
 * Bareos and Bacula write `StartTime`, `EndTime` and `SchedTime` as naive local times of the
 * director's zone, and `JobTDate` as seconds since the epoch: for a backup, the epoch of its end
 * time (Bacula 9.6 `update_job_end_record`; bscan writes the start time; a copy keeps its
 * original's, so only backups, type `B`, are sampled). Reading the naive times in a zone other than
 * the director's shifts every time by the difference, and nothing else notices: the product's
 * reconciliation compares the same shifted text on both sides. So before any page the plan reads a
 * small sample of backups spread over the key range and refuses, naming the offsets seen and the
 * zones that fit, when most of them contradict `JobTDate` in the zone in use.
 */
import type { Pool } from 'pg';
import { SourceDataInvalidError } from '../errors';

/** Key ranges probed across the job ids, and backups read at each: at most 200 jobs, 20 index probes. */
const PROBES = 20;
const PER_PROBE = 10;

/** A job fits a zone when `JobTDate` is within this of its end (or start) time read in that zone (seconds). */
export const ZONE_TOLERANCE_SECONDS = 60;

/** Zones named in a refusal at most. */
const NAMED_ZONES = 3;

/** One sampled backup: its id, `JobTDate`, and its end and start time read in the zone in use and as UTC (epoch s). */
export interface ZoneSample {
  jobId: string;
  jobTDate: number;
  end: number;
  start: number;
  endAsUtc: number;
  startAsUtc: number;
  /** The naive end and start time as the source wrote them (`YYYY-MM-DD HH:MI:SS`). */
  endText: string;
  startText: string;
}

/** What the cross-check found. */
export interface ZoneCheck {
  /** The zone the naive times were read in. */
  zone: string;
  /** Backups sampled (with a start and end time and a `JobTDate`). */
  sampled: number;
  /** Of them, those whose `JobTDate` agrees with the zone. */
  fit: number;
  /** The offsets (seconds east of UTC, whole quarter hours) at which the others' naive times lie. */
  offsets: number[];
  /** A job that does not fit, for the message. */
  example: string | null;
}

/**
 * Reads the sample: up to {@link PER_PROBE} backups (type `B`, `JobTDate` > 0, finite start and end
 * time) at or above each of {@link PROBES} keys spread from the smallest job id to `maxKey`.
 * Index probes of the primary key: its cost does not grow with the table.
 */
export async function readZoneSample(pool: Pool, zone: string, maxKey: string): Promise<ZoneSample[]> {
  const { rows } = await pool.query<{
    job_id: string;
    tdate: string;
    end_epoch: string;
    start_epoch: string;
    end_utc: string;
    start_utc: string;
    end_text: string;
    start_text: string;
  }>(
    `WITH bounds AS (SELECT min(jobid) AS lo, $2::bigint AS hi FROM job),
     probes AS (SELECT DISTINCT lo + (hi - lo) * g / ${PROBES} AS k FROM bounds, generate_series(0, ${PROBES - 1}) g
                WHERE lo IS NOT NULL),
     sample AS (SELECT DISTINCT s.* FROM probes p CROSS JOIN LATERAL (
       SELECT j.jobid, j.jobtdate, j.starttime, j.endtime FROM job j
       WHERE j.jobid >= p.k AND j.jobid <= $2::bigint AND j.type = 'B' AND j.jobtdate > 0
         AND j.starttime > '0001-01-02' AND j.starttime < '9999-12-30'
         AND j.endtime > '0001-01-02' AND j.endtime < '9999-12-30'
       ORDER BY j.jobid LIMIT ${PER_PROBE}) s)
     SELECT jobid::text AS job_id, jobtdate::text AS tdate,
            extract(epoch FROM endtime AT TIME ZONE $1)::bigint::text AS end_epoch,
            extract(epoch FROM starttime AT TIME ZONE $1)::bigint::text AS start_epoch,
            extract(epoch FROM endtime)::bigint::text AS end_utc,
            extract(epoch FROM starttime)::bigint::text AS start_utc,
            to_char(endtime, 'YYYY-MM-DD HH24:MI:SS') AS end_text,
            to_char(starttime, 'YYYY-MM-DD HH24:MI:SS') AS start_text
     FROM sample ORDER BY jobid`,
    [zone, maxKey],
  );
  return rows.map((r) => ({
    jobId: r.job_id,
    jobTDate: Number(r.tdate),
    end: Number(r.end_epoch),
    start: Number(r.start_epoch),
    endAsUtc: Number(r.end_utc),
    startAsUtc: Number(r.start_utc),
    endText: r.end_text,
    startText: r.start_text,
  }));
}

/** True when the job's `JobTDate` is its end or start time read in the zone (within the tolerance). */
const fits = (s: ZoneSample) =>
  Math.abs(s.jobTDate - s.end) <= ZONE_TOLERANCE_SECONDS || Math.abs(s.jobTDate - s.start) <= ZONE_TOLERANCE_SECONDS;

/**
 * The offset east of UTC at which a job's naive times lie against its `JobTDate`, in whole quarter
 * hours: from its end time, or its start time when that is nearer a quarter hour (bscan).
 */
function offsetOf(s: ZoneSample): number {
  const q = 900;
  const fromEnd = s.endAsUtc - s.jobTDate;
  const fromStart = s.startAsUtc - s.jobTDate;
  const miss = (x: number) => Math.abs(x - Math.round(x / q) * q);
  return Math.round((miss(fromStart) < miss(fromEnd) ? fromStart : fromEnd) / q) * q;
}

/** Judges a sample (pure). */
export function judgeZoneSample(zone: string, sample: ZoneSample[]): ZoneCheck {
  const misfits = sample.filter((s) => !fits(s));
  const offsets = [...new Set(misfits.map(offsetOf))].sort((a, b) => a - b);
  return {
    zone,
    sampled: sample.length,
    fit: sample.length - misfits.length,
    offsets,
    example: misfits[0]?.jobId ?? null,
  };
}

/** True when the check refuses: most sampled backups contradict `JobTDate` in the zone in use. */
export const zoneRefused = (c: ZoneCheck): boolean => c.sampled > 0 && c.fit * 2 < c.sampled;

/** `UTC+01:00`, `UTC-03:30`, `UTC` for an offset in seconds east of UTC. */
export function formatOffset(seconds: number): string {
  if (seconds === 0) return 'UTC';
  const a = Math.abs(seconds);
  const hh = String(Math.floor(a / 3600)).padStart(2, '0');
  const mm = String(Math.floor((a % 3600) / 60)).padStart(2, '0');
  return `UTC${seconds < 0 ? '-' : '+'}${hh}:${mm}`;
}

/**
 * The IANA zones (region/city names of the source server's `pg_timezone_names`, and `UTC`) in which
 * the most sampled backups fit (every one of them when possible): `UTC` first when it fits (a
 * director that writes UTC, not `Africa/Abidjan`), then those of the region most of them are in,
 * then by name. Empty when none fits more than half. One statement over the sample (at most 200 jobs × the server's zones).
 */
export async function zonesThatFit(pool: Pool, sample: ZoneSample[]): Promise<{ zones: string[]; fit: number }> {
  if (!sample.length) return { zones: [], fit: 0 };
  const { rows } = await pool.query<{ name: string; fit: number }>(
    `WITH s AS (SELECT * FROM unnest($1::bigint[], $2::timestamp[], $3::timestamp[]) AS s(t, st, en)),
     z AS (SELECT name FROM pg_timezone_names
           WHERE name ~ '^(Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific)/' OR name = 'UTC'),
     scored AS (
       SELECT z.name, count(*) FILTER (
                WHERE abs(s.t - extract(epoch FROM s.en AT TIME ZONE z.name)) <= $4
                   OR abs(s.t - extract(epoch FROM s.st AT TIME ZONE z.name)) <= $4)::int AS fit
       FROM z CROSS JOIN s GROUP BY z.name)
     SELECT name, fit FROM scored WHERE fit = (SELECT max(fit) FROM scored) AND fit * 2 > $5 ORDER BY name`,
    [
      sample.map((s) => s.jobTDate),
      sample.map((s) => s.startText),
      sample.map((s) => s.endText),
      ZONE_TOLERANCE_SECONDS,
      sample.length,
    ],
  );
  // Zones of the region most of them lie in first (Europe/… for a director in Berlin, not Africa/Ceuta).
  const region = (z: string) => z.slice(0, z.indexOf('/'));
  const perRegion = new Map<string, number>();
  for (const r of rows) perRegion.set(region(r.name), (perRegion.get(region(r.name)) ?? 0) + 1);
  const utcFirst = (z: string) => (z === 'UTC' ? 0 : 1);
  const zones = rows
    .map((r) => r.name)
    .sort(
      (a, b) =>
        utcFirst(a) - utcFirst(b) ||
        perRegion.get(region(b))! - perRegion.get(region(a))! ||
        (a < b ? -1 : a > b ? 1 : 0),
    );
  return { zones, fit: rows[0]?.fit ?? 0 };
}

/**
 * The refusal: which offsets the naive times are at, a job that shows it, the zone they were read
 * in and where it came from, and the zones that fit (or that none does).
 */
export function zoneRefusalMessage(
  source: string,
  c: ZoneCheck,
  fitting: { zones: string[]; fit: number },
  configured: boolean,
): string {
  const seen = c.offsets.map(formatOffset).join('/');
  const inUse = configured ? `its "timezone" ${c.zone}` : `${c.zone}, the source database's TimeZone`;
  const head =
    `source ${source}: naive times are ${seen} against JobTDate (e.g. job ${c.example}), not ${inUse} ` +
    `(${c.sampled - c.fit} of ${c.sampled} sampled backups)`;
  if (!fitting.zones.length)
    return `${head}; no zone fits them: check the director's clock and JobTDate before setting "timezone"`;
  const named = fitting.zones
    .slice(0, NAMED_ZONES)
    .map((z) => `"${z}"`)
    .join(', ');
  const more = fitting.zones.length > NAMED_ZONES ? ` (${fitting.zones.length} zones fit)` : '';
  return `${head}; set "timezone" to the director's zone, e.g. ${named}${more}`;
}

/**
 * The cross-check at plan: reads the sample in `zone` and, when most of it contradicts `JobTDate`,
 * throws.
 * @throws SourceDataInvalidError (non-retryable, before any page) with {@link zoneRefusalMessage}.
 */
export async function checkNaiveTimes(
  pool: Pool,
  source: string,
  zone: string,
  maxKey: string | null,
  configured: boolean,
): Promise<ZoneCheck> {
  if (maxKey === null) return { zone, sampled: 0, fit: 0, offsets: [], example: null };
  const sample = await readZoneSample(pool, zone, maxKey);
  const check = judgeZoneSample(zone, sample);
  if (zoneRefused(check))
    throw new SourceDataInvalidError(zoneRefusalMessage(source, check, await zonesThatFit(pool, sample), configured));
  return check;
}

/**
 * SELECT list counting naive timestamps `col` that do not exist in zone `tz` (the round trip
 * through the zone changes them) and that are ambiguous (another instant 30 or 60 minutes away has
 * the same wall-clock time): `nonexistent`, `ambiguous` (int).
 */
export const DST_COUNTS = (col: string, tz: string): string => {
  const at = `(${col} AT TIME ZONE ${tz})`;
  const same = (shift: string) => `(${at} ${shift}) AT TIME ZONE ${tz} = ${col}`;
  return `count(*) FILTER (WHERE ${at} AT TIME ZONE ${tz} <> ${col})::int AS nonexistent,
          count(*) FILTER (WHERE ${at} AT TIME ZONE ${tz} = ${col} AND (${same("- interval '1 hour'")} OR ${same("+ interval '1 hour'")}
                           OR ${same("- interval '30 minutes'")} OR ${same("+ interval '30 minutes'")}))::int AS ambiguous`;
};
