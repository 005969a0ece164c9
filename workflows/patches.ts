/**
 * The one place workflow code asks `patched()` / `deprecatePatch()`. A workflow change ships as a new
 * build under Worker Versioning: running rebuilds stay pinned to the build they started on and never
 * replay the new code. A patch is only for the exception, a fix that must reach rebuilds already
 * running (moved to the new build with `temporal workflow update-options --versioning-override-…`,
 * docs/operations.md, "A fix that must reach running rebuilds"). Its lifecycle, one release per step:
 * 1. `patched`: the fix runs where the history has no marker yet or has this patch's marker; histories
 *    recorded before it keep the old path (`if (patchApplies(id)) { new } else { old }`);
 * 2. `deprecated`: once no rebuild that started before the patch is running, the old path is
 *    deleted and the patch marked deprecated (the marker is still written, so histories of step 1
 *    replay);
 * 3. removed: once no rebuild of step 1 is running, the id leaves {@link PATCHES} and its call goes.
 * `test/patches.test.ts` checks that every call goes through here and that each stage replays the
 * histories of the stage before it. Deterministic: workflow code.
 */
import { deprecatePatch, patched } from '@temporalio/workflow';

/** Where a patch is in its lifecycle. */
export type PatchStage = 'patched' | 'deprecated';

/**
 * The workflows' patches and their stages. At most two ids at a time (one being deprecated, one new).
 * - `cancelled-rebuild-ends-cancelled`: a rebuild ended by the `cancel` signal ends with Temporal
 *   status CANCELLED, its result in the memo, not COMPLETED (workflows/rebuild-catalog.ts,
 *   `cancelled`); histories recorded before it (test/releases/v0.1.0) replay on the old path.
 */
export const PATCHES: ReadonlyMap<string, PatchStage> = new Map<string, PatchStage>([
  ['cancelled-rebuild-ends-cancelled', 'patched'],
]);

/**
 * Whether the patched code path runs, for patch `id` at `stage` (default: its stage in
 * {@link PATCHES}): `patched` asks `patched(id)`; `deprecated` calls `deprecatePatch(id)` and is
 * always true.
 * @throws Error when `id` has no stage (not registered and none given): a workflow-task failure.
 */
export function patchApplies(id: string, stage: PatchStage | undefined = PATCHES.get(id)): boolean {
  if (stage === 'patched') return patched(id);
  if (stage === 'deprecated') {
    deprecatePatch(id);
    return true;
  }
  throw new Error(`patch ${id} is not registered in workflows/patches.ts`);
}
