/**
 * The receiving end of push delivery (docs/contract.md, "Push delivery"): checks a delivery's
 * Standard Webhooks signature and reads it. WebCrypto only, so it runs where receivers do: Node,
 * a Cloudflare Worker, Deno, Bun, a Vercel or Lambda function.
 *
 *   const d = await verifyDelivery(process.env.LAKESHORE_PUSH_SECRET, req.headers, rawBody);
 *   // ... do the work; answer 2xx with the result, or 202 and finish later with d.deliveryToken
 */
import { UnauthorizedError } from './errors.ts';

/** One pushed job, as its receiver gets it. */
export interface Delivery {
  id: string;
  namespace: string;
  queue: string;
  attempt: number;
  /** The attempt's lease (epoch ms): heartbeat with the delivery token to keep it past this. */
  leaseUntil: number;
  priority: number;
  envelope: Uint8Array;
  /** The worker id the plane claimed as: what an ack, nack, heartbeat or append with the token names. */
  workerId: string;
  /** The credential for this job and attempt: append, heartbeat, ack, nack, read (`new HttpDispatch(url, {token})`); null from a local plane's `lakeshore push`. */
  deliveryToken: string | null;
  /** `webhook-id`: `<job id>.<attempt>`, the same on a resend of the same attempt. */
  webhookId: string;
  /** `webhook-timestamp`, epoch seconds. */
  timestamp: number;
}

export interface VerifyOptions {
  /** How far the timestamp may be from now, either way (default 300 s, the spec's). */
  toleranceS?: number;
  /** Now, epoch ms (tests). */
  now?: number;
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

function header(h: HeaderBag, name: string): string | null {
  if (typeof (h as Headers).get === 'function') return (h as Headers).get(name);
  const r = h as Record<string, string | string[] | undefined>;
  const v = r[name] ?? r[Object.keys(r).find((k) => k.toLowerCase() === name) ?? ''];
  return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
}

const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));
const unb64 = (s: string): Uint8Array<ArrayBuffer> => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));

/**
 * A push secret's key bytes. A value that is not one (undefined from an answer that did not show
 * the secret, a token pasted by mistake) is a receiver's setup error, said as such, never echoed:
 * it is a secret.
 */
function secretKey(s: unknown): Uint8Array<ArrayBuffer> {
  const b64text = typeof s === 'string' ? (s.startsWith('whsec_') ? s.slice(6) : s) : '';
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64text) || b64text.length % 4 !== 0)
    throw new TypeError(
      `the push secret is not one: expected the whsec_… text the plane showed once when the queue got its push target ` +
        `(lakeshore queue Q --push-url URL; --rotate-push-secret makes a new one), got ${
          typeof s === 'string' ? `a string of ${s.length} characters` : s === null ? 'null' : typeof s
        }`,
    );
  return unb64(b64text);
}

/**
 * The body as received, as text. A parsed body (Express's `express.json()`, a Next.js or Vercel
 * function's `req.body`) is not what was signed: said so, with how to get the one that was.
 */
function bodyText(body: unknown): string {
  if (typeof body === 'string') return body;
  if (body instanceof Uint8Array || body instanceof ArrayBuffer) return new TextDecoder().decode(body);
  throw new TypeError(
    `the delivery's body must be its bytes or text as received (a string, Buffer, Uint8Array or ArrayBuffer), not ${
      body === null ? 'null' : typeof body === 'object' ? 'a parsed object' : typeof body
    }: the signature is of the bytes the plane sent, which parsing and writing again changes ` +
      `(Express: express.raw({ type: 'application/json' }); Next.js: bodyParser: false; fetch handlers: await req.text())`,
  );
}

/** Compares without an early exit. */
function same(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return d === 0;
}

/** Checks the signature and timestamp; answers the body's text, its `webhook-id` and timestamp. */
async function verified(
  secret: string | string[],
  headers: HeaderBag,
  body: string | Uint8Array | ArrayBuffer,
  opts: VerifyOptions,
): Promise<{ text: string; id: string; timestamp: number }> {
  const keys = (Array.isArray(secret) ? secret : [secret]).map(secretKey);
  if (keys.length === 0) throw new TypeError('no push secret given: pass the whsec_… text, or a list of them during a rotation');
  const text = bodyText(body);
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sigs = header(headers, 'webhook-signature');
  if (!id || !ts || !sigs)
    throw new UnauthorizedError('not a signed delivery: webhook-id, webhook-timestamp or webhook-signature is missing');
  const timestamp = Number(ts);
  if (!/^\d+$/.test(ts)) throw new UnauthorizedError('webhook-timestamp is not a number of seconds');
  const now = (opts.now ?? Date.now()) / 1000;
  const tolerance = opts.toleranceS ?? 300;
  if (Math.abs(now - timestamp) > tolerance)
    throw new UnauthorizedError(`webhook-timestamp is ${Math.round(now - timestamp)} s from now, past the tolerance of ${tolerance} s`);
  const data = new TextEncoder().encode(`${id}.${ts}.${text}`);
  const given = sigs.split(' ').flatMap((s) => (s.startsWith('v1,') ? [s.slice(3)] : []));
  let ok = false;
  for (const raw of keys) {
    const key = await crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    const want = b64(new Uint8Array(await crypto.subtle.sign('HMAC', key, data)));
    for (const g of given) ok = same(g, want) || ok;
  }
  if (!ok)
    throw new UnauthorizedError(
      'delivery signature does not verify: not from this queue, altered (a body parsed and written again is: give the body as received), or signed with another secret',
    );
  return { text, id, timestamp };
}

