/**
 * The process-default plane, resolved once from the environment:
 *   LAKESHORE_URL set  -> HttpDispatch(LAKESHORE_URL, {token: LAKESHORE_TOKEN, namespace: LAKESHORE_NAMESPACE})
 *   otherwise          -> Dispatch($LAKESHORE_HOME/dispatch.sqlite), LAKESHORE_HOME defaulting to ~/.lakeshore
 */
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { HttpDispatch } from '../http/dispatch.ts';
import type { DispatchPlane } from '../types.ts';
import { Dispatch } from './dispatch.ts';

let plane: DispatchPlane | null = null;

export function planeFromEnv(env: NodeJS.ProcessEnv = process.env): DispatchPlane {
  const namespace = env.LAKESHORE_NAMESPACE || 'default';
  if (env.LAKESHORE_URL) return new HttpDispatch(env.LAKESHORE_URL, { token: env.LAKESHORE_TOKEN, namespace });
  const home = env.LAKESHORE_HOME || join(homedir(), '.lakeshore');
  mkdirSync(home, { recursive: true });
  return new Dispatch(join(home, 'dispatch.sqlite'), { namespace });
}

export function defaultDispatch(): DispatchPlane {
  plane ??= planeFromEnv();
  return plane;
}
