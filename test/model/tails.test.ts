/**
 * The journals' tails (core/tails.ts) hold copies of frames in the memory of the queue object (an
 * isolate of 128 MB) or the local plane: bounded in bytes per journal and in all, and a page from a
 * tail is bounded as a read's is (about PAGE_BYTES, at least one frame). A page that stopped before
 * the journal's end is never learned as its tail: followers at its end would park past frames that
 * are there.
 */
import { describe, expect, it } from 'vitest';
import { leftOut, PAGE_BYTES, reachedEnd } from '../../src/core/sql/journal-read.ts';
import { Tails } from '../../src/core/tails.ts';
import type { JournalFrame, JournalPage } from '../../src/core/types.ts';

const KIB = 1 << 10;
const frame = (seq: number, size: number): JournalFrame => ({
  seq,
  kind: 0,
  body: new Uint8Array(size),
  meta: null,
  attempt: 1,
  final: false,
});
const pageOf = (frames: JournalFrame[], since: number): JournalPage => ({
  frames,
  next: frames.at(-1)?.seq ?? since,
  trimmedBefore: -1,
  done: false,
  state: 'running',
  outcome: null,
});

describe('journal tails', () => {
  it('a tail keeps about 1 MiB of a journal of large frames, and answers pages of about PAGE_BYTES', () => {
    const t = new Tails();
    t.learn('j', -1, 1000, pageOf([], -1)); // a follower at the live end of an empty journal
    for (let s = 0; s < 40; s++) t.appended('j', frame(s, 256 * KIB));
    expect(t.held.journals).toBe(1);
    expect(t.held.bytes).toBeLessThanOrEqual(PAGE_BYTES + 256 * KIB + 4 * KIB);
    // The tail no longer covers the journal's start: a read answers that cursor.
    expect(t.page('j', -1, 1000)).toBeUndefined();
    // From the oldest cursor it covers: the rest of the journal, about a page.
    const kept = [...Array(40).keys()].find((s) => t.page('j', s, 1000) !== undefined)!;
    expect(kept).toBeGreaterThan(30);
    const rest = t.page('j', kept, 1000)!;
    expect(rest.frames.map((f) => f.seq)).toEqual([...Array(39 - kept).keys()].map((i) => kept + 1 + i));
    expect(rest.frames.reduce((n, f) => n + f.body.length, 0)).toBeLessThanOrEqual(PAGE_BYTES + 256 * KIB);
    expect(reachedEnd(rest)).toBe(true);
    // Cut at `limit`: short of the journal's end, and said so.
    const two = t.page('j', kept, 2)!;
    expect(two.frames).toHaveLength(2);
    expect(reachedEnd(two)).toBe(false);
    // At the end, an empty page that is the end.
    const last = t.page('j', 39, 1000)!;
    expect(last.frames).toEqual([]);
    expect(reachedEnd(last)).toBe(true);
  });

  it('all tails together hold at most 16 MiB: the least recently kept go first', () => {
    const t = new Tails();
    for (let j = 0; j < 40; j++) t.learn(`j${j}`, -1, 1000, pageOf([frame(0, 512 * KIB), frame(1, 400 * KIB)], -1));
    expect(t.held.bytes).toBeLessThanOrEqual(16 << 20);
    expect(t.held.journals).toBeLessThan(40);
    expect(t.page('j0', -1, 1000)).toBeUndefined();
    expect(t.page('j39', -1, 1000)!.frames.map((f) => f.seq)).toEqual([0, 1]);
    t.drop('j39');
    t.clear();
    expect(t.held).toEqual({ journals: 0, bytes: 0 });
  });

  it('a page cut short of the journal’s end is not learned as its tail', () => {
    const t = new Tails();
    t.learn('j', -1, 1000, leftOut(pageOf([frame(0, 10), frame(1, 10)], -1)));
    expect(t.page('j', 1, 1000)).toBeUndefined();
    t.learn('j', -1, 1000, pageOf([frame(0, 10), frame(1, 10)], -1));
    expect(t.page('j', 1, 1000)!.frames).toEqual([]);
  });
});
