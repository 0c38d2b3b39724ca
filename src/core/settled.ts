/** One item's answer in a batch: its value, or its own error (a bad item fails alone). */
import { LakeshoreError, toError } from './errors.ts';

export type Settled<T> = { ok: true; value: T } | { ok: false; error: LakeshoreError };

export const failed = (e: unknown): { ok: false; error: LakeshoreError } => {
  const err = toError(e);
  return { ok: false, error: err instanceof LakeshoreError ? err : new LakeshoreError('internal', 'internal error', { cause: err }) };
};

export const settle = async <T>(p: Promise<T>): Promise<Settled<T>> => {
  try {
    return { ok: true, value: await p };
  } catch (e) {
    return failed(e);
  }
};
