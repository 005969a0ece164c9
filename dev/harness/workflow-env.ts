/** A local Temporal test environment on the installed Temporal CLI (free ports, search attributes registered). */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { ensureTemporalCli } from '../env/temporal-cli';
import { CatalogNameKey, RebuildPhaseKey } from '../../workflows/search-attributes';

/** Starts `temporal server start-dev` through @temporalio/testing with the project's CLI binary. */
export async function localTestEnv(): Promise<TestWorkflowEnvironment> {
  return TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: ensureTemporalCli() },
      searchAttributes: [CatalogNameKey, RebuildPhaseKey],
    },
  });
}
