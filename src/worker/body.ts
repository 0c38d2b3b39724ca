/**
 * Request bodies: hono's bodyLimit caps the size before anything is read, then the body is parsed
 * as JSON (whatever its Content-Type: `curl -d` sends form-encoded) and checked against its wire
 * schema (core/wire.ts). Handlers read the checked body with `c.req.valid('json')`.
 */
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type * as z from 'zod/mini';
import { fromBase64 } from '../core/bytes.ts';
import { badRequest, LakeshoreError } from '../core/errors.ts';
import type { App } from './plane.ts';
import { jsonValue } from '../core/validate.ts';
import { settingsFrom } from '../durable/settings.ts';

/** A single route's body (the envelope, result and frame limits fit well inside it). */
export const MAX_BODY_BYTES = 4 << 20;
/** A batch route's body (submit, ack, nack many; a claim carrying acks). */
export const MAX_BATCH_BODY_BYTES = 32 << 20;
/** The most levels a body wraps a free-form value in (`{items: [{error: ...}]}`). */
const WRAPPING = 3;
/** Past this, a refused body is not read to its end before the 413 (Workers accept 100 MB at most). */
const DRAIN_BYTES = 128 << 20;

/**
 * Reads what is left of a refused body, so the client gets to finish sending and reads a clean 413
 * (closing mid-upload makes many clients fail with a broken pipe instead).
 */
async function drain(body: ReadableStream<Uint8Array> | null): Promise<void> {
  if (!body) return;
  const reader = body.getReader();
  for (let n = 0; n < DRAIN_BYTES; ) {
    const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
    if (done) return;
    n += value?.length ?? 0;
  }
  await reader.cancel().catch(() => {});
}

/** `empty`: what an empty body stands for (a route whose fields are all optional takes none). */
export function jsonBody<S extends z.ZodMiniType>(
  schema: S,
  maxBytes = MAX_BODY_BYTES,
  empty?: object,
): MiddlewareHandler<App, string, { in: { json: z.input<S> }; out: { json: z.output<S> } }> {
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: async (c) => {
      await drain(c.req.raw.body);
      const declared = c.req.header('content-length');
      throw new LakeshoreError(
        'payload_too_large',
        `request body is ${declared ? `${declared} bytes` : 'larger than that'}; the limit for this route is ${maxBytes} bytes`,
      );
    },
  });
  return (c, next) =>
    limit(c, async () => {
      let data: unknown;
      try {
        const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(await c.req.arrayBuffer());
        data = empty && text.trim() === '' ? empty : JSON.parse(text);
      } catch {
        throw badRequest('request body is not valid JSON');
      }
      // Nothing nested past any value the contract allows goes further: structured clone (RPC) recurses.
      const { jsonDepth } = settingsFrom(c.env).resolved;
      try {
        jsonValue('request body', data, jsonDepth + WRAPPING);
      } catch {
        throw badRequest(
          `request body nests deeper than ${jsonDepth + WRAPPING} levels: meta and error objects may nest at most ${jsonDepth}`,
        );
      }
      const parsed = schema.safeParse(data);
      if (!parsed.success) throw badRequest(issueMessage(schema, data, parsed.error.issues[0]!));
      c.req.addValidatedData('json', parsed.data as object);
      await next();
    }) as Promise<void>;
}

export function bytesField(what: string, b64: string): Uint8Array {
  const b = fromBase64(b64);
  if (!b) throw badRequest(`${what} must be base64`);
  return b;
}

export const optBytes = (what: string, b64: string | null | undefined) =>
  b64 === null || b64 === undefined ? null : bytesField(what, b64);

/** A query parameter as a number, or undefined when absent; a non-number is a 400. */
export function numParam(c: { req: { query(name: string): string | undefined } }, name: string): number | undefined {
  const s = c.req.query(name);
  if (s === undefined || s === '') return undefined;
  const n = Number(s);
  if (!Number.isFinite(n)) throw badRequest(`${name} must be a number`);
  return n;
}

const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

interface Def {
  shape?: Record<string, { _zod: { def: Def } }>;
  element?: { _zod: { def: Def } };
  innerType?: { _zod: { def: Def } };
}

/** The fields of the object `schema` holds at `path` (through arrays and optional wrappers), if it is one. */
function fieldsAt(schema: z.ZodMiniType, path: readonly PropertyKey[]): Set<string> | null {
  const unwrap = (d: Def | undefined) => {
    while (d?.innerType) d = d.innerType._zod.def;
    return d;
  };
  let d = unwrap((schema as unknown as { _zod: { def: Def } })._zod.def);
  for (const k of path) d = unwrap(typeof k === 'number' ? d?.element?._zod.def : d?.shape?.[String(k)]?._zod.def);
  return d?.shape ? new Set(Object.keys(d.shape)) : null;
}

/**
 * What a refused body's first issue says, naming where (`items[3].envelope`: a batch refused whole
 * for one item's type names that item). A field left out is said to be required, and a field in
 * camelCase (`workerId`, the clients' spelling) is told its wire name (`worker_id`) where it has one.
 */
export function issueMessage(schema: z.ZodMiniType, data: unknown, issue: z.core.$ZodIssue): string {
  const path = issue.path;
  const name = (p: readonly PropertyKey[]) =>
    p.length ? p.map((k, i) => (typeof k === 'number' ? `[${k}]` : i ? `.${String(k)}` : String(k))).join('') : 'body';
  const where = name(path);
  const field = String(path.at(-1));
  let parent: unknown = data;
  for (const k of path.slice(0, -1))
    parent = isObject(parent) || Array.isArray(parent) ? (parent as Record<PropertyKey, unknown>)[k] : undefined;
  if (issue.code === 'invalid_type' && path.length && isObject(parent) && !Object.hasOwn(parent, field)) {
    const camel = Object.keys(parent).find((k) => k !== field && snake(k) === field);
    return `${where} is required${camel ? ` (the body has ${camel}: the wire spells it ${field})` : ''}`;
  }
  if (issue.code === 'unrecognized_keys') {
    const fields = fieldsAt(schema, path);
    const said = issue.keys.map((k) => (snake(k) !== k && fields?.has(snake(k)) ? `${k} (the wire spells it ${snake(k)})` : k));
    return `${where}: no field ${said.join(', ')}`;
  }
  return `${where}: ${issue.message}`;
}
