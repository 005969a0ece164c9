/**
 * Activities without Temporal: fresh databases with a generated Bareos source, the catalog schema,
 * the activities built over them, and one call of an activity in a `MockActivityEnvironment`.
 */
import type { Info } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Activities } from '../../activities';
import { createActivities } from '../../activities';
import type { SourceConfig } from '../../lib/config';
import { migrate } from '../../lib/db';
import { SourceRegistry } from '../../lib/sources';
import type { TestDatabases } from './harness';
import { testDatabases } from './harness';

/** Databases, sources and activities of one test file; `close()` releases them. */
export interface ActivityFixture {
  dbs: TestDatabases;
  sources: SourceRegistry;
  acts: Activities;
  close(): Promise<void>;
}

/**
 * Fresh databases (`tag` in their names) with `jobs` generated Bareos jobs (`seed`), the catalog
 * migrated, and the activities (identity `test@host`). Every source name resolves to `source(dbs)`
 * (default: the generated Bareos source), called at each lookup so a test may change what it returns.
 * `files`: the source has that many file records in all (dev/bareos-file-generator.ts).
 * `sqlAscii`: the source database is created as Bareos and Bacula create theirs (`ENCODING
 * 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`), so its text may hold any bytes.
 */
export async function activityFixture(
  tag: string,
  o: { jobs: number; seed: number; files?: number; source?: (dbs: TestDatabases) => SourceConfig; sqlAscii?: boolean },
): Promise<ActivityFixture> {
  const dbs = await testDatabases(tag, {
    source: {
      jobs: o.jobs,
      seed: o.seed,
      ...(o.files ? { files: o.files } : {}),
      ...(o.sqlAscii ? { encoding: 'sql_ascii' as const } : {}),
    },
  });
  await migrate(dbs.catalogPool); // a copy of the migrated template: finds nothing to apply
  const settings = o.source ?? ((d: TestDatabases): SourceConfig => ({ kind: 'bareos', databaseUrl: d.sourceUrl }));
  const sources = new SourceRegistry(() => settings(dbs), dbs.catalogPool);
  const acts = createActivities({ pool: dbs.catalogPool, sources, identity: 'test@host', buildId: 'test' });
  return {
    dbs,
    sources,
    acts,
    async close() {
      await sources.close().catch(() => undefined);
      await dbs.drop();
    },
  };
}

/**
 * Runs one activity call in a fresh `MockActivityEnvironment` (`info` overrides, default heartbeat
 * timeout 2,000 ms) and returns its result.
 */
export function runActivity<I, O>(fn: (input: I) => Promise<O>, input: I, info: Partial<Info> = {}): Promise<O> {
  return new MockActivityEnvironment({ heartbeatTimeoutMs: 2_000, ...info }).run(fn, input);
}

/**
 * Plans a rebuild of `catalog` from source `director` (workflow id `workflowId`, default
 * `wf-<catalog>`; run `r1`),
 * copies every page in order and seals the version, each a call of the real activity.
 * @returns the version id.
 */
export async function copyVersion(
  acts: Activities,
  o: { catalog: string; pageSize?: number; files?: boolean; workflowId?: string; verify?: 'full' },
): Promise<string> {
  const plan = await runActivity(acts.planRebuild, {
    catalog: o.catalog,
    source: 'director',
    ...(o.pageSize ? { pageSize: o.pageSize } : {}),
    ...(o.files ? { files: true } : {}),
    ...(o.verify ? { verify: o.verify } : {}),
    workflowId: o.workflowId ?? `wf-${o.catalog}`,
    firstRunId: 'r1',
  });
  for (let p = 1; p <= plan.pagesTotal; p++)
    await runActivity(acts.copyPage, { catalog: o.catalog, source: 'director', versionId: plan.versionId, pageNo: p });
  await runActivity(acts.sealVersion, { versionId: plan.versionId });
  return plan.versionId;
}
