/**
 * `catalog-rebuild find` on the product's published file records (`--files N`): the wall time of
 * the CLI process, and of its query alone, for an exact path and for a prefix, median of 5 each.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { findFiles } from '../../lib/catalog';
import { withLongSession } from '../../lib/db';
import { projectRoot } from '../../lib/paths';
import { testEnv, writeConfig } from '../harness/harness';
import type { BenchContext } from './context';
import { fmtInt } from './context';

const RUNS = 5;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Measures `find --path PATTERN --limit 100` on catalog `catalog` for the most common exact
 * path+name of the published file records and for the prefix of its directory (`dir/*`); prints
 * `find:` figures (ms) with the number of matches of each pattern.
 */
export async function measureFind(ctx: BenchContext, catalog: string, temporalAddress: string): Promise<void> {
  const common = await withLongSession(ctx.dbs.catalogPool, (c) =>
    c.query<{ p: string; dir: string }>(
      `SELECT path || name AS p, path AS dir FROM active_files WHERE catalog_name = $1 AND name <> ''
       GROUP BY path, name ORDER BY count(*) DESC, 1 LIMIT 1`,
      [catalog],
    ),
  );
  if (!common.rows.length) return;
  const env = testEnv({ address: temporalAddress, configFile: writeConfig(ctx.dbs), taskQueue: 'bench-find' });
  const bin = path.join(projectRoot(), 'bin/catalog-rebuild.js');
  for (const pattern of [common.rows[0].p, `${common.rows[0].dir}*`]) {
    const like = pattern.endsWith('*') ? `${pattern.slice(0, -1).replace(/[\\%_]/g, '\\$&')}%` : pattern;
    const matches = await withLongSession(ctx.dbs.catalogPool, (c) =>
      c.query<{ n: string }>(
        `SELECT count(*)::text AS n FROM active_files WHERE catalog_name = $1 AND path || name LIKE $2`,
        [catalog, like],
      ),
    );
    const cli: number[] = [];
    const query: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      let t = performance.now();
      const r = spawnSync(process.execPath, [bin, 'find', '--catalog', catalog, '--path', pattern, '--limit', '100'], {
        env,
        encoding: 'utf8',
      });
      cli.push(performance.now() - t);
      if (r.status !== 0) throw new Error(`find exited ${r.status}: ${r.stderr}`);
      t = performance.now();
      await findFiles(ctx.dbs.catalogPool, catalog, pattern, 100);
      query.push(performance.now() - t);
    }
    ctx.figures.add(
      `find ${pattern.endsWith('*') ? 'prefix' : 'exact'}`,
      `${JSON.stringify(pattern)} (${fmtInt(Number(matches.rows[0].n))} matching records, --limit 100): CLI process ${median(cli).toFixed(0)} ms, its query ${median(query).toFixed(1)} ms (median of ${RUNS})`,
      { cliMs: median(cli), queryMs: median(query), matches: Number(matches.rows[0].n) },
    );
  }
}
