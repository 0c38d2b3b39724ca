/**
 * The HTTP client's reading of event streams, without a server: items one by one from batches
 * (oneByOne), and the feed's reader (followFeed) resuming after a dropped connection from the
 * last id it was given, with nothing lost or repeated.
 */
import { describe, expect, it } from 'vitest';
import { followFeed } from '../../client/http/observe.ts';
import { oneByOne } from '../../client/http/sse.ts';

async function* batches<T>(list: T[][], cleanup: { ran: boolean; pulled: number }, fail?: Error): AsyncGenerator<T[]> {
  try {
    for (const b of list) {
      cleanup.pulled++;
      yield b;
    }
    if (fail) throw fail;
  } finally {
    cleanup.ran = true;
  }
}

describe('oneByOne', () => {
  it('answers every item of every batch once, in order, empty batches skipped, then ends', async () => {
    const seen: number[] = [];
    for await (const x of oneByOne(batches([[1, 2], [], [3], [4, 5, 6], []], { ran: false, pulled: 0 }))) seen.push(x);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('a reader that stops early ends the batches, running their cleanup, and pulls no more', async () => {
    const c = { ran: false, pulled: 0 };
    const seen: number[] = [];
    for await (const x of oneByOne(batches([[1, 2, 3], [4], [5]], c))) {
      seen.push(x);
      if (x === 2) break;
    }
    expect(seen).toEqual([1, 2]);
    expect(c).toEqual({ ran: true, pulled: 1 });
  });

  it('answers the items in hand before the error that ended the batches', async () => {
    const seen: number[] = [];
    const it = oneByOne(batches([[1, 2], [3]], { ran: false, pulled: 0 }, new Error('gone')));
    await expect(
      (async () => {
        for await (const x of it) seen.push(x);
      })(),
    ).rejects.toThrow('gone');
    expect(seen).toEqual([1, 2, 3]);
  });
});

describe('followFeed', () => {
  const rec = (id: number) => `id: ${id}\nevent: job\ndata: {"kind":"job","id":"j${id}","status":"queued"}\n\n`;

  it('resumes after a dropped connection from the last id it gave, nothing lost or repeated', async () => {
    const asked: (string | null)[] = [];
    const enc = new TextEncoder();
    const ac = new AbortController();
    const connect = async (last: string | null) => {
      asked.push(last);
      if (asked.length === 1) {
        // Two chunks, a comment and an event of no feed kind between records; then the connection drops.
        const chunks = [`${rec(1)}${rec(2)}: keep-alive\n\n`, `event: ping\ndata: {}\n\n${rec(3)}`];
        return new Response(
          new ReadableStream<Uint8Array>({
            pull(c) {
              const next = chunks.shift();
              if (next === undefined) c.error(new Error('connection dropped'));
              else c.enqueue(enc.encode(next));
            },
          }),
        );
      }
      return new Response(`event: gap\ndata: {"missed":2}\n\n${rec(6)}`);
    };
    const seen: string[] = [];
    for await (const item of followFeed(ac.signal, connect)) {
      seen.push(item.kind === 'gap' ? 'gap' : String((item as { id: string }).id));
      if (seen.length === 5) break;
    }
    expect(seen).toEqual(['j1', 'j2', 'j3', 'gap', 'j6']);
    expect(asked).toEqual([null, '3']);
  });

  it("hands out a batch's records one by one, and resumes after the batch it was given", async () => {
    const asked: (string | null)[] = [];
    const batch = (last: number, ids: number[]) =>
      `id: ${last}\nevent: records\ndata: [${ids.map((i) => `{"kind":"job","id":"j${i}","status":"queued"}`).join(',')}]\n\n`;
    const connect = async (last: string | null) => {
      asked.push(last);
      // Two batches, the second cut across chunks; then the connection drops.
      const first = `${batch(2, [1, 2])}${batch(5, [3, 4, 5])}`;
      const chunks = [first.slice(0, 150), first.slice(150)];
      if (asked.length === 1)
        return new Response(
          new ReadableStream<Uint8Array>({
            pull(c) {
              const next = chunks.shift();
              if (next === undefined) c.error(new Error('connection dropped'));
              else c.enqueue(new TextEncoder().encode(next));
            },
          }),
        );
      return new Response(`${rec(6)}${batch(8, [7, 8])}`);
    };
    const seen: string[] = [];
    for await (const item of followFeed(undefined, connect)) {
      seen.push(String((item as { id: string }).id));
      if (seen.length === 8) break;
    }
    expect(seen).toEqual(['j1', 'j2', 'j3', 'j4', 'j5', 'j6', 'j7', 'j8']);
    expect(asked).toEqual([null, '5']);
  });
});
