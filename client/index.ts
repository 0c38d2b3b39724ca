/**
 * `@dreamlake/lakeshore`: the HTTP client, the Queue API and the worker, for Node >= 18 (test/node/package.test.ts
 * runs it on the system's Node 20); errors, the frame codec and the contract's types. The local
 * SQLite plane is `@dreamlake/lakeshore/local` (client/local/index.ts); web pages use `@dreamlake/lakeshore/browser`.
 */
export { HttpDispatch, type HttpDispatchOptions } from './http/dispatch.ts';
export * from './errors.ts';
export * from './types.ts';
export { FrameKind, encodeFrame, decodeFrame } from '../src/core/frame.ts';
export { defaultDispatch, planeFromEnv, type PlaneFlags } from './default.ts';
export {
  Queue,
  Handle,
  dispatchByName,
  setRoutes,
  DEFAULT_POOL,
  type Route,
  type RouteTable,
  type SubmitCallOptions,
  type ScheduleCallOptions,
} from './queue.ts';
export { encodeEnvelope, decodeEnvelope, jsonBytes, fromJsonBytes, type Envelope } from './envelope.ts';
export { runWorker, type WorkerOptions } from './worker/run-worker.ts';
export type { OnDone, DoneJob } from './worker/job.ts';
export { currentJob, setOriginFor, type JobContext } from './worker/context.ts';
// A push receiver's part, also `@dreamlake/lakeshore/push` alone (no Node built-in: a Worker bundles it bare).
export * from './receiver.ts';
