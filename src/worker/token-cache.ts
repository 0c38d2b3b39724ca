/**
 * Scoped tokens as this isolate last read them, so that checking one costs no D1 query in steady
 * state: a token's row is read from the home database on its first request here, then kept.
 *
 * A token's row changes once in its life: revoked. The revocation reaches every isolate through
 * the token's gate (src/durable/gate.ts), which each one asks at least once a second for every
 * token it serves (its spare request permits last that long, src/worker/admission.ts): the gate's
 * answer `revoked` drops the token here and refuses the request. So a revoked token is refused by
 * every isolate within about a second, and by an isolate that never saw it at once (the row says
 * so). The digest of the presented token is compared with the stored one on every request.
 */
import type { Principal } from '../core/tokens.ts';

interface Known {
  principal: Extract<Principal, { kind: 'token' }>;
  digest: string;
}

const MAX = 10_000;
const known = new Map<string, Known>();

export function cachedToken(id: string): Known | undefined {
  return known.get(id);
}

export function keepToken(id: string, k: Known): void {
  if (known.size >= MAX) known.delete(known.keys().next().value!);
  known.set(id, k);
}

export function forgetToken(id: string): void {
  known.delete(id);
}
