/**
 * DryRunCatalog (`start --dry-run`, workflow id `catalog-rebuild/<catalog>/dry-run-<id>`): plans a
 * rebuild on a worker (only workers hold the sources' settings) and changes nothing: no version, no
 * staged listing, no start of or attach to the catalog's rebuild.
 */
import { setWorkflowOptions } from '@temporalio/workflow';
import type { DryRunInput, DryRunResult } from './definitions';
import { dryRunSteps } from './activity-options';

/** Returns the plan a rebuild of `input` would make now. */
export async function DryRunCatalog(input: DryRunInput): Promise<DryRunResult> {
  return dryRunSteps.dryRunPlan(input);
}
setWorkflowOptions({ versioningBehavior: 'PINNED' }, DryRunCatalog);
