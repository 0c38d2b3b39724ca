/**
 * `@dreamlake/lakeshore/push`: what a push receiver needs (docs/contract.md, "Push delivery"), and
 * nothing that needs Node. It bundles into a Cloudflare Worker with no compatibility flag, and
 * into any function runtime with fetch and WebCrypto (test/node/package.test.ts runs it in
 * `wrangler dev`). Check a delivery, read its call, answer it, or answer 202 and finish later.
 *
 *   import { verifyDelivery, decodeEnvelope, finishLater } from '@dreamlake/lakeshore/push';
 */
export {
  batchAnswer,
  verifyBatch,
  verifyDelivery,
  type Batch,
  type BatchOutcome,
  type Delivery,
  type VerifyOptions,
} from './push.ts';
export { finishLater, type FinishLaterOptions, type LaterJob } from './push-later.ts';
export { decodeEnvelope, fromJsonBytes, jsonBytes, type Envelope } from './envelope.ts';
export { HttpDispatch, type HttpDispatchOptions } from './http/dispatch.ts';
export * from './errors.ts';
