/**
 * The catalogs a real Bacula 9.6.7 director wrote (test/fixtures/bacula-9.6.7, made by
 * dev/fixtures/make-bacula-fixture.sh): loading a dump into a database of its own, created as
 * Bacula creates its catalog (SQL_ASCII, C collation, from template0), and reading the director's
 * own listings (bconsole's `list files`, query 1) kept beside them.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';
import format from 'pg-format';
import { projectRoot } from '../../lib/paths';
import { databaseUrl } from '../env/postgres';

/** Folder of the fixture. */
export const BACULA_967_DIR = (): string => path.join(projectRoot(), 'test', 'fixtures', 'bacula-9.6.7');

/** The fixture's `facts.json`: job ids per role, each job's row before the purge, the director's zone. */
export interface BaculaFacts {
  director_tz: string;
  roles: Record<string, number>;
  purged_jobid: number;
  jobs_before_purge: Record<string, { type: string; jobfiles: number; file_rows: number; jobtdate: number }>;
}

/** Reads `facts.json`. */
export function baculaFacts(): BaculaFacts {
  return JSON.parse(fs.readFileSync(path.join(BACULA_967_DIR(), 'facts.json'), 'utf8')) as BaculaFacts;
}

/**
 * Creates database `name` as Bacula's `create_postgresql_database` does, with `TimeZone` `UTC`,
 * and loads the fixture's dump `dump` (`catalog-a.sql`, `catalog-b.sql`) with psql.
 * @returns its URL.
 * @throws Error naming psql's output when psql is missing or the load fails.
 */
export async function loadBaculaDump(adminUrl: string, name: string, dump: string): Promise<string> {
  const c = new Client({ connectionString: adminUrl });
  await c.connect();
  try {
    await c.query(format('DROP DATABASE IF EXISTS %I WITH (FORCE)', name));
    await c.query(
      format(`CREATE DATABASE %I ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`, name),
    );
    await c.query(format(`ALTER DATABASE %I SET timezone = 'UTC'`, name));
  } finally {
    await c.end();
  }
  const url = databaseUrl(adminUrl, name);
  const r = spawnSync('psql', [url, '-q', '-v', 'ON_ERROR_STOP=1', '-f', path.join(BACULA_967_DIR(), dump)], {
    encoding: 'utf8',
  });
  if (r.error || r.status !== 0)
    throw new Error(
      `psql could not load ${dump} (psql of PostgreSQL 15.14 or later is needed): ${r.error?.message ?? r.stderr}`,
    );
  return url;
}

/** A director listing's text for one cell: the bytes as UTF-8 when they are, else as Latin-1 (the catalog's reading). */
function cellText(b: Buffer): string {
  const utf8 = b.toString('utf8');
  return Buffer.from(utf8, 'utf8').equals(b) ? utf8 : b.toString('latin1');
}

/** The rows of the bconsole tables in `file` (cells trimmed, as Buffers split on `|`). */
function tableRows(file: string): Buffer[][] {
  const raw = fs.readFileSync(path.join(BACULA_967_DIR(), file));
  const rows: Buffer[][] = [];
  let start = 0;
  for (let i = 0; i <= raw.length; i++) {
    if (i < raw.length && raw[i] !== 0x0a) continue;
    const line = raw.subarray(start, i);
    start = i + 1;
    if (line[0] !== 0x7c) continue; // '|'
    const cells: Buffer[] = [];
    let from = 1;
    for (let k = 1; k < line.length; k++) {
      if (line[k] !== 0x7c || line[k - 1] !== 0x20) continue; // ' |' ends a cell
      let a = from;
      let b = k - 1;
      while (a < b && line[a] === 0x20) a++;
      while (b > a && line[b - 1] === 0x20) b--;
      cells.push(line.subarray(a, b));
      from = k + 1;
    }
    rows.push(cells);
  }
  return rows;
}

/**
 * The full paths bconsole's `list files jobid=N` printed (`list-files-<N>-a.txt`, or
 * `list-files-deleted-<N>-a.txt` with `deleted`), as the catalog's text.
 */
export function bconsoleListFiles(file: string): string[] {
  return tableRows(file)
    .filter((cells) => cells.length === 1 && cells[0][0] === 0x2f) // '/…'
    .map((cells) => cellText(cells[0]));
}

/** The rows of query 1 in `query1-a.txt`: job id, path and name (raw bytes) per place a file is saved. */
export function bconsoleQuery1(): { jobId: string; path: Buffer; name: Buffer }[] {
  return tableRows('query1-a.txt')
    .filter((cells) => cells.length === 8 && /^\d+$/.test(cells[0].toString('latin1')))
    .map((cells) => ({ jobId: cells[0].toString('latin1'), path: cells[2], name: cells[3] }));
}
