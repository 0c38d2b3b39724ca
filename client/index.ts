/** The lakeshore Node client: planes, errors, the frame codec and the contract's types. */
export { HttpDispatch, type HttpDispatchOptions } from './http/dispatch.ts';
export * from './errors.ts';
export * from './types.ts';
export { FrameKind, encodeFrame, decodeFrame } from '../src/core/frame.ts';
export { Dispatch, type DispatchOptions } from './local/dispatch.ts';
export { defaultDispatch, planeFromEnv } from './local/default.ts';
export { Queue, Handle, dispatchByName, type Route, type RouteTable, type SubmitCallOptions } from './queue.ts';
export { encodeEnvelope, decodeEnvelope, jsonBytes, fromJsonBytes, type Envelope } from './envelope.ts';
export { runWorker, type WorkerOptions } from './worker/run-worker.ts';
export { currentJob, type JobContext } from './worker/context.ts';
