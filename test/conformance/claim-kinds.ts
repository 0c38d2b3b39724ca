/** Conformance: claim kinds (fifo, filo, boltzmann), the same on every plane. */
import { beforeEach, describe, expect, it } from 'vitest';
import type { DispatchPlane } from '../../client/local/index.ts';

const bytes = (s: string) => new TextEncoder().encode(s);

/**
 * `plane()` answers the plane of the running test (made fresh by the suite for each test).
 * `samples`: how many claims a statistical test makes on this plane (2,000 unless it says fewer:
 * each costs a round trip over HTTP); its tolerance is four standard errors at that size.
 */
export function claimKinds(plane: () => DispatchPlane, lacks: ReadonlySet<string> = new Set(), samples = 2_000) {
  const unless = (name: string) => it.skipIf(lacks.has(name));
  describe('claim kinds', () => {
    let d: DispatchPlane;
    beforeEach(() => {
      d = plane(); // the suite's beforeEach has made this test's plane
    });
    const load = async (pairs: [string, number][]) => {
      for (const [id, p] of pairs) await d.submit('q', bytes('x'), { id, priority: p });
    };
    const order = async (kind: 'fifo' | 'filo' | 'boltzmann' | 'priority', n: number, temperature?: number) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) ids.push((await d.claim('q', 'w', { kind, temperature }))!.id);
      return ids;
    };

    it('fifo: highest priority first, ties oldest first', async () => {
      await load([
        ['a', 0],
        ['b', 1],
        ['c', 0],
        ['d', 1],
        ['e', -1],
        ['f', 3],
      ]);
      expect(await order('fifo', 6)).toEqual(['f', 'b', 'd', 'a', 'c', 'e']);
    });

    it("priority is the contract's other name for fifo", async () => {
      await load([
        ['a', 0],
        ['b', 1],
        ['c', 0],
        ['d', 1],
        ['e', -1],
        ['f', 3],
      ]);
      expect(await order('priority', 6)).toEqual(['f', 'b', 'd', 'a', 'c', 'e']);
      await expect(d.claim('q', 'w', { kind: 'lifo' as 'fifo' })).rejects.toMatchObject({ code: 'bad_request' });
    });

    it('filo: highest priority first, ties newest first', async () => {
      await load([
        ['a', 0],
        ['b', 1],
        ['c', 0],
        ['d', 1],
        ['e', -1],
        ['f', 3],
      ]);
      expect(await order('filo', 6)).toEqual(['f', 'd', 'b', 'c', 'a', 'e']);
    });

    unless('boltzmann')('boltzmann: T → 0 degenerates to fifo', async () => {
      await load([
        ['a', 0],
        ['b', 1],
        ['c', 0],
        ['d', 1],
      ]);
      expect(await order('boltzmann', 4, 0)).toEqual(['b', 'd', 'a', 'c']);
    });

    unless('claimBytes')('a claim of several hands out at most 16 MiB of envelopes, and at least one job whatever its size', async () => {
      const mib = new Uint8Array(1 << 20);
      await d.submitMany(
        'big',
        Array.from({ length: 17 }, (_, i) => ({ envelope: mib, opts: { id: `m${i}` } })),
      );
      const first = await d.claimMany('big', 'w', 17);
      expect(first.map((c) => c.id)).toEqual(Array.from({ length: 16 }, (_, i) => `m${i}`));
      // The one it took beyond went back uncharged: its next claim is the first of its budget,
      // though the attempt number counts the claim it went back from.
      expect(await d.claimMany('big', 'w', 17)).toMatchObject([{ id: 'm16', attempt: 2, budgetAttempt: 1 }]);
    });

    // A statistical test: with one job at priority 0 and one at 1, each claim takes the
    // priority-1 job with probability e/(1+e) ≈ 0.731 at T = 1, and ≈ 0.5 at T = 1000. The
    // tolerance is 4 standard errors of the share at this many claims (±0.04 at 2,000; ±0.07 at
    // 600), far inside the gap to what a broken sampler answers (fifo: 1.0; uniform at T = 1: 0.5).
    // Eight queues run side by side, each claim's job put back by a nack (within an attempt budget of 1,000).
    const within = (p: number) => 4 * Math.sqrt((p * (1 - p)) / samples);
    const share = async (temperature: number, claims: number) => {
      const lanes = 8;
      const counts = await Promise.all(
        Array.from({ length: lanes }, async (_, lane) => {
          const q = `bz${lane}`;
          await d.configureQueue(q, { maxAttempts: 1000 }); // each job is claimed up to claims / lanes times
          await d.submit(q, bytes('x'), { id: `${q}-p0`, priority: 0 });
          await d.submit(q, bytes('x'), { id: `${q}-p1`, priority: 1 });
          let ones = 0;
          for (let i = 0; i < claims / lanes; i++) {
            const c = (await d.claim(q, `w${lane}`, { kind: 'boltzmann', temperature }))!;
            if (c.id.endsWith('-p1')) ones++;
            await d.nack(c.id, `w${lane}`, { error: 'put back', retry: true });
          }
          return ones;
        }),
      );
      return counts.reduce((a, b) => a + b, 0) / claims;
    };

    unless('boltzmann')(
      `boltzmann at T=1: the share of priority 1 is within 4 standard errors of e/(1+e) over ${samples.toLocaleString('en')} claims`,
      async () => {
        const p = Math.E / (1 + Math.E);
        expect(Math.abs((await share(1, samples)) - p)).toBeLessThan(within(p));
      },
      120_000,
    );

    unless('boltzmann')(
      `boltzmann at large T approaches uniform: the share is within 4 standard errors of 0.5 over ${samples.toLocaleString('en')} claims`,
      async () => {
        expect(Math.abs((await share(1000, samples)) - 0.5)).toBeLessThan(within(0.5));
      },
      120_000,
    );
  });
}
