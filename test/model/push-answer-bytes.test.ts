/**
 * A receiver's answer costs the pusher (core/push.ts) at most the bytes it may keep of it: a 2xx
 * body past the result limit, or an error page of any size, is read no further than the limit
 * (an isolate has 128 MB, and a queue object pushes for its whole queue). Run against a receiver
 * whose body is a stream that counts what was pulled from it.
 */
import { describe, expect, it } from 'vitest';
import { deliverOnce, RESULT_BYTES } from '../support/pusher.ts';

const CHUNK = 64 << 10;

/** An answer of `total` bytes of 'a', sent in pieces with no content-length, and what was pulled of it. */
function streamed(status: number, total: number) {
  let pulled = 0;
  const piece = new Uint8Array(CHUNK).fill(0x61);
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (pulled >= total) return c.close();
      const n = Math.min(CHUNK, total - pulled);
      pulled += n;
      c.enqueue(piece.subarray(0, n));
    },
  });
  return { answer: async () => new Response(body, { status }), pulled: () => pulled };
}

describe("a receiver's answer and the bytes the pusher reads of it", () => {
  it('a 2xx body past the result limit: read to the limit, not on, and the job fails for it', async () => {
    const big = streamed(200, 64 << 20);
    const { delivered, retry, acked } = await deliverOnce(big.answer);
    expect(delivered).toMatchObject({ outcome: 'nacked', status: 200 });
    expect(delivered.error).toBe(`push target answered 200 with more than ${RESULT_BYTES} bytes; the result limit is ${RESULT_BYTES}`);
    expect([retry, acked]).toEqual([false, undefined]);
    expect(big.pulled()).toBeLessThanOrEqual(RESULT_BYTES + 2 * CHUNK);
  });

  it('a 2xx body of the limit is read whole: as JSON it is the result; as text, kept as a JSON string, it is 2 bytes over', async () => {
    const json = await deliverOnce(
      async () => new Response(`"${'a'.repeat(RESULT_BYTES - 2)}"`, { headers: { 'content-type': 'application/json' } }),
    );
    expect(json.delivered.outcome).toBe('acked');
    expect(json.acked?.length).toBe(RESULT_BYTES);
    // The plane would refuse that ack, leaving the job to its lease's end, attempt after attempt.
    const text = await deliverOnce(streamed(200, RESULT_BYTES).answer);
    expect(text.delivered).toMatchObject({ outcome: 'nacked', status: 200 });
    expect(text.delivered.error).toBe(
      `push target answered 200 with ${RESULT_BYTES} bytes of text, ${RESULT_BYTES + 2} as the JSON string kept as its result; the result limit is ${RESULT_BYTES}`,
    );
    expect([text.retry, text.acked]).toEqual([false, undefined]);
  });

  it('an error page of any size: its first words are the error, the rest unread', async () => {
    const page = streamed(500, 64 << 20);
    const { delivered, retry } = await deliverOnce(page.answer);
    expect(delivered).toMatchObject({ outcome: 'nacked', status: 500 });
    expect(delivered.error).toBe(`push target answered 500: ${'a'.repeat(500)}`);
    expect(retry).toBe(true);
    expect(page.pulled()).toBeLessThanOrEqual(2048 + 2 * CHUNK);
  });
});
