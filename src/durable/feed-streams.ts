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
 *
 * A reader may take its records in batches (`?batch=1`): the records that go out together come as
 * one `records` event whose data is their JSON array, in commit order, its id the last one's. The
 * same records, positions and gaps; a reader parses one event where it parsed dozens.
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

/** How a reader takes records: an event each, or those that go out together as one `records` event. */
export type Framing = 'each' | 'batch';

/** Most records in one `records` event (a reader that resumes may be owed the whole window). */
export const MAX_BATCH_RECORDS = 1_000;

interface Kept {
  seq: number;
  kind: FeedRecord['kind'];
  json: string;
}

/** Records told since the last flush, for readers of one kinds: as events, and as a batch's parts. */
interface Pending {
  each: string;
  jsons: string[];
  seqs: number[];
}

const noPending = (): Record<Kinds, Pending> => ({
  all: { each: '', jsons: [], seqs: [] },
  job: { each: '', jsons: [], seqs: [] },
  worker: { each: '', jsons: [], seqs: [] },
});

export class FeedStreams {
  private readonly feed: Feed;
  /** This object instance, in every id: an id of another instance is from before a restart. */
  private instance = newInstance();
  private seq = 0;
  private readonly kept: Kept[] = [];
  /** kept[head] is the oldest record in the window; those before it are dropped (spliced off in bulk). */
  private head = 0;
  private readonly readers = new Map<Reader, { kinds: Kinds; framing: Framing }>();
  /** Readers by framing: a framing no reader takes is not put together. */
  private readonly framings: Record<Framing, number> = { each: 0, batch: 0 };
  private off: (() => void) | null = null;
  private idle: ReturnType<typeof setTimeout> | null = null;
  private keepalive: ReturnType<typeof setInterval> | null = null;
  /** What was told since the last flush, per kinds; `flushTimer` writes it out. */
  private pending = noPending();
  private flushTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(feed: Feed) {
    this.feed = feed;
  }

  get size(): number {
    return this.readers.size;
  }

  /** A reader's stream of the records of `kinds`, resuming after `lastEventId` when it is in the window. */
  open(lastEventId: string | null, hooks?: ReaderHooks, kinds: Kinds = 'all', framing: Framing = 'each'): ReadableStream<Uint8Array> {
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
      else {
        const missed: Kept[] = [];
        for (let i = this.head; i < this.kept.length; i++) {
          const k = this.kept[i]!;
          if (k.seq > after && (kinds === 'all' || kinds === k.kind)) missed.push(k);
        }
        if (framing === 'each') for (const k of missed) first += this.event(k.seq, k.kind, k.json);
        else if (missed.length)
          first += this.batches({
            each: '',
            jsons: missed.map((k) => k.json),
            seqs: missed.map((k) => k.seq),
          });
      }
    }
    send(r, `${first}id: ${this.instance}.${this.seq}\nevent: position\ndata: {}\n\n`);
    this.readers.set(r, { kinds, framing });
    this.framings[framing]++;
    return readable;
  }

  private event(seq: number, kind: FeedRecord['kind'], json: string): string {
    return `id: ${this.instance}.${seq}\nevent: ${kind}\ndata: ${json}\n\n`;
  }

  private batch(jsons: string[], last: number): string {
    return `id: ${this.instance}.${last}\nevent: records\ndata: [${jsons.join(',')}]\n\n`;
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
    const p = this.pending;
    const each = this.framings.each > 0;
    const batches = this.framings.batch > 0;
    for (const rec of records) {
      const seq = ++this.seq;
      const json = JSON.stringify(rec);
      this.kept.push({ seq, kind: rec.kind, json });
      if (each) {
        const text = this.event(seq, rec.kind, json);
        p.all.each += text;
        p[rec.kind].each += text;
      }
      if (batches) {
        p.all.jsons.push(json);
        p.all.seqs.push(seq);
        p[rec.kind].jsons.push(json);
        p[rec.kind].seqs.push(seq);
      }
    }
    this.flushTimer ??= setTimeout(() => this.flush(), FLUSH_MS);
    // The window moves by its head; the array is shifted once per FEED_WINDOW records, not once a batch.
    this.head = Math.max(this.head, this.kept.length - FEED_WINDOW);
    if (this.head >= FEED_WINDOW) {
      this.kept.splice(0, this.head);
      this.head = 0;
    }
  }

  /**
   * Writes what was told since the last flush to every reader (of the kinds each asked for, framed
   * as it asked), each text encoded once for all the readers that take it.
   */
  private flush(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const p = this.pending;
    if (!p.all.each && !p.all.jsons.length) return;
    this.pending = noPending();
    const bytes = new Map<string, Uint8Array>();
    const bytesOf = (key: string, text: () => string) => {
      let b = bytes.get(key);
      if (!b) bytes.set(key, (b = enc.encode(text())));
      return b;
    };
    for (const [r, { kinds, framing }] of this.readers) {
      const k = p[kinds];
      if (framing === 'each') {
        if (k.each)
          write(
            r,
            bytesOf(kinds, () => k.each),
          );
      } else if (k.jsons.length)
        write(
          r,
          bytesOf(`${kinds} batch`, () => this.batches(k)),
        );
    }
  }

  /** Records as `records` events of at most MAX_BATCH_RECORDS each, each event's id its last record's. */
  private batches(k: Pending): string {
    if (k.jsons.length <= MAX_BATCH_RECORDS) return this.batch(k.jsons, k.seqs.at(-1)!);
    let out = '';
    for (let i = 0; i < k.jsons.length; i += MAX_BATCH_RECORDS) {
      const end = Math.min(k.jsons.length, i + MAX_BATCH_RECORDS);
      out += this.batch(k.jsons.slice(i, end), k.seqs[end - 1]!);
    }
    return out;
  }

  private leave(r: Reader): void {
    r.gone = true;
    const was = this.readers.get(r);
    if (was) this.framings[was.framing]--;
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
