/**
 * One answer that may have failed, in the one shape every layer passes around: a batch item's
 * answer, and what the queue object answers the Worker over RPC (where error classes do not
 * survive). A failure is its error's code and message.
 */
import { isErrorCode, LakeshoreError, toError, type ErrorCode } from './errors.ts';

export interface ErrorBody {
  code: ErrorCode;
  message: string;
}

/** `bookmark`: a queue object's answer names the newest point of its database it has seen (src/durable/bookmark.ts). */
export type Settled<T> = ({ ok: true; value: T } | { ok: false; error: ErrorBody }) & { bookmark?: string };

/** A thrown error as a failed answer. Anything but a LakeshoreError is a bug: logged, and answered without its detail. */
export function failed(e: unknown): { ok: false; error: ErrorBody } {
  if (e instanceof LakeshoreError) return { ok: false, error: e.toJSON() };
  console.error('internal error', toError(e));
  return { ok: false, error: { code: 'internal', message: 'internal error' } };
}

export const settle = async <T>(p: Promise<T> | (() => Promise<T>)): Promise<Settled<T>> => {
  try {
    return { ok: true, value: await (typeof p === 'function' ? p() : p) };
  } catch (e) {
    return failed(e);
  }
};

/** The error a failed answer stands for. */
export const errorOf = (b: ErrorBody): LakeshoreError => new LakeshoreError(isErrorCode(b.code) ? b.code : 'internal', b.message);

/** The value, or the failure thrown as the LakeshoreError it was. */
export async function raise<T>(p: Promise<Settled<T>> | Settled<T> | Promise<unknown>): Promise<T> {
  const r = (await p) as Settled<T>;
  if (r.ok) return r.value;
  throw errorOf(r.error);
}

/**
 * Parses each item of a batch: a bad item fails alone, in its slot of `out`; the valid ones go on
 * with their positions (`at`), to be answered by `fill`.
 */
export function parseEach<I, T>(items: I[], parse: (it: I) => T): { out: Settled<never>[]; valid: T[]; at: number[] } {
  const out: Settled<never>[] = new Array(items.length);
  const valid: T[] = [];
  const at: number[] = [];
  items.forEach((it, i) => {
    try {
      valid.push(parse(it));
      at.push(i);
    } catch (e) {
      out[i] = failed(e);
    }
  });
  return { out, valid, at };
}

/** Puts the valid items' answers into their slots. */
export function fill<T>(out: Settled<T>[], at: number[], answers: (T | Error)[]): Settled<T>[] {
  answers.forEach((r, k) => {
    out[at[k]!] = r instanceof Error ? failed(r) : { ok: true, value: r };
  });
  return out;
}

/** A lone request's answer: its value, or its error thrown as it was. */
export function one<T>(answers: (T | Error)[]): T {
  const r = answers[0]!;
  if (r instanceof Error) throw r;
  return r;
}
