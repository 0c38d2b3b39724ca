/** The local SQLite plane as the default plane without a URL (see client/default.ts). */
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { useLocalPlane, type PlaneFlags } from '../default.ts';
import { Dispatch } from './dispatch.ts';

useLocalPlane((env, flags: PlaneFlags & { namespace: string }) => {
  const home = flags.home || env.LAKESHORE_HOME || join(homedir(), '.lakeshore');
  mkdirSync(home, { recursive: true });
  return new Dispatch(join(home, 'dispatch.sqlite'), { namespace: flags.namespace });
});
