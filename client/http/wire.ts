/** Small pieces of the HTTP client: encoding, batch plumbing. */
import { fromBase64 } from '../../src/core/bytes.ts';
import { errorFor, LakeshoreError } from '../errors.ts';
import { Batcher } from '../batcher.ts';

export type Json = Record<string, unknown>;

export const b64 = (s: unknown): Uint8Array => {
  const b = typeof s === 'string' ? fromBase64(s) : null;
  if (!b) throw new LakeshoreError('internal', 'the plane answered bytes that are not base64');
  return b;
};

export const enc = encodeURIComponent;

/** The batcher of one queue, made on first use. */
export function batcherFor<I, O>(map: Map<string, Batcher<I, O>>, queue: string, send: (items: I[]) => ReturnType<Batcher<I, O>['send']>): Batcher<I, O> {
  let b = map.get(queue);
  if (!b) {
    b = new Batcher(send);
    map.set(queue, b);
  }
  return b;
}

/** A batch route's per-item answers as settled results: each item keeps its own error class. */
export function settledOf(results: Json[]): ({ ok: true; value: undefined } | { ok: false; error: Error })[] {
  return results.map((r) => {
    if (!r.error) return { ok: true as const, value: undefined };
    const e = r.error as { code: string; message: string };
    return { ok: false as const, error: errorFor(e.code, e.message) as Error };
  });
}

/** JSON has no NaN or Infinity (they would arrive as null, i.e. "use the default"): refuse them here. */
export function finiteOnly(key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value)) throw errorFor('bad_request', `${key} must be a finite number`);
  return value;
}

