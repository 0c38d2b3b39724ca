/**
 * Errors do not cross RPC with their class and code intact, so the object's methods answer a
 * tagged result and the Worker turns a failure straight back into the LakeshoreError it was.
 */
import { isErrorCode, LakeshoreError, toError, type ErrorCode } from '../core/errors.ts';
import type { Settled } from '../core/settled.ts';

export type RpcResult<T> = { ok: true; value: T } | { ok: false; code: ErrorCode; message: string };

export async function capture<T>(fn: () => Promise<T>): Promise<RpcResult<T>> {
  try {
    return { ok: true, value: await fn() };
  } catch (e) {
    if (e instanceof LakeshoreError) return { ok: false, code: e.code, message: e.message };
    console.error('queue object error', toError(e));
    return { ok: false, code: 'internal', message: 'internal error' };
  }
}

/** The stub's types go through RPC's mapped types; the value is what the object's method returned. */
export async function unwrap<T>(p: Promise<RpcResult<T>> | Promise<unknown>): Promise<T> {
  const r = (await p) as RpcResult<T>;
  if (r.ok) return r.value;
  throw new LakeshoreError(isErrorCode(r.code) ? r.code : 'internal', r.message);
}

/** One item of a batch answer, tagged the same way (its error as code and message). */
export const tagged = <T>(r: Settled<T>): RpcResult<T> => (r.ok ? { ok: true, value: r.value } : { ok: false, code: r.error.code, message: r.error.message });
