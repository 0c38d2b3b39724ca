import { inject } from 'vitest';
import { HttpDispatch, type HttpDispatchOptions } from '../../../client/index.ts';

let n = 0;
export const freshNs = () => `n${process.pid}x${Date.now().toString(36)}${(n++).toString(36)}`;

/** A client of the test plane, in a namespace of its own unless one is given. */
export const client = (opts: HttpDispatchOptions = {}) =>
  new HttpDispatch(inject('planeUrl'), { token: inject('planeToken'), namespace: opts.namespace ?? freshNs(), ...opts });

export const bytes = (s: string) => new TextEncoder().encode(s);
export const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));
