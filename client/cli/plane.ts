/** Which plane a CLI command talks to: flags win, the environment fills the gaps. */
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { HttpDispatch } from '../http/dispatch.ts';
import { Dispatch } from '../local/dispatch.ts';
import type { DispatchPlane } from '../types.ts';

export interface PlaneFlags {
  url?: string;
  token?: string;
  namespace?: string;
  home?: string;
}

export function openPlane(f: PlaneFlags, env: NodeJS.ProcessEnv = process.env): DispatchPlane {
  const url = f.url ?? env.LAKESHORE_URL;
  const namespace = f.namespace ?? env.LAKESHORE_NAMESPACE ?? 'default';
  if (url) return new HttpDispatch(url, { token: f.token ?? env.LAKESHORE_TOKEN, namespace });
  const home = f.home ?? env.LAKESHORE_HOME ?? join(homedir(), '.lakeshore');
  mkdirSync(home, { recursive: true });
  return new Dispatch(join(home, 'dispatch.sqlite'), { namespace });
}

export const describePlane = (d: DispatchPlane) => (d instanceof HttpDispatch ? `${d.baseUrl} (namespace ${d.namespace})` : `${(d as Dispatch).path} (namespace ${d.namespace})`);
