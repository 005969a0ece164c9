/** A director's changes to a generated Bareos source, for the refresh tests. Test tooling only. */
import type { Pool } from 'pg';

/**
 * Changes a generated Bareos source (dev/harness/fixture.ts) the ways a director does: new jobs (the
 * next job ids), a status changed by a reschedule, a changed error count, deleted jobs (the oldest
 * few and one in the middle), a renumbered job (same unique name, new id) and a renamed client.
 * @returns the new jobs and deleted jobs counted.
 */
export async function changeDirectorSource(src: Pool) {
  const ids = (await src.query<{ id: string }>(`SELECT jobid::text AS id FROM job ORDER BY jobid`)).rows.map(
    (r) => r.id,
  );
  const max = BigInt(ids[ids.length - 1]);
  // New jobs (the director's next job ids), copies of the newest ones with new ids and names.
  const inserted = await src.query(
    `INSERT INTO job (jobid, job, name, type, level, clientid, jobstatus, schedtime, starttime, endtime, realendtime,
                      jobtdate, volsessionid, volsessiontime, jobfiles, jobbytes, readbytes, joberrors, jobmissingfiles,
                      poolid, filesetid, priorjobid, purgedfiles, hasbase, hascache, reviewed, comment)
     SELECT jobid + 1000, job || '.new', name, type, level, clientid, jobstatus, schedtime, starttime, endtime, realendtime,
            jobtdate, volsessionid, volsessiontime, 0, jobbytes, readbytes, joberrors, jobmissingfiles,
            poolid, filesetid, priorjobid, purgedfiles, hasbase, hascache, reviewed, comment
     FROM job WHERE jobid > $1::bigint - 12`,
    [max.toString()],
  );
  // A status changed by a reschedule, and a changed comment.
  await src.query(`UPDATE job SET jobstatus = 'A', comment = 'rescheduled' WHERE jobid = $1`, [ids[40]]);
  await src.query(`UPDATE job SET joberrors = joberrors + 1 WHERE jobid = $1`, [ids[1500]]);
  // Deleted jobs (pruned by the director): the oldest few and one in the middle.
  const deleted = await src.query(`DELETE FROM job WHERE jobid = ANY ($1::bigint[])`, [
    [ids[0], ids[1], ids[2], ids[900]],
  ]);
  // A renumbered job: gone under its id, back under a new one with the same unique name.
  await src.query(`UPDATE job SET jobid = jobid + 5000000 WHERE jobid = $1`, [ids[700]]);
  // A renamed client: every job of it changes as the catalog shows it.
  await src.query(
    `UPDATE client SET name = name || '-renamed' WHERE clientid = (SELECT clientid FROM job WHERE jobid = $1)`,
    [ids[2000]],
  );
  return { newJobs: inserted.rowCount ?? 0, deleted: deleted.rowCount ?? 0 };
}
