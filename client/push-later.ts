/**
 * Finishing a pushed job after answering `202 Accepted` (docs/contract.md, "Push delivery"): a
 * receiver that takes longer than a request may (a function's own limit, the queue's push
 * timeout) answers 202 at once and carries on with the delivery's own token, which acts on that
 * job and attempt alone. What it sends reads as a worker's would: values stream to whoever
 * watches the job (`handle.stream()`, a browser), and the ack's result is the job's.
 *
 *   const delivery = await verifyDelivery(secret, req.headers, body);
 *   res.writeHead(202).end();
 *   const job = finishLater(delivery);                            // the plane at LAKESHORE_URL
 *   for (const step of steps) await job.emit({ step, loss });   // live to the job's readers
 *   await job.ack({ loss });                                     // or job.nack(error)
 */
import { FrameKind } from '../src/core/frame.ts';
import { jsonBytes } from './envelope.ts';
import { HttpDispatch } from './http/dispatch.ts';
import type { Delivery } from './push.ts';

export interface FinishLaterOptions {
  /** How long a call keeps trying through the plane's brief absences (ms; default 15,000). */
  retryForMs?: number;
}

/**
 * A pushed job its receiver finishes after answering 202: one job, one attempt. A call that fails
 * (the plane away past `retryForMs`) throws, and may be made again: what reached the plane is not
 * sent twice, and the job ends once.
 */
export interface LaterJob {
  readonly id: string;
  readonly attempt: number;
  /** Appends a value (JSON) to the job's journal, as a generator's yield does: its readers see it live. */
  emit(value: unknown): Promise<void>;
  /**
   * Extends the attempt's lease by the queue's lease (the delivery's lasts the push timeout and a
   * margin): call it more often than that while the work goes on. True when the job was cancelled:
   * stop, and send nothing more.
   */
  heartbeat(): Promise<boolean>;
  /** Ends the job: succeeded, `result` (JSON) its result. */
  ack(result?: unknown): Promise<void>;
  /**
   * Ends the attempt as failed: with `retry` (the default) the job is delivered again under its
   * queue's budget and backoff (or after `delayMs`), else it fails now.
   */
  nack(error: unknown, opts?: { retry?: boolean; delayMs?: number }): Promise<'queued' | 'delayed' | 'failed'>;
}

/** Whether a promise was fulfilled, not its value. */
const yes = () => true;
const no = () => false;

/**
 * A pushed job to finish after answering 202, on the plane at `url` (default LAKESHORE_URL: the
 * one the queue lives on; the delivery names its namespace). A delivery from a local plane's `lakeshore push` carries no
 * token (there is no HTTP face to use one on): its receiver answers with the outcome instead.
 */
export function finishLater(delivery: Delivery, url?: string, opts: FinishLaterOptions = {}): LaterJob {
  if (!delivery.deliveryToken)
    throw new TypeError(
      "finishLater: this delivery carries no delivery token (a local plane's `lakeshore push` sends none): answer it with its outcome, a 2xx and the result, instead of 202",
    );
  const plane = url ?? (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.LAKESHORE_URL;
  if (!plane) throw new TypeError('finishLater: no plane URL: give the URL of the plane the queue lives on, or set LAKESHORE_URL');
  const d = new HttpDispatch(plane, {
    token: delivery.deliveryToken,
    namespace: delivery.namespace,
    retryForMs: opts.retryForMs ?? 15_000,
  });
  const w = delivery.workerId;
  const holder = { attempt: delivery.attempt };
  // What reached the plane: a call that failed (the plane away past retryForMs) may be made again,
  // and sends again only what did not arrive. The plane's fence is the judge of the rest.
  let begun: Promise<unknown> | null = null; // the BEGIN frame's append, sent once
  let closed = false; // END or ERROR appended
  let ending = false;
  let ended = false;
  const append = (kind: FrameKind, body: Uint8Array, final = false) =>
    d.journalAppend(delivery.id, null, { kind, seq: 0, body, meta: null }, { workerId: w, ...holder, final });
  const open = () => {
    if (ended) throw new TypeError(`finishLater: job ${delivery.id} attempt ${delivery.attempt} is already acked or nacked`);
    if (ending) throw new TypeError(`finishLater: job ${delivery.id} attempt ${delivery.attempt} is being acked or nacked`);
  };
  const end = async <T>(frame: () => Promise<unknown>, verb: () => Promise<T>): Promise<T> => {
    open();
    ending = true;
    try {
      const began = begun !== null && (await begun.then(yes, no));
      if (began && !closed) {
        await frame();
        closed = true;
      }
      const out = await verb();
      ended = true;
      await d.close();
      return out;
    } finally {
      ending = false;
    }
  };
  return {
    id: delivery.id,
    attempt: delivery.attempt,
    async emit(value) {
      open();
      const body = jsonBytes(value);
      begun ??= append(FrameKind.BEGIN, new Uint8Array()).catch((e) => {
        begun = null;
        throw e;
      });
      await begun;
      await append(FrameKind.VALUE, body);
    },
    async heartbeat() {
      return (await d.heartbeat(delivery.id, w, holder)).cancelled;
    },
    async ack(result) {
      const body = jsonBytes(result);
      await end(
        () => append(FrameKind.END, new Uint8Array(), true),
        () => d.ack(delivery.id, w, { ...holder, result: body }),
      );
    },
    async nack(error, o = {}) {
      const e = error instanceof Error ? error : null;
      const err = e ? { message: e.message, type: e.name } : { message: typeof error === 'string' ? error : JSON.stringify(error) };
      const retry = o.retry ?? true;
      return end(
        () => append(FrameKind.ERROR, jsonBytes(err), !retry),
        () => d.nack(delivery.id, w, { ...holder, error: err, retry, delayMs: o.delayMs }),
      );
    },
  };
}
