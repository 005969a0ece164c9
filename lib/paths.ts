import * as path from 'node:path';

/**
 * Absolute path of the project root (the folder holding package.json).
 * This module always runs compiled, from `dist/lib/paths.js`.
 */
export function projectRoot(): string {
  return path.resolve(__dirname, '..', '..');
}

/** Git-ignored folder for tools installed by the bootstrap (`.tools/`). */
export const toolsDir = (): string => path.join(projectRoot(), '.tools');
/** Git-ignored folder for server data (`.data/`): dev server database, logs. */
export const dataDir = (): string => path.join(projectRoot(), '.data');
