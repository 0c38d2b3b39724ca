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
 * (wakeAll). An append extends it only through the read that rides with it.
 */
import type { JournalPage } from './types.ts';

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
    const tip = old ? (old.frames.at(-1)?.seq ?? old.from) : null;
    let t: Tail;
    if (old && tip === since) t = { from: old.from, page: meta(page), frames: [...old.frames, ...page.frames] };
    else if (old && page.frames.length === 0 && since >= old.from && since <= (tip ?? old.from)) return; // nothing new
    else t = { from: since, page: meta(page), frames: page.frames };
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
    const tip = t.frames.at(-1)?.seq ?? t.from;
    if (cursor > tip) return undefined;
    const frames = t.frames.filter((f) => f.seq > cursor).slice(0, limit);
    return { ...t.page, frames, next: frames.at(-1)?.seq ?? cursor };
  }

  /** Whether the tail of `key` holds the frame `seq` (or one after it). */
  covers(key: string, seq: number): boolean {
    const t = this.byKey.get(key);
    return t !== undefined && (t.frames.at(-1)?.seq ?? t.from) >= seq;
  }

  drop(key: string): void {
    this.byKey.delete(key);
  }

  clear(): void {
    this.byKey.clear();
  }
}

const meta = (p: JournalPage) => ({ trimmedBefore: p.trimmedBefore, done: false, state: p.state, outcome: null });
