/** Checks of verb inputs that every plane applies, so bad input gets the same error everywhere. */
import { badRequest, LakeshoreError } from './errors.ts';
import type { Limits } from './limits.ts';
import { isState, type State } from './states.ts';
import { CLAIM_KINDS, type ClaimKind } from './types.ts';

// Printable text: no C0/C1 controls (NUL included), no lone surrogates.
// biome-ignore lint/suspicious/noControlCharactersInRegex: this pattern exists to find control characters
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;

export function text(what: string, v: unknown, max: number): string {
  if (typeof v !== 'string') throw badRequest(`${what} must be a string`);
  if (!v.length) throw badRequest(`${what} must not be empty`);
  if (v.length > max) throw badRequest(`${what} is longer than ${max} characters`);
  if (CONTROL.test(v) || LONE_SURROGATE.test(v)) throw badRequest(`${what} must not contain control characters or invalid unicode`);
  return v;
}

/** Queue and namespace names: letters, digits and `._:-`, starting with a letter or digit. */
export function name(what: string, v: unknown, max: number): string {
  const s = text(what, v, max);
  if (!NAME.test(s))
    throw badRequest(`${what} ${JSON.stringify(s)} may hold only letters, digits and . _ : - and must start with a letter or digit`);
  return s;
}

export const namespace = (v: unknown) => name('namespace', v, 64);
export const queue = (v: unknown, l: Limits) => name('queue', v, l.queueLength);
/**
 * Text that goes into a URL's path as one segment (an id, a worker id): any printable text but `.`
 * and `..`, which no URL carries as a segment. Clients, browsers, curl and Cloudflare's own URL
 * normalization resolve them away (`/invocations/../ack` is `/ack`), and their percent-encodings
 * (`%2e`) too, so a job or worker so named could never be reached over HTTP.
 */
export function segment(what: string, v: unknown, max: number): string {
  const s = text(what, v, max);
  if (s === '.' || s === '..') throw badRequest(`${what} must not be "." or "..": URLs resolve them away as path segments`);
  return s;
}

export const id = (v: unknown, l: Limits) => segment('id', v, l.idLength);
export const workerId = (v: unknown) => segment('worker_id', v, 200);

export function optionalText(what: string, v: unknown, max: number): string | null {
  return v === undefined || v === null ? null : text(what, v, max);
}

export function finite(what: string, v: unknown, dflt: number): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw badRequest(`${what} must be a finite number`);
  return v;
}

export function nonNegInt(what: string, v: unknown, dflt: number, max = Number.MAX_SAFE_INTEGER): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw badRequest(`${what} must be a non-negative integer`);
  if (v > max) throw badRequest(`${what} must be at most ${max}`);
  return v;
}

export function intInRange(what: string, v: unknown, dflt: number, min: number, max: number): number {
  const n = nonNegInt(what, v, dflt, max);
  if (n < min) throw badRequest(`${what} must be at least ${min}`);
  return n;
}

/** A wait or timeout in ms: negative or above the plane's limit is an error. */
export function waitMs(what: string, v: unknown, dflt: number, max: number): number {
  if (v === undefined || v === null) return Math.min(dflt, max);
  if (typeof v !== 'number' || !Number.isFinite(v)) throw badRequest(`${what} must be a number of milliseconds`);
  if (v < 0) throw badRequest(`${what} must not be negative`);
  if (v > max) throw badRequest(`${what} is ${v} ms; the longest wait this plane allows is ${max} ms (wait again to wait longer)`);
  return Math.floor(v);
}

export function bytes(what: string, v: unknown, max: number): Uint8Array {
  if (!(v instanceof Uint8Array)) throw badRequest(`${what} must be bytes`);
  if (v.length > max) throw new LakeshoreError('payload_too_large', `${what} is ${v.length} bytes; the limit is ${max}`);
  return v;
}

export function state(v: unknown, dflt: State): State {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'string' || !isState(v))
    throw badRequest(`unknown state ${JSON.stringify(v)}: expected delayed, queued, running, succeeded, failed or cancelled`);
  return v;
}

export function claimKind(v: unknown): ClaimKind {
  if (v === undefined || v === null || v === 'priority') return 'fifo';
  if (typeof v !== 'string' || !(CLAIM_KINDS as readonly string[]).includes(v))
    throw badRequest(`unknown claim kind ${JSON.stringify(v)}: expected fifo (or its alias priority), filo or boltzmann`);
  return v as ClaimKind;
}

export function temperature(v: unknown): number {
  const t = finite('temperature', v, 1);
  if (t < 0) throw badRequest('temperature must not be negative');
  return t;
}

/**
 * A free-form JSON value (meta, an error object), refused past `max` levels of nesting. It walks
 * the value with its own stack, so a value too deep for a recursive walk is refused, not a crash.
 */
export function jsonValue<T>(what: string, value: T, max: number): T {
  // Two stacks of containers only (a leaf is never pushed): a client walks every body it sends.
  const nodes: object[] = [];
  const depths: number[] = [];
  if (typeof value === 'object' && value !== null) {
    nodes.push(value);
    depths.push(1);
  }
  while (nodes.length) {
    const v = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > max) throw badRequest(`${what} nests deeper than ${max} levels`);
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (typeof child === 'object' && child !== null) {
        nodes.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return value;
}

/** A lease in ms: null (use the queue's, then the plane's), or 1 ms up to the plane's longest. */
export function leaseMs(v: unknown, l: Limits, what = 'lease_ms'): number | null {
  if (v === undefined || v === null) return null;
  const ms = nonNegInt(what, v, 0, l.maxLeaseMs);
  if (ms < 1) throw badRequest(`${what} must be at least 1`);
  return ms;
}

/** A batch's items: at most the plane's `maxBatch`. */
export function batch<T>(items: T[], l: Limits): T[] {
  if (items.length > l.maxBatch) throw badRequest(`a batch holds at most ${l.maxBatch} items; this one holds ${items.length}`);
  return items;
}

/** A duration in ms (a delay, a TTL) from `min` up to the plane's furthest; null when absent. */
export function durationMs(what: string, v: unknown, l: Limits, min = 0): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw badRequest(`${what} must be a number of milliseconds`);
  if (v < min) throw badRequest(min === 0 ? `${what} must not be negative` : `${what} must be at least ${min}`);
  if (v > l.maxDelayMs) throw badRequest(`${what} is ${v} ms; the furthest this plane allows is ${l.maxDelayMs} ms`);
  return Math.floor(v);
}

/** A moment (epoch ms) no further ahead than the plane allows; null when absent. */
export function moment(what: string, v: unknown, now: number, l: Limits): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw badRequest(`${what} must be epoch milliseconds`);
  if (v > now + l.maxDelayMs) throw badRequest(`${what} is more than ${l.maxDelayMs} ms ahead, the furthest this plane allows`);
  return v;
}

/** An attempt budget: 1 to 1,000 attempts; null when absent. */
export function attempts(what: string, v: unknown): number | null {
  if (v === undefined || v === null) return null;
  const n = nonNegInt(what, v, 0, 1000);
  if (n < 1) throw badRequest(`${what} must be at least 1`);
  return n;
}

export function attempt(v: unknown): number | null {
  if (v === undefined || v === null) return null;
  return nonNegInt('attempt', v, 0);
}
