/**
 * The lifecycle feed of one queue (core/feed.ts) as Server-Sent Events, served by the queue
 * object: one `job` event per committed transition, in commit order, its id `<instance>.<seq>`.
 * A stream starts with a `position` event (data `{}`) whose id is where it starts, so a reader
 * that saw no record still resumes from there.
 *
 * Resuming: the object keeps the last WINDOW records. A reader that reconnects with
 * `Last-Event-ID` of this instance within the window gets every record after it, once. A reader
 * further behind, or whose id is of an earlier instance of the object (it restarted), first gets a
 * `gap` event (`{"reason": "behind" | "restarted", "resumed_at"}`): it missed records, and should
 * list again. Records are kept only while readers have been around in the last IDLE_MS: with
 * nobody listening the feed makes no record at all.
 */
import type { Feed, FeedRecord } from '../core/feed.ts';
import { KEEPALIVE, KEEPALIVE_MS, RETRY } from '../core/sse.ts';
import { end, readerStream, send, write, type Reader, type ReaderHooks } from './journal-streams.ts';

const enc = new TextEncoder();

/** Records kept for resuming readers. */
export const FEED_WINDOW = 10_000;
/** Most time a record waits to go out with the records told after it (FeedStreams.told). */
const FLUSH_MS = 10;
/** How long records are still kept after the last reader left (for it to come back). */
const IDLE_MS = 10 * 60_000;

/** Which records a reader asked for (`?kinds=`): both kinds, or one. */
export type Kinds = 'all' | 'job' | 'worker';

interface Kept {
  seq: number;
  kind: FeedRecord['kind'];
  text: string;
}

export class FeedStreams {
  private readonly feed: Feed;
  /** This object instance, in every id: an id of another instance is from before a restart. */
  private instance = newInstance();
  private seq = 0;
  private readonly kept: Kept[] = [];
  /** kept[head] is the oldest record in the window; those before it are dropped (spliced off in bulk). */
  private head = 0;
  private readonly readers = new Map<Reader, Kinds>();
  private off: (() => void) | null = null;
  private idle: ReturnType<typeof setTimeout> | null = null;
  private keepalive: ReturnType<typeof setInterval> | null = null;
  /** What was told since the last flush, per kinds; `flushTimer` writes it out. */
  private pending: Record<Kinds, string> = { all: '', job: '', worker: '' };
  private flushTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(feed: Feed) {
    this.feed = feed;
  }

  get size(): number {
    return this.readers.size;
  }

  /** A reader's stream of the records of `kinds`, resuming after `lastEventId` when it is in the window. */
  open(lastEventId: string | null, hooks?: ReaderHooks, kinds: Kinds = 'all'): ReadableStream<Uint8Array> {
    this.listen();
    // The readers there already get what is pending first: this one starts after it (from the window).
    this.flush();
    const { readable, r } = readerStream(0, hooks, () => this.leave(r));
    // What a reader gets first goes out as one write: the retry, the records it missed (or a gap),
    // and where it starts (a reconnect with that id resumes there even if no record came since).
    let first = RETRY;
    if (lastEventId) {
      const [inst, at] = lastEventId.split('.');
      const after = Number(at);
      const oldest = this.kept[this.head]?.seq ?? this.seq + 1;
      if (inst !== this.instance || !Number.isInteger(after) || after > this.seq) first += gap('restarted', this.seq);
      else if (after < oldest - 1) first += gap('behind', this.seq);
      else
        for (let i = this.head; i < this.kept.length; i++) {
          const k = this.kept[i]!;
          if (k.seq > after && (kinds === 'all' || kinds === k.kind)) first += k.text;
        }
    }
    send(r, `${first}id: ${this.instance}.${this.seq}\nevent: position\ndata: {}\n\n`);
    this.readers.set(r, kinds);
    return readable;
  }

  private listen(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    if (this.off) return;
    this.off = this.feed.on((_ns, records) => this.told(records));
    this.keepalive = setInterval(() => {
      for (const r of this.readers.keys()) send(r, KEEPALIVE);
    }, KEEPALIVE_MS);
  }

  /**
   * One batch's records: each made and encoded once, whatever the readers. They go out with the
   * others told within FLUSH_MS, one write per reader: a write costs each reader's stream about the
   * same whatever its size, so under load ten readers cost ten writes a flush, not ten a batch.
   */
  private told(records: FeedRecord[]): void {
    const texts = this.pending;
    for (const rec of records) {
      const seq = ++this.seq;
      const text = `id: ${this.instance}.${seq}\nevent: ${rec.kind}\ndata: ${JSON.stringify(rec)}\n\n`;
      this.kept.push({ seq, kind: rec.kind, text });
      texts.all += text;
      texts[rec.kind] += text;
    }
    this.flushTimer ??= setTimeout(() => this.flush(), FLUSH_MS);
    // The window moves by its head; the array is shifted once per FEED_WINDOW records, not once a batch.
    this.head = Math.max(this.head, this.kept.length - FEED_WINDOW);
    if (this.head >= FEED_WINDOW) {
      this.kept.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Writes what was told since the last flush to every reader (of the kinds each asked for). */
  private flush(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const texts = this.pending;
    if (!texts.all) return;
    this.pending = { all: '', job: '', worker: '' };
    const bytes: Partial<Record<Kinds, Uint8Array>> = {};
    for (const [r, kinds] of this.readers) if (texts[kinds]) write(r, (bytes[kinds] ??= enc.encode(texts[kinds])));
  }

  private leave(r: Reader): void {
    r.gone = true;
    this.readers.delete(r);
    if (this.readers.size || this.idle) return;
    // Nobody listens: keep the records a while for a reader to come back, then make none.
    this.idle = setTimeout(() => {
      this.idle = null;
      if (this.readers.size) return;
      this.off?.();
      this.off = null;
      if (this.keepalive) clearInterval(this.keepalive);
      this.keepalive = null;
      this.kept.length = 0;
      this.head = 0;
      // Records were not kept from here on: an id from before is of another instance (a gap).
      this.instance = newInstance();
    }, IDLE_MS);
  }

  /** Ends every stream (for tests of a reader that must resume). */
  closeAll(): void {
    this.flush();
    for (const r of this.readers.keys()) end(r, '');
  }
}

const newInstance = () => Math.floor(Math.random() * 36 ** 6).toString(36);
const gap = (reason: 'behind' | 'restarted', at: number) => `event: gap\ndata: ${JSON.stringify({ reason, resumed_at: at })}\n\n`;
