import { join } from 'node:path';
import { inject } from 'vitest';
import { Dispatch, HttpDispatch, type DispatchPlane, type HttpDispatchOptions } from '../../../client/local/index.ts';
import { tempDir } from '../../support/tmp.ts';

let n = 0;
export const freshNs = () => `n${process.pid}x${Date.now().toString(36)}${(n++).toString(36)}`;

/** A client of the test plane, in a namespace of its own unless one is given. */
export const client = (opts: HttpDispatchOptions = {}) =>
  new HttpDispatch(inject('planeUrl'), { token: inject('planeToken'), namespace: opts.namespace ?? freshNs(), ...opts });

/** Both planes, for `describe.each`: a fresh local SQLite file, and a fresh namespace of the test plane. */
export const bothPlanes = (ns: string): [string, () => DispatchPlane][] => [
  ['local', () => new Dispatch(join(tempDir(`lakeshore-${ns}-`), 'd.sqlite'), { namespace: ns })],
  ['edge', () => client()],
];

export const bytes = (s: string) => new TextEncoder().encode(s);
export const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));
