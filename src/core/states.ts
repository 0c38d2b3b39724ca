/** The invocation state machine. Every transition is one guarded UPDATE (see ./sql). */
export const STATES = Object.freeze(['delayed', 'queued', 'running', 'succeeded', 'failed', 'cancelled'] as const);
export type State = (typeof STATES)[number];

export const TERMINAL: ReadonlySet<State> = new Set<State>(['succeeded', 'failed', 'cancelled']);
export const isTerminal = (s: State): boolean => TERMINAL.has(s);
export const isState = (s: string): s is State => (STATES as readonly string[]).includes(s);

/**
 * The transition table: verb -> the states it may start from -> the state it ends in.
 * The guards in ./sql encode exactly these `from` sets; a row in any other state is a clean miss.
 * test/model/transitions.test.ts runs each verb's statement on a row in every state to check it.
 * A delayed row is waiting for its time (a submit's delay, a retry's backoff); once due it is
 * moved to queued (promote), in front of every claim and from the queue's alarm.
 */
export const TRANSITIONS = Object.freeze({
  submit: { from: [] as State[], to: 'queued' },
  submitDelayed: { from: [] as State[], to: 'delayed' },
  promote: { from: ['delayed'], to: 'queued' },
  claim: { from: ['queued'], to: 'running' },
  ack: { from: ['running'], to: 'succeeded' },
  nackRetry: { from: ['running'], to: 'queued' },
  nackBackoff: { from: ['running'], to: 'delayed' },
  nackFail: { from: ['running'], to: 'failed' },
  expireRetry: { from: ['running'], to: 'queued' },
  expireBackoff: { from: ['running'], to: 'delayed' },
  expireFail: { from: ['running'], to: 'failed' },
  ttl: { from: ['delayed', 'queued'], to: 'failed' },
  cancel: { from: ['delayed', 'queued', 'running'], to: 'cancelled' },
  retry: { from: ['failed'], to: 'queued' },
  /** A claim's answer that never reached its worker (edge plane: the client was gone). */
  release: { from: ['running'], to: 'queued' },
} satisfies Record<string, { from: State[]; to: State }>);
