/** PublishCatalog: shrink guard and fenced flip of the active pointer, then retirement of old versions. */
import { ActivityFailure, setWorkflowOptions } from '@temporalio/workflow';
import { failureText } from './failure-text';
import type { PublishCatalogInput, PublishCatalogResult } from './definitions';
import { longSteps } from './activity-options';

/**
 * Child workflow `catalog-rebuild/<catalog>/publish`. The flip is one transaction; readers see the
 * previous complete version until it commits. Old versions are retired only after the flip.
 * A retirement that gives up after the flip is returned as `retireFailure`: the version is published.
 * @throws ApplicationFailure NOT_PUBLISHABLE when reconciliation did not pass or the shrink guard refuses.
 */
export async function PublishCatalog(input: PublishCatalogInput): Promise<PublishCatalogResult> {
  const steps = longSteps(input.heartbeatTimeoutMs);
  const { previousVersionId } = await steps.publishVersion({
    catalog: input.catalog,
    versionId: input.versionId,
    allowShrink: input.allowShrink,
  });
  // After the flip the version is published whatever happens to the retirement: a retirement that
  // gives up is reported, not a failed publish (the next publish retires what it left).
  try {
    const retired = await steps.retireVersions({ catalog: input.catalog, retention: input.retention });
    return { versionId: input.versionId, previousVersionId, retired };
  } catch (err) {
    if (!(err instanceof ActivityFailure)) throw err;
    return { versionId: input.versionId, previousVersionId, retired: [], retireFailure: failureText(err) };
  }
}
// A child starts on its parent's build and stays there: one rebuild, one build (docs/operations.md).
setWorkflowOptions({ versioningBehavior: 'PINNED' }, PublishCatalog);
