/**
 * A claim that waits, answered so that a client that went away is noticed. workerd tells a Worker
 * that its client left only through a response that has started: a write to a dead connection's
 * stream fails (the second write after the death; the first is taken by the kernel) and
 * request.signal aborts. While a handler has not yet returned its Response, nothing is noticed.
 *
 * So a claim still waiting after STREAM_AFTER_MS answers 200 at once and streams a space every
 * KEEPALIVE_MS (JSON allows leading whitespace): a client that leaves while it waits is noticed
 * within two keepalives, and `gone` calls the wait off (the parked claim leaves the queue with no
 * job). A claim that parked (its client may have left meanwhile) writes its answer on one line and
 * then a tail of TAIL_WRITES spaces, KEEPALIVE_MS apart: a client that left just before the answer
 * is noticed by the tail, and `gone` puts back the jobs the answer handed out (the queue object
 * remembers them by wait id). A claim that found work at once answers plain JSON.
 *
 * A client may use the answer's line as soon as it has it, and must read the tail to its end: one
 * that hangs up inside the tail gives its jobs back, as a dead one would. An error after the stream
 * started is the answer line `{"error": {code, message}}`.
 */
import { LakeshoreError } from '../core/errors.ts';
import { platformError } from '../core/platform-errors.ts';
import type { Ctx } from './plane.ts';
import { later } from './request.ts';

export const STREAM_AFTER_MS = 50;
export const KEEPALIVE_MS = 100;
export const TAIL_WRITES = 2;

const enc = new TextEncoder();
const SPACE = enc.encode(' ');
const sleep = (ms: number) => new Promise<null>((r) => setTimeout(() => r(null), ms));

type Outcome<T> = { value: T } | { error: unknown };

/**
 * Answers a waiting call's `answer` (its value, and whether it parked) as JSON, plainly or streamed
 * as above. `gone` runs once, kept alive past the response, if the client is found gone.
 * `tailWrites`: 0 for an answer that hands nothing out (a wait on results), which needs no tail.
 */
export async function longPoll<T>(
  c: Ctx,
  answer: Promise<{ value: T; parked: boolean }>,
  json: (v: T) => unknown,
  gone: () => Promise<unknown>,
  tailWrites = TAIL_WRITES,
): Promise<Response> {
  const settled: Promise<Outcome<{ value: T; parked: boolean }>> = answer.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  const early = await Promise.race([settled, sleep(STREAM_AFTER_MS)]);
  if (early && 'error' in early) throw early.error;
  if (early && !early.value.parked) return c.json(json(early.value.value) as object);

  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  let left = false;
  const leave = () => {
    if (left) return;
    left = true;
    later(c, gone());
  };
  c.req.raw.signal.addEventListener('abort', leave, { once: true });
  writer.closed.catch(leave);
  later(
    c,
    (async () => {
      try {
        let out: Outcome<{ value: T; parked: boolean }> | null = early;
        while (!out && !left) {
          out = await Promise.race([settled, sleep(KEEPALIVE_MS)]);
          if (!out) await writer.write(SPACE);
        }
        if (!out || left) return;
        const body = 'error' in out ? { error: errorJson(out.error) } : json(out.value.value);
        await writer.write(enc.encode(`${JSON.stringify(body)}\n`));
        for (let i = 0; i < tailWrites && !left; i++) {
          await sleep(KEEPALIVE_MS);
          await writer.write(SPACE);
        }
        await writer.close();
      } catch {
        leave();
        await writer.abort().catch(() => {});
      }
    })(),
  );
  return new Response(readable, {
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' },
  });
}

function errorJson(e: unknown) {
  const err = platformError(e) ?? e;
  if (err instanceof LakeshoreError) return err.toJSON();
  console.error('a streamed answer failed', e);
  return { code: 'internal', message: 'internal error' };
}
