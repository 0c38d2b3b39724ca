/**
 * Bounded waits on an observable condition: how tests order events instead of sleeping. A wait
 * that runs out throws, naming what it waited for (`what` may be a function: said as it is then).
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string | (() => string | Promise<string>) = 'condition',
  timeoutMs = 20_000,
  everyMs = 10,
): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : await what()}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The value `get` answers once it is not undefined, within the bound. */
export async function eventually<T>(get: () => Promise<T | undefined> | T | undefined, what = 'value', timeoutMs = 20_000): Promise<T> {
  let v: T | undefined;
  await until(async () => (v = await get()) !== undefined, what, timeoutMs);
  return v!;
}

/** Simulated work: a handler or job that takes `ms`. Not for ordering a test's steps (use until). */
export const work = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
