/**
 * Bookmarks (docs/contract.md, "Reads and replicas"): D1's Sessions API names a point in a
 * database's history with a bookmark; a read in a session that starts from one is served by a copy
 * at least that new (a replica, where the deployment has read replication). A namespace lives on
 * one shard, and bookmarks are per database, so lakeshore's bookmark names its shard too:
 *
 *   x-lakeshore-bookmark: <shard binding>:<D1 bookmark>   e.g. DB_1:00000085-0000024c-00004c6d-8e61117bf38d7adb71b934ebbf891683
 *
 * Every answer that wrote or read D1 carries the newest one it saw; a client sends back the newest
 * it has, and the Worker's own reads (get, count, a journal page, a listing, the overview) then
 * read a copy that has its writes. A client that sends none reads the primary, as before.
 */
import { badRequest } from '../core/errors.ts';

export const BOOKMARK_HEADER = 'x-lakeshore-bookmark';

export interface Bookmark {
  shard: string;
  d1: string;
}

/** A shard's binding, and a D1 bookmark as D1 writes them (four hex groups: 8-8-8-32). */
const FORM = /^([A-Z][A-Z0-9_]{0,63}):([0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{8}-[0-9a-f]{32})$/;

/** A request's bookmark, or null when it sends none; a malformed one is a 400. */
export function parseBookmark(v: string | null | undefined): Bookmark | null {
  if (v === null || v === undefined || v === '') return null;
  // A client sends the same bookmark until its next write: the last one read is kept.
  if (v === last.raw) return last.parsed;
  const m = FORM.exec(v.trim());
  if (!m) throw badRequest(`${BOOKMARK_HEADER} must be <shard>:<D1 bookmark>, as an answer gave it`);
  last = { raw: v, parsed: { shard: m[1]!, d1: m[2]! } };
  return last.parsed;
}

let last: { raw: string; parsed: Bookmark | null } = { raw: '', parsed: null };

export const formatBookmark = (b: Bookmark): string => `${b.shard}:${b.d1}`;

/** The newer of two bookmarks of one shard; of two shards (a namespace that moved), the later seen. */
export function newer(a: Bookmark | null, b: Bookmark | null): Bookmark | null {
  if (!a) return b;
  if (!b) return a;
  if (a.shard !== b.shard) return b;
  return b.d1 > a.d1 ? b : a;
}
