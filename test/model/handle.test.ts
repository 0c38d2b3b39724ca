/** A Handle waits as long as its job takes unless told otherwise: result() and the end of stream(). */
import { describe, expect, it } from 'vitest';
import { Handle } from '../../client/queue.ts';
import type { DispatchPlane } from '../../client/types.ts';

describe('a Handle', () => {
  it('asks the plane for the result with no bound unless given one (a training run takes hours)', async () => {
    const asked: (number | undefined)[] = [];
    const plane = {
      result: async (_id: string, opts: { timeoutMs?: number }) => {
        asked.push(opts.timeoutMs);
        return new TextEncoder().encode('42');
      },
      async *journalRead() {},
    } as unknown as DispatchPlane;
    const h = new Handle<number>('job', plane);
    expect(await h.result()).toBe(42);
    expect(await h.result({ timeoutMs: 5_000 })).toBe(42);
    for await (const _ of h.stream()) void _; // no END in the journal: the row says how it ended
    expect(asked).toEqual([Number.POSITIVE_INFINITY, 5_000, Number.POSITIVE_INFINITY]);
  });
});
