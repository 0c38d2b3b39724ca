/**
 * Which plane to talk to, in one place for the library and the CLI. Flags (the CLI's) win, then
 * the environment; an empty value counts as unset:
 *   a URL (--url, LAKESHORE_URL)  -> HttpDispatch(url, {token: --token / LAKESHORE_TOKEN, namespace})
 *   otherwise                     -> the local SQLite plane, once `lakeshore/local` is loaded
 *                                    (Dispatch(<home>/dispatch.sqlite), home from --home / LAKESHORE_HOME, else ~/.lakeshore)
 * The namespace comes from --namespace / LAKESHORE_NAMESPACE, else `default`. LAKESHORE_RETRY_FOR_MS
 * sets how long a request to an unreachable plane is retried (default 15000; 0: not at all).
 *
 * This module runs wherever fetch does: the local plane (node:sqlite) is never imported from here;
 * `lakeshore/local` registers it.
 */
import { BadRequestError } from './errors.ts';
import { HttpDispatch, type HttpDispatchOptions } from './http/dispatch.ts';
import type { DispatchPlane } from './types.ts';

export interface PlaneFlags {
  url?: string;
  token?: string;
  namespace?: string;
  home?: string;
  /** See HttpDispatchOptions.onUnreachable. */
  onUnreachable?: (message: string) => void;
  /** See HttpDispatchOptions: a worker retries for ever (Infinity), and logs an outage once (onOutage). */
  retryForMs?: number;
  onOutage?: HttpDispatchOptions['onOutage'];
  maxBackoffMs?: number;
}

type Env = Record<string, string | undefined>;
type LocalPlane = (env: Env, flags: PlaneFlags & { namespace: string }) => DispatchPlane;

let localPlane: LocalPlane | null = null;
let plane: DispatchPlane | null = null;

/** Called by `lakeshore/local` when it loads: planes without a URL are then local SQLite planes. */
export function useLocalPlane(make: LocalPlane): void {
  localPlane = make;
}

const processEnv = (): Env => (globalThis as { process?: { env?: Env } }).process?.env ?? {};

export function planeFromEnv(env: Env = processEnv(), flags: PlaneFlags = {}): DispatchPlane {
  const pick = (flag: string | undefined, name: string) => flag || env[name] || undefined;
  const namespace = pick(flags.namespace, 'LAKESHORE_NAMESPACE') ?? 'default';
  const url = pick(flags.url, 'LAKESHORE_URL');
  if (url) {
    const retryFor = env.LAKESHORE_RETRY_FOR_MS ? Number(env.LAKESHORE_RETRY_FOR_MS) : undefined;
    return new HttpDispatch(url, {
      token: pick(flags.token, 'LAKESHORE_TOKEN'),
      namespace,
      onUnreachable: flags.onUnreachable,
      retryForMs: flags.retryForMs ?? retryFor,
      onOutage: flags.onOutage,
      maxBackoffMs: flags.maxBackoffMs,
    });
  }
  if (localPlane) return localPlane(env, { ...flags, namespace });
  throw new BadRequestError(
    "no plane: set LAKESHORE_URL (and LAKESHORE_TOKEN) for an edge plane, or import '@dreamlake/lakeshore/local' for the local SQLite plane",
  );
}

/** The process-default plane, resolved from the environment once. */
export function defaultDispatch(): DispatchPlane {
  plane ??= planeFromEnv();
  return plane;
}
