/**
 * The page pipeline: one page read from its source (lib/sources) written in one catalog
 * transaction (lib/catalog), for every source kind, a first attempt and a retry alike (a bucket
 * repair writes its file records through the same `writeFileRead` of lib/catalog).
 */
export { copyPlannedPage } from './copy';
export type { PageCopy } from './copy';
export { RowDigestStream } from './digest';
export type { RowDigest } from './digest';
export {
  describeRejects,
  pageDuplicatesMessage,
  pageFileRejectsMessage,
  pageGoneMessage,
  pageRejectsMessage,
} from './messages';
export type { PageAttempt, PageContext, PageHooks, PageLog } from './types';
export { pageReadWriter, writePage } from './write';
export type { RowWriter, StreamedPage, WrittenRows } from './write';
