/** Conformance: a worker's acks sent with its next claim (ackAndClaim), the same on every plane. */
import { beforeEach, describe, expect, it } from 'vitest';
import { BadRequestError, FencingConflictError, NotFoundError, type DispatchPlane } from '../../client/local/index.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));

/** `plane()` answers the plane of the running test (made fresh by the suite for each test). */
export function ackAndClaim(plane: () => DispatchPlane) {
  describe('ackAndClaim', () => {
    let d: DispatchPlane;
    beforeEach(() => {
      d = plane();
    });

    it('acks each item fenced alone and claims, in one call', async () => {
      for (const id of ['a', 'b', 'c']) await d.submit('q', bytes(id), { id });
      const [a, b] = await d.claimMany('q', 'w', 2);
      const out = await d.ackAndClaim(
        'q',
        'w',
        [
          { id: a!.id, attempt: a!.attempt, result: bytes('ra') },
          { id: b!.id, attempt: b!.attempt + 1, result: bytes('stale') },
        ],
        5,
      );
      expect(out.acks[0]).toBeNull();
      expect(out.acks[1]).toBeInstanceOf(FencingConflictError);
      expect(out.claimed.map((c) => c.id)).toEqual(['c']);
      expect(text(await d.result('a'))).toBe('ra');
      expect((await d.get('b'))!.state).toBe('running');
      expect((await d.get('c'))!.state).toBe('running');
    });

    it('an ack repeated with the claim after it landed is absorbed', async () => {
      await d.submit('q', bytes('x'), { id: 'x' });
      const c = (await d.claim('q', 'w'))!;
      await d.ack(c.id, 'w', { attempt: c.attempt, result: bytes('r') });
      const out = await d.ackAndClaim('q', 'w', [{ id: c.id, attempt: c.attempt, result: bytes('r') }], 1);
      expect(out).toEqual({ acks: [null], claimed: [] });
      expect(text(await d.result('x'))).toBe('r');
    });

    it('an ack of an invocation in another queue fails alone; it stays running', async () => {
      await d.submit('other', bytes('o'), { id: 'o' });
      await d.submit('q', bytes('n'), { id: 'n' });
      const o = (await d.claim('other', 'w'))!;
      const out = await d.ackAndClaim('q', 'w', [{ id: o.id, attempt: o.attempt }], 1);
      expect(out.acks[0]).toBeInstanceOf(NotFoundError);
      expect(out.claimed.map((c) => c.id)).toEqual(['n']);
      expect((await d.get('o'))!.state).toBe('running');
    });

    it('bad claim arguments refuse the whole call before any ack lands', async () => {
      await d.submit('q', bytes('x'), { id: 'x' });
      const c = (await d.claim('q', 'w'))!;
      await expect(d.ackAndClaim('q', 'w', [{ id: c.id, attempt: c.attempt }], 0)).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.ackAndClaim('q', 'w', [{ id: c.id, attempt: c.attempt }], 1, { leaseMs: -1 })).rejects.toBeInstanceOf(BadRequestError);
      expect((await d.get('x'))!.state).toBe('running');
    });

    it('a claim that carries acks does not hold their answers for its whole wait', async () => {
      await d.submit('q', bytes('x'), { id: 'x' });
      const c = (await d.claim('q', 'w'))!;
      const t0 = Date.now();
      const out = await d.ackAndClaim('q', 'w', [{ id: c.id, attempt: c.attempt }], 1, { waitMs: 10_000 });
      // It asked to wait 10 s on an empty queue; with acks aboard it waits at most 25 ms.
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(out).toEqual({ acks: [null], claimed: [] });
      expect((await d.get('x'))!.state).toBe('succeeded');
    });
  });
}
