/** PublishCatalog: shrink guard and fenced flip of the active pointer, then retirement of old versions. */
import { setWorkflowOptions } from '@temporalio/workflow';
import type { PublishCatalogInput, PublishCatalogResult } from './definitions';
import { longSteps } from './activity-options';

/**
 * Child workflow `catalog-rebuild/<catalog>/publish`. The flip is one transaction; readers see the
 * previous complete version until it commits. Old versions are retired only after the flip.
 * @throws ApplicationFailure NOT_PUBLISHABLE when reconciliation did not pass or the shrink guard refuses.
 */
export async function PublishCatalog(input: PublishCatalogInput): Promise<PublishCatalogResult> {
  const steps = longSteps(input.heartbeatTimeoutMs);
  const { previousVersionId } = await steps.publishVersion({
    catalog: input.catalog,
    versionId: input.versionId,
    allowShrink: input.allowShrink,
  });
  const retired = await steps.retireVersions({ catalog: input.catalog, retention: input.retention });
  return { versionId: input.versionId, previousVersionId, retired };
}
// A child starts on its parent's build and stays there: one rebuild, one build (docs/operations.md).
setWorkflowOptions({ versioningBehavior: 'PINNED' }, PublishCatalog);
