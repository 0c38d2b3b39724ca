/**
 * What only the HTTP client adds to the contract. The verbs, errors, waits and the journal are the
 * conformance suite's (test/conformance, run against this plane too); a stream cut mid-frame is
 * test/fault/sse-cuts.test.ts, through the one cutting proxy (test/fault/proxy.ts).
 */
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { ForbiddenError, HttpDispatch, UnauthorizedError } from '../../client/local/index.ts';
import { bytes, client } from './setup/client.ts';

describe('HttpDispatch', () => {
  it('raises UnauthorizedError for a token the plane does not know, ForbiddenError for another namespace’s', async () => {
    const d = client();
    const anon = new HttpDispatch(inject('planeUrl'), { token: 'wrong', namespace: d.namespace });
    await expect(anon.count('q')).rejects.toBeInstanceOf(UnauthorizedError);
    const other = await d.createToken('producer');
    const elsewhere = new HttpDispatch(inject('planeUrl'), { token: other.token, namespace: `${d.namespace}x` });
    await expect(elsewhere.submit('q', bytes('x'), { id: 'a' })).rejects.toBeInstanceOf(ForbiddenError);
    expect(await d.count('q')).toBe(0);
  });
});

describe('HttpDispatch bookmarks', () => {
  it("sends back the newest bookmark the plane answered, so its reads see its own writes on a replica (docs/contract.md, 'Reads and replicas')", async () => {
    // The real plane, its answers watched on their way (the client's own fetch, passed through).
    const sent: (string | null)[] = [];
    const answered: (string | null)[] = [];
    const d = client({
      fetch: async (input, init) => {
        sent.push(new Headers(init?.headers).get('x-lakeshore-bookmark'));
        const res = await fetch(input, init);
        answered.push(res.headers.get('x-lakeshore-bookmark'));
        return res;
      },
    });
    await d.submit('q', bytes('x'), { id: 'a' });
    const afterSubmit = answered.at(-1)!;
    expect(afterSubmit).toMatch(/^DB(_\d+)?:[0-9A-Za-z-]+$/);
    expect(sent[0]).toBeNull(); // nothing to carry before the first answer
    const c = await d.claim('q', 'w');
    await d.ack(c!.id, 'w', { attempt: c!.attempt, result: bytes('done') });
    const afterAck = answered.at(-1)!;
    expect(afterAck > afterSubmit).toBe(true);
    sent.length = 0;
    expect((await d.get('a'))!.state).toBe('succeeded');
    expect(sent).toEqual([afterAck]);
  });
});

describe('HttpDispatch batches', () => {
  it('sends a batch larger than one request allows (36 envelopes of 1 MiB: 48 MiB as base64) in parts, each item answered; a claim stops at 16 MiB', async () => {
    const d = client();
    const mib = new Uint8Array(1 << 20).fill(7);
    const items = Array.from({ length: 36 }, (_, i) => ({ envelope: mib, opts: { id: `big${i}` } }));
    const out = await d.submitMany('q', items);
    expect(out).toEqual(items.map((it) => ({ id: it.opts.id })));
    expect(await d.count('q')).toBe(36);
    // One claim hands out at most 16 MiB of envelopes (what it answers crosses RPC, capped at 32 MiB).
    const claimed = await d.claimMany('q', 'w', 36);
    expect(claimed).toHaveLength(16);
    while (claimed.length < 36) claimed.push(...(await d.claimMany('q', 'w', 36 - claimed.length)));
    // Their acks, each with a 1 MiB result, in one call: in parts as well.
    const acks = await d.ackAndClaim(
      'q',
      'w',
      claimed.map((c) => ({ id: c.id, attempt: c.attempt, result: mib })),
      1,
    );
    expect(acks.acks).toEqual(claimed.map(() => null));
    expect(await d.count('q', 'succeeded')).toBe(36);
  }, 120_000);
});
