/**
 * Which plane to talk to, in one place for the library and the CLI. Flags (the CLI's) win, then
 * the environment; an empty value counts as unset:
 *   a URL (--url, LAKESHORE_URL)  -> HttpDispatch(url, {token: --token / LAKESHORE_TOKEN, namespace})
 *   otherwise                     -> Dispatch(<home>/dispatch.sqlite), home from --home / LAKESHORE_HOME, else ~/.lakeshore
 * The namespace comes from --namespace / LAKESHORE_NAMESPACE, else `default`. LAKESHORE_RETRY_FOR_MS
 * sets how long a request to an unreachable plane is retried (default 15000; 0: not at all).
 */
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { HttpDispatch } from '../http/dispatch.ts';
import type { DispatchPlane } from '../types.ts';
import { Dispatch } from './dispatch.ts';

export interface PlaneFlags {
  url?: string;
  token?: string;
  namespace?: string;
  home?: string;
  /** See HttpDispatchOptions.onUnreachable. */
  onUnreachable?: (message: string) => void;
}

let plane: DispatchPlane | null = null;

export function planeFromEnv(env: NodeJS.ProcessEnv = process.env, flags: PlaneFlags = {}): DispatchPlane {
  const pick = (flag: string | undefined, name: string) => flag || env[name] || undefined;
  const namespace = pick(flags.namespace, 'LAKESHORE_NAMESPACE') ?? 'default';
  const url = pick(flags.url, 'LAKESHORE_URL');
  if (url) {
    const retryFor = env.LAKESHORE_RETRY_FOR_MS ? Number(env.LAKESHORE_RETRY_FOR_MS) : undefined;
    return new HttpDispatch(url, { token: pick(flags.token, 'LAKESHORE_TOKEN'), namespace, onUnreachable: flags.onUnreachable, retryForMs: retryFor });
  }
  const home = pick(flags.home, 'LAKESHORE_HOME') ?? join(homedir(), '.lakeshore');
  mkdirSync(home, { recursive: true });
  return new Dispatch(join(home, 'dispatch.sqlite'), { namespace });
}

/** The process-default plane, resolved from the environment once. */
export function defaultDispatch(): DispatchPlane {
  plane ??= planeFromEnv();
  return plane;
}
