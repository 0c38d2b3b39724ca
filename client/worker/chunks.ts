/**
 * CHUNK frames, coalesced. A handler that writes many small pieces (tokens, log lines) would
 * cost a journal row and a round trip per piece. Instead a write to an idle writer goes out at
 * once, and everything written while a frame is in flight, or within `windowMs` of the last
 * frame, goes out together as the next one (up to `maxBytes`). An occasional write sees no added
 * delay; a chatty stream costs at most a row per `windowMs`, not one per write. The bytes arrive
 * in order, unchanged.
 */
import { utf8 } from '../../src/core/bytes.ts';

export class ChunkWriter {
  private parts: Uint8Array[] = [];
  private sending: Promise<void> | null = null;
  private failure: Error | null = null;
  private readonly send: (body: Uint8Array) => Promise<void>;
  private readonly maxBytes: number;
  private readonly windowMs: number;
  private last = -Infinity;
  /** Frames sent so far. */
  frames = 0;

  constructor(send: (body: Uint8Array) => Promise<void>, opts: { maxBytes?: number; windowMs?: number } = {}) {
    this.send = send;
    this.maxBytes = opts.maxBytes ?? 64 << 10;
    this.windowMs = opts.windowMs ?? 3;
  }

  /** Queues bytes (a string is written as UTF-8). Throws if an earlier frame could not be sent. */
  write(data: string | Uint8Array): void {
    if (this.failure) throw this.failure;
    const b = typeof data === 'string' ? utf8(data) : data;
    if (!b.length) return;
    this.parts.push(b);
    this.sending ??= this.drain();
  }

  /** Resolves once everything written so far is in the journal; rejects with a failed send. */
  async flush(): Promise<void> {
    while (this.sending) await this.sending;
    if (this.failure) throw this.failure;
  }

  private async drain(): Promise<void> {
    try {
      await Promise.resolve(); // writes made in the same turn join the first frame
      while (this.parts.length) {
        const wait = this.last + this.windowMs - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        this.last = performance.now();
        await this.send(this.take());
        this.frames++;
      }
    } catch (e) {
      this.failure = e instanceof Error ? e : new Error(String(e));
      this.parts = [];
    } finally {
      this.sending = null;
    }
  }

  /** The next frame's body: queued parts joined, at most maxBytes (a larger part is split). */
  private take(): Uint8Array {
    let n = 0;
    let k = 0;
    while (k < this.parts.length && n + this.parts[k]!.length <= this.maxBytes) n += this.parts[k++]!.length;
    if (k === 0) {
      const first = this.parts[0]!;
      const cut = wholeChars(first, this.maxBytes);
      this.parts[0] = first.subarray(cut);
      return first.subarray(0, cut);
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (const p of this.parts.splice(0, k)) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

/**
 * Where to cut `b` at most `max` bytes in without splitting a UTF-8 character: back before the
 * continuation bytes (10xxxxxx, at most three) that start the rest. So each frame of written
 * text decodes alone (a browser's `f.text()`, one frame at a time); bytes that are no UTF-8 are
 * cut at `max`.
 */
export function wholeChars(b: Uint8Array, max: number): number {
  let cut = max;
  while (cut > max - 3 && cut > 1 && (b[cut]! & 0xc0) === 0x80) cut--;
  return (b[cut]! & 0xc0) === 0x80 ? max : cut;
}
