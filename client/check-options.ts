/**
 * Refuses options a call does not take. A JavaScript caller has no compiler to say that
 * `handlers` is not `registry` or `delay` is not `delayMs`, and a call that ignored one would do
 * something else than asked (a worker failing every job, a delayed job run at once).
 *
 * `call` is how the call is written (`runWorker(queues, options)`), `known` every option it takes,
 * `meant` what an option it does not take most likely meant.
 */
export function checkOptions<K extends string>(call: string, opts: unknown, known: Record<K, true>, meant: Record<string, K>): void {
  const name = call.slice(0, call.indexOf('('));
  if (opts === null || typeof opts !== 'object' || Array.isArray(opts))
    throw new TypeError(`${call}: options is an object, not ${Array.isArray(opts) ? 'an array' : String(opts)}`);
  const odd = Object.keys(opts).filter((k) => !Object.hasOwn(known, k));
  if (odd.length)
    throw new TypeError(
      `${name}: no option ${odd.map((k) => (meant[k] ? `${k} (${meant[k]}, perhaps)` : k)).join(', ')}; its options are ${Object.keys(known).join(', ')}`,
    );
}