const jobOf = (j: Record<string, unknown>, top: Record<string, unknown>, webhookId: string, timestamp: number): Delivery => ({
  id: String(j.id),
  namespace: String(top.namespace),
  queue: String(top.queue),
  attempt: Number(j.attempt),
  leaseUntil: Number(j.lease_until),
  priority: Number(j.priority),
  envelope: unb64(String(j.envelope)),
  workerId: String(top.worker_id),
  deliveryToken: typeof j.delivery_token === 'string' ? j.delivery_token : null,
  webhookId,
  timestamp,
});

/**
 * Checks a delivery's signature (any of `secret`s: during a rotation both verify) and timestamp,
 * and answers the delivery read from its body. Throws UnauthorizedError when it does not verify:
 * answer 401, and the plane retries (a genuine delivery verifies; a forged one never will).
 * A queue with `push.batch_size` above 1 sends batches: read those with verifyBatch.
 */
export async function verifyDelivery(
  secret: string | string[],
  headers: HeaderBag,
  body: string | Uint8Array | ArrayBuffer,
  opts: VerifyOptions = {},
): Promise<Delivery> {
  const { text, id, timestamp } = await verified(secret, headers, body, opts);
  const j = JSON.parse(text) as Record<string, unknown>;
  if (j.type === 'lakeshore.batch')
    throw new TypeError("this delivery is a batch (the queue's push.batch_size is above 1): read it with verifyBatch");
  return jobOf(j, j, id, timestamp);
}

/** A batch of pushed jobs (a queue whose `push.batch_size` is above 1), as its receiver gets it. */
export interface Batch {
  namespace: string;
  queue: string;
  workerId: string;
  /** Its jobs, each with its own attempt and delivery token. Their `webhookId` is the batch's. */
  jobs: Delivery[];
  /** `webhook-id`: `batch_<first job's id>.<its attempt>`. */
  webhookId: string;
  timestamp: number;
}

/**
 * What a receiver answers for a batch, with a 2xx: the jobs it names settle as it says, the others
 * are acked without a result. `{ok: result}` acks with a result (any JSON), `{retry: true,
 * error?, delayMs?}` retries under the queue's attempt budget, `{accepted: true}` leaves the job
 * to its delivery token (202 for the whole batch does that for all).
 */
export type BatchOutcome = { ok: unknown } | { retry: true; error?: string; delayMs?: number } | { accepted: true };

/** The body of a batch's answer: `JSON.stringify(batchAnswer({[id]: {ok: 42}, [id2]: {retry: true}}))`. */
export function batchAnswer(outcomes: Record<string, BatchOutcome>): {
  outcomes: Record<
    string,
    { status: 'ok'; result: unknown } | { status: 'retry'; error?: string; delay_ms?: number } | { status: 'accepted' }
  >;
} {
  const out: ReturnType<typeof batchAnswer>['outcomes'] = {};
  for (const [id, o] of Object.entries(outcomes)) {
    if ('ok' in o) out[id] = { status: 'ok', result: o.ok ?? null };
    else if ('retry' in o)
      out[id] = {
        status: 'retry',
        ...(o.error !== undefined ? { error: o.error } : {}),
        ...(o.delayMs !== undefined ? { delay_ms: o.delayMs } : {}),
      };
    else out[id] = { status: 'accepted' };
  }
  return { outcomes: out };
}

/** verifyDelivery for a batch: checks its signature and timestamp, and answers its jobs. */
export async function verifyBatch(
  secret: string | string[],
  headers: HeaderBag,
  body: string | Uint8Array | ArrayBuffer,
  opts: VerifyOptions = {},
): Promise<Batch> {
  const { text, id, timestamp } = await verified(secret, headers, body, opts);
  const j = JSON.parse(text) as Record<string, unknown>;
  if (j.type !== 'lakeshore.batch')
    throw new TypeError("this delivery is one job (the queue's push.batch_size is 1): read it with verifyDelivery");
  const jobs = Array.isArray(j.jobs) ? (j.jobs as Record<string, unknown>[]) : [];
  return {
    namespace: String(j.namespace),
    queue: String(j.queue),
    workerId: String(j.worker_id),
    jobs: jobs.map((x) => jobOf(x, j, id, timestamp)),
    webhookId: id,
    timestamp,
  };
}
