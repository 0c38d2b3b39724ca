/**
 * The language-neutral envelope: what a producer asks a worker to run. It is UTF-8 JSON, so
 * Python and Node both write and read it with their standard libraries; the plane carries it
 * as opaque bytes.
 *
 *   {"v": 1, "fn": "train", "args": [...], "kwargs": {...},
 *    "module": "./handlers.js#train" | "pkg.mod:train",
 *    "traceparent": "00-<trace>-<span>-01", "origin": "app's own correlation",
 *    "time_limit_ms": 60000, "max_retries": 2, "code": "<git tree hash>"}
 *
 * Each field after kwargs is written only when it is not null; a reader takes one missing as null.
 */
import { BadRequestError } from './errors.ts';

export interface Envelope {
  v: 1;
  /** The function's name: the worker looks it up in its registry first. */
  fn: string;
  args: unknown[];
  kwargs: Record<string, unknown>;
  /** Where the function lives, for workers allowed to import it ("path#export" in Node). */
  module: string | null;
  /** W3C trace context of the submitter, so the worker's spans join its trace. */
  traceparent: string | null;
  /** The application's own correlation string, carried as it is (onDone sees it). */
  origin: string | null;
  /** Abort and nack the job when it runs longer than this. */
  time_limit_ms: number | null;
  /** Retry a failed job while its attempt is at most this. */
  max_retries: number | null;
  /** The stamp of the producer's pushed git tree (docs/code-mount.md): `module` is imported from it. */
  code: string | null;
}

export type EnvelopeInput = Partial<Omit<Envelope, 'v' | 'fn'>> & { fn: string };

const enc = new TextEncoder();
const dec = new TextDecoder();

export function encodeEnvelope(e: EnvelopeInput): Uint8Array {
  if (typeof e.fn !== 'string' || !e.fn) throw new BadRequestError('an envelope needs a function name (fn)');
  // A field that is null is left out (readers take it missing as null): on a job the clients
  // make, the five nulls were 80 of its envelope's 190 bytes, stored with every row.
  const out: Record<string, unknown> = { v: 1, fn: e.fn, args: e.args ?? [], kwargs: e.kwargs ?? {} };
  for (const k of OPTIONAL) if (e[k] !== undefined && e[k] !== null) out[k] = e[k];
  return enc.encode(JSON.stringify(out));
}

/** The fields an envelope carries only when they say something. */
const OPTIONAL = ['module', 'traceparent', 'origin', 'time_limit_ms', 'max_retries', 'code'] as const;

export function decodeEnvelope(bytes: Uint8Array): Envelope {
  let v: unknown;
  try {
    v = JSON.parse(dec.decode(bytes));
  } catch {
    throw new BadRequestError('the envelope is not JSON');
  }
  const e = v as Partial<Envelope>;
  if (!e || typeof e !== 'object' || typeof e.fn !== 'string' || !e.fn) throw new BadRequestError('the envelope has no function name (fn)');
  if (e.args !== undefined && !Array.isArray(e.args)) throw new BadRequestError('envelope args must be an array');
  if (e.kwargs !== undefined && e.kwargs !== null && (typeof e.kwargs !== 'object' || Array.isArray(e.kwargs)))
    throw new BadRequestError('envelope kwargs must be an object');
  return {
    v: 1,
    fn: e.fn,
    args: e.args ?? [],
    kwargs: e.kwargs ?? {},
    module: e.module ?? null,
    traceparent: e.traceparent ?? null,
    origin: typeof e.origin === 'string' ? e.origin : null,
    time_limit_ms: typeof e.time_limit_ms === 'number' ? e.time_limit_ms : null,
    max_retries: typeof e.max_retries === 'number' ? e.max_retries : null,
    code: typeof e.code === 'string' ? e.code : null,
  };
}

/** JSON values as bytes, the form results and VALUE frame bodies take. */
/** The call an envelope makes (a schedule's ticks, a job), as it says it (the fields it leaves out not shown as nulls); null when it is no call. */
export function callOf(envelope: Uint8Array): Partial<Envelope> | null {
  try {
    return Object.fromEntries(Object.entries(decodeEnvelope(envelope)).filter(([k, v]) => v !== null && k !== 'v'));
  } catch {
    return null; // set through the API with bytes of its own
  }
}

/** A call as a person reads it: `report("eu", days=7)`, cut at `max` characters (60 unless said). */
export function callText(envelope: Uint8Array, max = 60): string {
  const c = callOf(envelope);
  if (!c) return `(${envelope.length} bytes, not a call)`;
  const parts = [
    ...(c.args ?? []).map((a) => JSON.stringify(a)),
    ...Object.entries(c.kwargs ?? {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`),
  ];
  const text = `${c.fn}(${parts.join(', ')})`;
  return text.length > max ? `${text.slice(0, max - 2)}…)` : text;
}

/** A schedule's `next_at` when it never fires again here: its cron is one this plane cannot read (contract, "Schedules"). */
export const NEVER = Number.MAX_SAFE_INTEGER;

export const jsonBytes = (v: unknown): Uint8Array => enc.encode(JSON.stringify(v === undefined ? null : v));
export const fromJsonBytes = (b: Uint8Array | null): unknown => (b === null || b.length === 0 ? null : JSON.parse(dec.decode(b)));

/** A fresh W3C traceparent (version 00, sampled). */
export function newTraceparent(): string {
  const hex = (n: number) => Array.from(crypto.getRandomValues(new Uint8Array(n)), (b) => b.toString(16).padStart(2, '0')).join('');
  return `00-${hex(16)}-${hex(8)}-01`;
}
