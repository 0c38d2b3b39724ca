/**
 * The known ends of followed journals, so that many readers of one job cost what one costs.
 *
 * Every transition of an invocation goes through one place (its queue's object, or the local
 * plane's engine), which therefore knows when a journal changes. When a read for a follower finds
 * the journal's end (not done, fewer frames than asked), the page's frames are kept here as the
 * journal's tail. A follower whose cursor falls in the tail is answered from it, and one whose
 * cursor is the tail's end parks at once, without reading: the next append hands it the new frame
 * (handoff.ts), and the followers parked at one cursor share that one read.
 *
 * The tail is only a copy of rows read in this process, and it is dropped whenever its journal
 * changes in a way other than an append seen here: any wake of the journal's key (the invocation
 * ended, went back to waiting or was moved by a sweep), a trim, or a change made by another process
 * (wakeAll). An append extends it as its batch commits, and a read learns into it as its batch
 * commits: both in commit order, so the tail is never behind a frame it claims to end after.
 */
import type { JournalFrame, JournalPage } from './types.ts';

/** Frames kept per journal: enough for the readers that fall a few appends behind. */
const KEEP = 256;
/** Journals with a tail at once (the least recently learned go first). */
const MOST = 1024;

interface Tail {
  /** The tail covers cursors from `from` up to its last seq: it holds every frame after `from`. */
  from: number;
  page: Omit<JournalPage, 'frames' | 'next'>;
  frames: JournalPage['frames'];
}

export class Tails {
  private readonly byKey = new Map<string, Tail>();

  /** Learns from a page read after `since` with `limit`: a tail when it reached the journal's live end. */
  learn(key: string, since: number, limit: number, page: JournalPage): void {
    if (page.done || page.frames.length >= limit || page.frames.some((f) => f.final)) {
      this.byKey.delete(key);
      return;
    }
    const old = this.byKey.get(key);
    // The page holds every frame after `since`: keep the old tail's frames up to there, then the page's.
    const t: Tail =
      old && since >= old.from && since <= tipOf(old)
        ? { from: old.from, page: meta(page), frames: [...old.frames.filter((f) => f.seq <= since), ...page.frames] }
        : { from: since, page: meta(page), frames: page.frames };
    this.keep(key, t);
  }

  /**
   * A frame an append wrote, seen as its batch committed (in commit order): the tail, if there is
   * one, now ends with it. A final frame ends what a tail may answer: the tail goes.
   */
  appended(key: string, frame: JournalFrame): void {
    const t = this.byKey.get(key);
    if (!t || frame.seq <= tipOf(t)) return;
    if (frame.final) this.byKey.delete(key);
    else this.keep(key, { ...t, frames: [...t.frames, frame] });
  }

  private keep(key: string, tail: Tail): void {
    let t = tail;
    if (t.frames.length > KEEP) {
      const cut = t.frames.length - KEEP;
      t = { ...t, from: t.frames[cut - 1]!.seq, frames: t.frames.slice(cut) };
    }
    this.byKey.delete(key);
    if (this.byKey.size >= MOST) this.byKey.delete(this.byKey.keys().next().value!);
    this.byKey.set(key, t);
  }

  /**
   * The page after `cursor` from the tail (empty when the cursor is at the journal's end), or
   * undefined when the tail cannot tell (no tail, or the cursor outside it): read the rows.
   */
  page(key: string, cursor: number, limit: number): JournalPage | undefined {
    const t = this.byKey.get(key);
    if (!t || cursor < t.from) return undefined;
    if (cursor > tipOf(t)) return undefined;
    const frames = t.frames.filter((f) => f.seq > cursor).slice(0, limit);
    return { ...t.page, frames, next: frames.at(-1)?.seq ?? cursor };
  }

  drop(key: string): void {
    this.byKey.delete(key);
  }

  clear(): void {
    this.byKey.clear();
  }
}

const tipOf = (t: Tail) => t.frames.at(-1)?.seq ?? t.from;
const meta = (p: JournalPage) => ({ trimmedBefore: p.trimmedBefore, done: false, state: p.state, outcome: null });
