/**
 * Group commit in the Worker, for single submits. Hundreds of independent producers (serverless
 * functions, each submitting one job) each make one request; a call to the queue object per
 * request would cost more than the D1 batch the object then shares among them. So the single
 * submits this isolate is serving for one queue ride together: while one call to the object is in
 * flight, the submits that arrive wait, and the next call carries all of them (`submitMany`, at
 * most a batch's items and 8 MiB of envelopes). A lone submit goes at once: nothing waits for a
 * timer, and at low load this is one call per request, as before.
 *
 * Each item keeps its own answer: submitMany answers item by item with what a lone submit would
 * (its id, created or not, or its own error), and repeats of an id or a key in one call resolve
 * as they would one after another (src/core/sql/submit.ts).
 *
 * Requests of an isolate have separate I/O contexts. Waiting requests await the sender's promise
 * (with a timer of their own), and when the call has answered, the first of them to run sends the
 * next call from its own context: no request's context keeps sending for others past its own
 * call, and one that went away never holds the others up. The answering is given to `waitUntil`,
 * so it happens for the others even if its sender's client disconnects.
 */
import type { SubmitRequest } from '../core/requests.ts';
import { failed, type Settled } from '../core/settled.ts';
import type { Submitted } from '../core/sql/submit.ts';
import { queueObjectName } from '../durable/queue-object.ts';
import { limitsOf, queueObject, type Ctx } from './plane.ts';

const MAX_BYTES = 8 << 20;
/** How long a waiting submit sleeps at most before it looks at its lane again. */
const WAIT_TICK_MS = 50;
/** A call in flight longer than this no longer holds its lane (a call's own limit is far shorter). */
const STUCK_MS = 60_000;

interface Waiter {
  req: SubmitRequest;
  answer?: Settled<Submitted>;
}

interface Lane {
  /** Since when a call is in flight; null: none. */
  since: number | null;
  /** Settles when the call in flight has answered its submits. */
  answered: Promise<void>;
  waiting: Waiter[];
}

const lanes = new Map<string, Lane>();

/** Submits one job to `queue`, in the next call to its object that this isolate makes. */
export async function submitOne(c: Ctx, ns: string, queue: string, req: SubmitRequest): Promise<Settled<Submitted>> {
  const key = queueObjectName(ns, queue);
  let lane = lanes.get(key);
  if (!lane) lanes.set(key, (lane = { since: null, answered: Promise.resolve(), waiting: [] }));
  const me: Waiter = { req };
  lane.waiting.push(me);
  for (;;) {
    if (me.answer) return me.answer;
    // A call that never answered (its sender's context gone with the isolate's I/O) stops holding the lane.
    if (lane.since !== null && Date.now() - lane.since > STUCK_MS) lane.since = null;
    if (lane.since === null) await send(c, ns, queue, key, lane);
    else await answered(lane);
  }
}

/**
 * Waits for the call in flight to answer. The sender's promise is awaited here (its reactions run
 * in this request's context); a promise of this request settled from the sender's context would
 * not be (workerd then runs the rest of this request in the other's context, and its response
 * fails). A timer runs meanwhile: workerd ends a request with nothing of its own pending.
 */
async function answered(lane: Lane): Promise<void> {
  let t: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([lane.answered, new Promise<void>((r) => (t = setTimeout(r, WAIT_TICK_MS)))]);
  if (t !== undefined) clearTimeout(t); // in this request's context: a timer belongs to the request that made it
}

/** One call to the queue object with what waits (up to a batch, and 8 MiB of envelopes); answers each. */
function send(c: Ctx, ns: string, queue: string, key: string, lane: Lane): Promise<void> {
  lane.since = Date.now();
  const max = limitsOf(c).maxBatch;
  let n = 0;
  for (let bytes = 0; n < lane.waiting.length && n < max; n++) {
    bytes += envelopeBytes(lane.waiting[n]!.req);
    if (n > 0 && bytes > MAX_BYTES) break;
  }
  const batch = lane.waiting.splice(0, n);
  const stub = queueObject(c, ns, queue);
  const call: Promise<Settled<Submitted>[]> =
    batch.length === 1
      ? stub.submit(batch[0]!.req).then((a) => [a as Settled<Submitted>])
      : stub.submitMany(batch.map((w) => w.req)).then((r) => {
          const all = r as Settled<Settled<Submitted>[]>;
          // Each submit's answer carries the call's bookmark: its request answers with it.
          return all.ok ? all.value.map((a) => (all.bookmark ? { ...a, bookmark: all.bookmark } : a)) : batch.map(() => all);
        });
  // Answering runs as the call's own reaction, kept alive by waitUntil: it happens even if this
  // request's client goes away, so the others are answered.
  const done = call
    .then(
      (out) => out,
      (e: unknown) => batch.map(() => failed(e)),
    )
    .then((out) => {
      batch.forEach((w, i) => {
        w.answer = out[i] ?? failed(new Error('the queue object answered fewer submits than it was sent'));
      });
      lane.since = null;
      if (!lane.waiting.length) lanes.delete(key);
    });
  lane.answered = done;
  c.executionCtx.waitUntil(done);
  return done;
}

function envelopeBytes(req: SubmitRequest): number {
  const e = (req as { envelope?: unknown }).envelope;
  return e instanceof Uint8Array ? e.length : typeof e === 'string' ? e.length : 0;
}
