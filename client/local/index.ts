/**
 * `@dreamlake/lakeshore/local`: the local SQLite plane (node:sqlite, Node >= 22.12), and everything of
 * `@dreamlake/lakeshore`. Loading it makes the local plane the default where no LAKESHORE_URL is set.
 */
import './default.ts';

export * from '../index.ts';
export { Dispatch, type DispatchOptions } from './dispatch.ts';
export { startPushing, type Pushing, type PushingOptions } from './push.ts';
