/** Search attributes of rebuild workflows (keyword), registered on the Temporal namespace. */
import { defineSearchAttributeKey } from '@temporalio/common';

/** The catalog a workflow rebuilds: `temporal workflow list --query "CatalogName='x'"`. */
export const CatalogNameKey = defineSearchAttributeKey('CatalogName', 'KEYWORD');
/** The rebuild's phase (planning, copying, … done, failed, cancelled). */
export const RebuildPhaseKey = defineSearchAttributeKey('RebuildPhase', 'KEYWORD');
/** Names the worker checks at start. */
export const REQUIRED_SEARCH_ATTRIBUTES = ['CatalogName', 'RebuildPhase'] as const;
