/**
 * A receiver's answer costs the pusher (core/push.ts) at most the bytes it may keep of it: a 2xx
 * body past the result limit, or an error page of any size, is read no further than the limit
 * (an isolate has 128 MB, and a queue object pushes for its whole queue). Run against a receiver
 * whose body is a stream that counts what was pulled from it.
 */
import { describe, expect, it } from 'vitest';
import { ANSWER_BYTES } from '../../src/core/push-answers.ts';
import { deliverOnce, type Pushed, pushJobs, RESULT_BYTES } from '../support/pusher.ts';

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

  it('answers of many deliveries at once hold at most ANSWER_BYTES between them until their jobs are settled, and every job is acked', async () => {
    // 24 deliveries at once, each answered at once with a result of the limit.
    const pulled = new Map<string, number>();
    const into: Pushed = { told: [], acked: new Map(), nacked: new Map() };
    let most = 0;
    // The bytes read of answers whose job is not yet acked.
    const held = () => [...pulled].reduce((sum, [id, n]) => sum + (into.acked.has(id) ? 0 : n), 0);
    const result = new TextEncoder().encode(`"${'a'.repeat(RESULT_BYTES - 2)}"`);
    const run = pushJobs(
      24,
      async (body) => {
        const id = (JSON.parse(body) as { id: string }).id;
        let at = 0;
        const stream = new ReadableStream<Uint8Array>({
          pull(c) {
            if (at >= result.length) return c.close();
            const piece = result.subarray(at, at + CHUNK);
            at += piece.length;
            pulled.set(id, at);
            most = Math.max(most, held());
            c.enqueue(piece);
          },
        });
        return new Response(stream, { headers: { 'content-type': 'application/json', 'content-length': String(result.length) } });
      },
      { concurrency: 24, into },
    );
    const out = await run;
    expect(out.acked.size).toBe(24);
    expect([...out.acked.values()].every((r) => r?.length === RESULT_BYTES)).toBe(true);
    // A stream pulls one piece ahead before it is read: 24 pieces of slack.
    expect(most).toBeLessThanOrEqual(ANSWER_BYTES + 24 * CHUNK);
    expect(most).toBeGreaterThan(ANSWER_BYTES / 2);
  });

  it('a batch answer is at most ANSWER_BYTES, whatever its jobs may each answer', async () => {
    const outcomes = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`j${i}`, { status: 'ok', result: 'a'.repeat(100_000) }]));
    const text = JSON.stringify({ outcomes });
    const body = new TextEncoder().encode(text);
    const out = await pushJobs(100, async () => new Response(body, { headers: { 'content-type': 'application/json' } }), {
      batchSize: 100,
    });
    expect(out.acked.size).toBe(0);
    expect([...out.nacked.values()].every((retry) => retry === false)).toBe(true);
    expect(out.told[0]!.error).toBe(
      `push target answered 200 with more than ${ANSWER_BYTES} bytes; a batch of 100 may answer ${ANSWER_BYTES}`,
    );
  });
});
