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
import { leftOut, PAGE_BYTES, reachedEnd } from './sql/journal-read.ts';
import type { JournalFrame, JournalPage } from './types.ts';

/** Frames kept per journal: enough for the readers that fall a few appends behind. */
const KEEP = 256;
/** Frame bytes kept per journal (past its last frame): frames of 256 KiB would make KEEP 64 MB. */
const KEEP_BYTES = PAGE_BYTES;
/** Journals with a tail at once (the least recently learned go first). */
const MOST = 1024;
/** Frame bytes kept in all tails together: an isolate has 128 MB, and the tails are only a shortcut. */
const MOST_BYTES = 16 << 20;

/** What a frame costs a tail: its body, and a guess at the rest (meta, numbers, the object). */
const sizeOf = (f: JournalFrame) => f.body.length + (f.meta ? 256 : 0) + 64;

interface Tail {
  /** The tail covers cursors from `from` up to its last seq: it holds every frame after `from`. */
  from: number;
  page: Omit<JournalPage, 'frames' | 'next'>;
  frames: JournalPage['frames'];
  bytes: number;
}

export class Tails {
  private readonly byKey = new Map<string, Tail>();
  /** The frame bytes of every tail (sizeOf). */
  private bytes = 0;

  /** What the tails hold now: journals, and their frame bytes. */
  get held(): { journals: number; bytes: number } {
    return { journals: this.byKey.size, bytes: this.bytes };
  }

  /** Learns from a page read after `since` with `limit`: a tail when it reached the journal's live end. */
  learn(key: string, since: number, limit: number, page: JournalPage): void {
    if (page.done || page.frames.length >= limit || !reachedEnd(page) || page.frames.some((f) => f.final)) {
      this.drop(key);
      return;
    }
    const old = this.byKey.get(key);
    // The page holds every frame after `since`: keep the old tail's frames up to there, then the page's.
    const frames =
      old && since >= old.from && since <= tipOf(old) ? [...old.frames.filter((f) => f.seq <= since), ...page.frames] : page.frames;
    this.keep(key, old && since >= old.from && since <= tipOf(old) ? old.from : since, meta(page), frames);
  }

  /**
   * A frame an append wrote, seen as its batch committed (in commit order): the tail, if there is
   * one, now ends with it. A final frame ends what a tail may answer: the tail goes.
   */
  appended(key: string, frame: JournalFrame): void {
    const t = this.byKey.get(key);
    if (!t || frame.seq <= tipOf(t)) return;
    if (frame.final) this.drop(key);
    else this.keep(key, t.from, t.page, [...t.frames, frame]);
  }

  /**
   * Keeps `frames` (every frame after `from`) as the tail of `key`, less its oldest frames past
   * KEEP or KEEP_BYTES (the tail then starts after the last one cut), and makes room for it: the
   * least recently kept tails go past MOST tails or MOST_BYTES.
   */
  private keep(key: string, from: number, page: Tail['page'], frames: JournalFrame[]): void {
    let bytes = 0;
    let cut = frames.length;
    while (cut > 0 && frames.length - cut < KEEP && bytes < KEEP_BYTES) bytes += sizeOf(frames[--cut]!);
    const t: Tail = cut ? { from: frames[cut - 1]!.seq, page, frames: frames.slice(cut), bytes } : { from, page, frames, bytes };
    this.drop(key);
    while (this.byKey.size && (this.byKey.size >= MOST || this.bytes + t.bytes > MOST_BYTES)) this.drop(this.byKey.keys().next().value!);
    this.byKey.set(key, t);
    this.bytes += t.bytes;
  }

  /**
   * The page after `cursor` from the tail (empty when the cursor is at the journal's end), or
   * undefined when the tail cannot tell (no tail, or the cursor outside it): read the rows.
   */
  page(key: string, cursor: number, limit: number): JournalPage | undefined {
    const t = this.byKey.get(key);
    if (!t || cursor < t.from) return undefined;
    if (cursor > tipOf(t)) return undefined;
    // As a read would answer: at most `limit` frames and about PAGE_BYTES (at least one).
    const frames: JournalFrame[] = [];
    let bytes = 0;
    let cut = false;
    for (const f of t.frames) {
      if (f.seq <= cursor) continue;
      if (frames.length >= limit || bytes >= PAGE_BYTES) {
        cut = true;
        break;
      }
      frames.push(f);
      bytes += f.body.length + (f.meta ? JSON.stringify(f.meta).length : 0);
    }
    const page = { ...t.page, frames, next: frames.at(-1)?.seq ?? cursor };
    return cut ? leftOut(page) : page;
  }

  drop(key: string): void {
    const t = this.byKey.get(key);
    if (!t) return;
    this.byKey.delete(key);
    this.bytes -= t.bytes;
  }

  clear(): void {
    this.byKey.clear();
    this.bytes = 0;
  }
}

const tipOf = (t: Tail) => t.frames.at(-1)?.seq ?? t.from;
const meta = (p: JournalPage) => ({ trimmedBefore: p.trimmedBefore, done: false, state: p.state, outcome: null });
