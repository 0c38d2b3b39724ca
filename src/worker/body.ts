/** Reads and checks a JSON body: a size cap before parsing, JSON syntax, then the wire schema. */
import type { Context } from 'hono';
import type { z } from 'zod';
import { fromBase64 } from '../core/bytes.ts';
import { badRequest, LakeshoreError } from '../core/errors.ts';

export const MAX_BODY_BYTES = 4 << 20;
export const MAX_BATCH_BODY_BYTES = 32 << 20;

export async function readJson<S extends z.ZodType>(c: Context, schema: S, maxBytes = MAX_BODY_BYTES): Promise<z.infer<S>> {
  const declared = Number(c.req.header('content-length') ?? '0');
  if (declared > maxBytes) throw new LakeshoreError('payload_too_large', `request body is ${declared} bytes; the limit is ${maxBytes}`);
  const buf = await c.req.arrayBuffer();
  if (buf.byteLength > maxBytes) throw new LakeshoreError('payload_too_large', `request body is ${buf.byteLength} bytes; the limit is ${maxBytes}`);
  let data: unknown;
  try {
    data = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(buf));
  } catch {
    throw badRequest('request body is not valid JSON');
  }
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? issue.path.join('.') : 'body';
    throw badRequest(`${where}: ${issue.message}`);
  }
  return parsed.data;
}

export function bytesField(what: string, b64: string): Uint8Array {
  const b = fromBase64(b64);
  if (!b) throw badRequest(`${what} must be base64`);
  return b;
}

export const optBytes = (what: string, b64: string | null | undefined) => (b64 === null || b64 === undefined ? null : bytesField(what, b64));

/** A query parameter as a number, or undefined when absent; a non-number is a 400. */
export function numParam(c: Context, name: string): number | undefined {
  const s = c.req.query(name);
  if (s === undefined || s === '') return undefined;
  const n = Number(s);
  if (!Number.isFinite(n)) throw badRequest(`${name} must be a number`);
  return n;
}
