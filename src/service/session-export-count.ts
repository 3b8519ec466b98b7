/**
 * Counting the entries of a Cap'n Web session's exports table without walking its imports.
 *
 * A session's entry limit counts exports: entries the peer created on this side. Cap'n Web
 * (0.12) offers one count, `RpcSession.getStats()`, which walks both tables. During a stream
 * the imports table holds every write still in flight (thousands, as many as the flow-control
 * window allows), so each count cost hundreds of microseconds and a stream several
 * microseconds per item, for entries the limit never reads.
 *
 * The exports table is reachable from the session's main stub: the stub's raw form (behind a
 * symbol Cap'n Web keeps to itself, which any stub method reads from `this`) holds the main
 * hook, and the main hook its session. The count walks that table exactly as `getStats()`
 * does, so it is the same number. Should a Cap'n Web release reshape any of this, the
 * counter falls back to `getStats()`: slower, never wrong.
 *
 * @module
 */
import { RpcStub } from 'capnweb';

/** What the counter needs of a session: Cap'n Web's `RpcSession`. */
export interface CountableRpcSession {
  getStats(): { exports: number; imports: number };
  getRemoteMain(): unknown;
}

/** The part of Cap'n Web's session implementation the count reads. */
interface SessionTables {
  exports: unknown;
  imports: unknown;
  /** The id the next export this side makes gets: it counts down from -1. */
  nextExportId?: unknown;
}

let rawStubKey: symbol | null | undefined;

/**
 * The symbol under which a stub keeps its raw form, read off a stub method: it looks the
 * symbol up on `this`, here a probe that notes the key and answers with a harmless hook.
 */
function findRawStubKey(): symbol | null {
  let found: symbol | null = null;
  const probe = new Proxy({}, {
    get(_target, key) {
      if (typeof key === 'symbol' && found === null) found = key;
      return { hook: { onBroken() {} } };
    },
  });
  const onRpcBroken = (RpcStub.prototype as { onRpcBroken?: unknown }).onRpcBroken;
  if (typeof onRpcBroken !== 'function') return null;
  try {
    onRpcBroken.call(probe, () => {});
  } catch {
    return null;
  }
  return found;
}

function countKeys(table: object): number {
  let count = 0;
  for (const _ in table) count++;
  return count;
}

/** The session's tables, when its main stub leads to them; else `undefined`. */
function sessionTables(session: CountableRpcSession): SessionTables | undefined {
  rawStubKey ??= findRawStubKey();
  if (rawStubKey === null) return undefined;
  try {
    const main = session.getRemoteMain() as Record<symbol, unknown>;
    const raw = main[rawStubKey] as { hook?: { session?: unknown } } | undefined;
    const tables = raw?.hook?.session as SessionTables | undefined;
    if (tables === undefined || tables === null) return undefined;
    return Array.isArray(tables.exports) && Array.isArray(tables.imports) ? tables : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the tables found are the ones `getStats()` counts. */
function countsMatch(tables: SessionTables, stats: { exports: number; imports?: number }): boolean {
  return countKeys(tables.exports as object) === stats.exports &&
    countKeys(tables.imports as object) === stats.imports;
}

/** The tables when they are the ones `getStats()` counts; else `undefined`. */
function verifiedTables(session: CountableRpcSession): SessionTables | undefined {
  const tables = sessionTables(session);
  return tables !== undefined && countsMatch(tables, session.getStats()) ? tables : undefined;
}

/**
 * A function returning how many entries `session`'s exports table holds: the `exports` of
 * `getStats()`, without walking the imports table.
 */
export function sessionExportCounter(session: CountableRpcSession): () => number {
  const tables = verifiedTables(session);
  if (tables === undefined) return () => session.getStats().exports;
  return () => countKeys(tables.exports as object);
}

/** How many exports a session has ever made: each one grows one of these two. */
interface ExportsMade {
  /** Entries the peer created: appended to the table, which never shrinks. */
  appended: number;
  /** Entries this side created: numbered downwards from -1. */
  nextExportId: number;
}

function exportsMade(tables: SessionTables): ExportsMade | undefined {
  const { nextExportId } = tables;
  if (typeof nextExportId !== 'number') return undefined;
  return { appended: (tables.exports as unknown[]).length, nextExportId };
}

/**
 * A check of whether `session`'s exports table holds more than `maxEntries` entries, exact
 * each time it is asked. Walking the table costs time in proportion to every entry it ever
 * held on some engines (JavaScriptCore walks the holes released entries leave, so on Bun a
 * long session's count grew with each call it had served). The check walks only when it
 * must: the count at the last walk plus every export made since (the table's length grows by
 * one per entry the peer creates, and the next id of this side's own exports counts down by
 * one) bounds the count from above, and while that bound is within the limit so is the count.
 */
export function sessionExportLimit(
  session: CountableRpcSession,
  maxEntries: number,
): () => boolean {
  const tables = verifiedTables(session);
  const made = tables === undefined ? undefined : exportsMade(tables);
  if (tables === undefined || made === undefined) {
    return () => session.getStats().exports > maxEntries;
  }
  let counted = countKeys(tables.exports as object);
  let since = made;
  return () => {
    const now = exportsMade(tables);
    if (now !== undefined) {
      const peerMade = now.appended - since.appended;
      const ownMade = since.nextExportId - now.nextExportId;
      // Never negative unless the table was reshaped; then the bound says nothing: walk.
      if (peerMade >= 0 && ownMade >= 0 && counted + peerMade + ownMade <= maxEntries) {
        return false;
      }
    }
    counted = countKeys(tables.exports as object);
    since = now ?? since;
    return counted > maxEntries;
  };
}
