/**
 * The one mapping of a Bareos/Bacula director catalog's `job` row to catalog columns, read by the
 * source adapter (`bareos.ts`), the fingerprint (`../fingerprint.ts`) and the development tooling
 * (the demo's comparison, the benchmark's baseline). Pure SQL text; `$1` is the source's IANA zone.
 */

/** Text form of a naive source timestamp as a UTC instant, in the source's zone ($1). */
export const bareosUtcText = (col: string): string =>
  `to_char((${col} AT TIME ZONE $1) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * The SELECT list mapping a Bareos/Bacula `job` row (LEFT JOINed to client, pool, fileset:
 * ids 0 or dangling keep the job with a NULL name) to catalog columns, all as text.
 */
export const BAREOS_JOB_SELECT = `
SELECT j.jobid::text                         AS job_key,
       j.jobid::text                         AS job_id,
       j.job                                 AS job,
       j.name                                AS job_name,
       c.name                                AS client,
       NULLIF(j.type::text, '')              AS type,
       NULLIF(j.level::text, '')             AS level,
       NULLIF(j.jobstatus::text, '')         AS status,
       ${bareosUtcText('j.schedtime')}                 AS sched_time,
       ${bareosUtcText('j.starttime')}                 AS start_time,
       ${bareosUtcText('j.endtime')}                   AS end_time,
       ${bareosUtcText('j.realendtime')}               AS real_end_time,
       j.jobfiles::text                      AS files,
       j.jobbytes::text                      AS bytes,
       j.readbytes::text                     AS read_bytes,
       j.joberrors::text                     AS job_errors,
       p.name                                AS pool,
       f.fileset                             AS fileset,
       NULLIF(j.priorjobid, 0)::text         AS prior_job_id,
       j.jobtdate::text                      AS job_tdate,
       j.volsessionid::text                  AS vol_session_id,
       j.volsessiontime::text                AS vol_session_time,
       j.comment                             AS comment,
       j.starttime::date::text               AS bucket,
       NULL::text                            AS extra
FROM job j
LEFT JOIN client c  ON c.clientid = j.clientid
LEFT JOIN pool p    ON p.poolid = j.poolid
LEFT JOIN fileset f ON f.filesetid = j.filesetid`;
