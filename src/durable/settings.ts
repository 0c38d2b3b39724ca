/** Plane settings from the Worker's vars: defaults that a queue's own settings override. */
import { DEFAULT_LIMITS, type Limits } from '../core/limits.ts';
import { DEFAULT_STORAGE_LIMIT_BYTES } from '../core/storage.ts';
import type { PushHosts } from '../core/push-target.ts';

function int(v: string | undefined, name: string): number | undefined {
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

/** Limits of the HTTP face, per token (a token's own limits win); see src/worker/limits.ts. */
export interface HttpLimits {
  requestsPerSecond: number;
  requestBurst: number;
  streamsPerToken: number;
}

export const DEFAULT_HTTP_LIMITS: Readonly<HttpLimits> = Object.freeze({
  requestsPerSecond: 2000,
  requestBurst: 4000,
  streamsPerToken: 64,
});

export interface Settings {
  limits: Partial<Limits>;
  /** The defaults with `limits` applied. */
  resolved: Limits;
  http: HttpLimits;
  simulatedDelayMs: number;
  /** Benchmarks only: D1 as a single writer, each query holding its database this long (d1-model.ts). */
  simulatedServiceMs: number;
  /** COUNT_D1_QUERIES=1: count D1 queries per database (d1-model.ts), for benchmarks. */
  countD1Queries: boolean;
  /** Each shard's storage budget (STORAGE_LIMIT_BYTES, STORAGE_HIGH_WATER_PERCENT). */
  storage: { limitBytes: number; highWaterPercent: number };
  /** Where push targets may point (PUSH_HOSTS): `public` unless the plane runs on this machine. */
  pushHosts: PushHosts;
  /** PUSH_SERVICES: the service bindings a push target may name (`service://BINDING/path`). */
  pushServices: string[];
  /** MOVE_LOOK_MS: how often a queue object fenced by a move looks at the directory, should the mover's unfence not arrive. */
  moveLookMs: number;
}

/**
 * A fenced object's look at the directory: a fallback (the mover unfences every object, trying
 * twice), so seldom; under the 15 s the clients retry a write refused meanwhile.
 */
export const DEFAULT_MOVE_LOOK_MS = 10_000;

export const DEFAULT_HIGH_WATER_PERCENT = 90;

/** `envelopeBytes` -> `LIMIT_ENVELOPE_BYTES`: every limit can be set by a var of that name. */
const varName = (k: string) => `LIMIT_${k.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;

const cache = new WeakMap<object, Settings>();

/** The settings of an env, parsed once per env object (every request of an isolate shares it). */
export function settingsFrom(env: Env): Settings {
  let s = cache.get(env);
  if (!s) cache.set(env, (s = parse(env)));
  return s;
}

/** The `LIMIT_*` vars set for the keys of `defaults` (unset or 0: keep the default). */
function overrides<T extends object>(e: Record<string, string | undefined>, defaults: T): Partial<T> {
  const out: Partial<T> = {};
  for (const k of Object.keys(defaults) as (keyof T & string)[]) {
    const n = int(e[varName(k)], varName(k));
    if (n) out[k] = n as T[keyof T & string];
  }
  return out;
}

function pushHosts(v: string | undefined): PushHosts {
  if (v === undefined || v === '' || v === 'public') return 'public';
  if (v === 'local') return 'local';
  throw new Error(`PUSH_HOSTS must be "public" or "local", got ${JSON.stringify(v)}`);
}

function parse(env: Env): Settings {
  const e = env as unknown as Record<string, string | undefined>;
  const limits: Partial<Limits> = overrides<Limits>(e, DEFAULT_LIMITS);
  const lease = int(e.DEFAULT_LEASE_MS, 'DEFAULT_LEASE_MS');
  const attempts = int(e.DEFAULT_MAX_ATTEMPTS, 'DEFAULT_MAX_ATTEMPTS');
  if (lease) limits.defaultLeaseMs = lease;
  if (attempts) limits.defaultMaxAttempts = attempts;
  const retention = int(e.DEFAULT_RETENTION_MS, 'DEFAULT_RETENTION_MS');
  if (retention) limits.defaultRetentionMs = retention;
  const http: HttpLimits = { ...DEFAULT_HTTP_LIMITS, ...overrides<HttpLimits>(e, DEFAULT_HTTP_LIMITS) };
  return {
    limits,
    resolved: { ...DEFAULT_LIMITS, ...limits },
    http,
    simulatedDelayMs: int(e.SIMULATED_D1_DELAY_MS, 'SIMULATED_D1_DELAY_MS') ?? 0,
    simulatedServiceMs: Number(e.SIMULATED_D1_SERVICE_MS ?? 0) || 0,
    countD1Queries: e.COUNT_D1_QUERIES === '1',
    pushHosts: pushHosts(e.PUSH_HOSTS),
    pushServices: (e.PUSH_SERVICES ?? '')
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
    moveLookMs: Math.max(100, int(e.MOVE_LOOK_MS, 'MOVE_LOOK_MS') || DEFAULT_MOVE_LOOK_MS),
    storage: {
      limitBytes: int(e.STORAGE_LIMIT_BYTES, 'STORAGE_LIMIT_BYTES') || DEFAULT_STORAGE_LIMIT_BYTES,
      highWaterPercent: Math.min(100, int(e.STORAGE_HIGH_WATER_PERCENT, 'STORAGE_HIGH_WATER_PERCENT') || DEFAULT_HIGH_WATER_PERCENT),
    },
  };
}
