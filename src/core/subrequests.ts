/**
 * A long-lived stream's share of its request's subrequests (docs/deploy.md, "Settings", and
 * docs/contract.md, "Namespace-wide"). Cloudflare counts each fetch, D1 query and Durable Object
 * call a Worker makes against the request it serves: 50 on the Workers Free plan; on Paid, 10,000
 * by the Workers limits page and 1,000 D1 queries by D1's. A stream open for hours spends them: the
 * namespace-wide feed lists its queues every 2 s and renews its stream lease every 20 s. Past the
 * limit each such call throws, and the stream would stay open but deaf: to queues that start, and
 * to a queue object that restarted (a deploy), whose records would never reach the reader.
 *
 * So such a stream ends itself cleanly before then, and its reader reconnects with its
 * Last-Event-ID and loses nothing: each stream is a fresh request with a fresh count.
 */

/** The var STREAM_SUBREQUESTS: what a stream may spend of its request's count (the lowest documented Paid figure). */
export const DEFAULT_STREAM_SUBREQUESTS = 1_000;
/** Kept back for what the request spends outside the stream's count: its token check, its directory read, its lease's close. */
export const SUBREQUEST_RESERVE = 4;

/** The var as a whole number of at least SUBREQUEST_RESERVE + 1, else the default. */
export function streamSubrequests(v: string | undefined): number {
  const n = Number(v);
  return Number.isInteger(n) && n > SUBREQUEST_RESERVE ? n : DEFAULT_STREAM_SUBREQUESTS;
}

export class SubrequestBudget {
  private left: number;
  private ended = false;
  private readonly end: () => void;

  /** `end` is called once, when a call would pass the budget: the stream ends there. */
  constructor(limit: number, end: () => void) {
    this.left = limit - SUBREQUEST_RESERVE;
    this.end = end;
  }

  /** Counts `n` subrequests about to be made: true when they fit, else false (and the stream ends). */
  take(n = 1): boolean {
    if (this.left >= n) {
      this.left -= n;
      return true;
    }
    if (!this.ended) {
      this.ended = true;
      this.end();
    }
    return false;
  }
}

/**
 * The var MOVE_STEP_SUBREQUESTS: what one step of a namespace's move may ask (src/durable/mover.ts),
 * each D1 statement (alone or in a batch) and each queue-object call counted as one. Each step is an
 * invocation of the mover of its own; the default is half of D1's 1,000 queries an invocation on
 * Paid. On the Free plan (50) set it to 40.
 */
export const DEFAULT_MOVE_STEP_SUBREQUESTS = 500;
/** The least a step must be able to ask: a fingerprint of both shards and a deleting unit are one unit each. */
export const MIN_MOVE_STEP_SUBREQUESTS = 20;

/** The var as a whole number, at least MIN_MOVE_STEP_SUBREQUESTS; unset or not a whole number, the default. */
export function moveStepSubrequests(v: string | undefined): number {
  const n = Number(v);
  return v && Number.isInteger(n) && n > 0 ? Math.max(n, MIN_MOVE_STEP_SUBREQUESTS) : DEFAULT_MOVE_STEP_SUBREQUESTS;
}
