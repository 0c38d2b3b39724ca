/**
 * What only the HTTP client adds to the contract. The verbs, errors, waits and the journal are the
 * conformance suite's (test/conformance, run against this plane too); a stream cut mid-frame is
 * test/fault/sse-cuts.test.ts, through the one cutting proxy (test/fault/proxy.ts).
 */
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { ForbiddenError, HttpDispatch, InvocationFailedError, NotFoundError, UnauthorizedError } from '../../client/local/index.ts';
import { until } from '../support/wait.ts';
import { bytes, client } from './setup/client.ts';
import { checkANewerClaimOutlivesAnOlderAttemptsAnswer } from '../support/held-claims.ts';

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

describe('HttpDispatch views of a namespace', () => {
  it('lists queue names from the names route alone, and reads each page of the overview once', async () => {
    const paths: string[] = [];
    const d = client({
      fetch: async (input, init) => {
        const u = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
        paths.push(`${u.pathname.replace(/^\/v1\/ns\/[^/]+/, '')}${u.search}`);
        return fetch(input, init);
      },
    });
    const names = Array.from({ length: 101 }, (_, i) => `p${String(i).padStart(3, '0')}`);
    for (let i = 0; i < names.length; i += 20)
      await Promise.all(names.slice(i, i + 20).map((q) => d.submit(q, bytes('x'), { id: `j-${q}` })));
    paths.length = 0;
    expect(await d.listQueues()).toEqual(names);
    // No overview: no queue's object asked, no backlog counted.
    expect(paths).toEqual(['/queue-names']);
    paths.length = 0;
    expect((await d.overview()).map((q) => q.queue)).toEqual(names);
    expect(paths).toEqual(['/queues', '/queues?after=p099']);
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

describe('HttpDispatch shared result waits', () => {
  it('awaits 2,500 jobs over a few results requests, not a connection each, and each gets its own answer', async () => {
    const asked = { results: 0, result: 0 };
    const d = client({
      fetch: async (input, init) => {
        const url = String(input instanceof Request ? input.url : input);
        if (/\/queues\/[^/]+\/results$/.test(url)) asked.results++;
        else if (/\/invocations\/[^/]+\/result\?/.test(url)) asked.result++;
        return fetch(input, init);
      },
    });
    const worker = client({ namespace: d.namespace });
    const n = 2_500;
    const ids = (
      await d.submitMany(
        'fan',
        Array.from({ length: n }, (_, i) => ({ envelope: bytes('x'), opts: { id: `f${i}` } })),
      )
    ).map((r) => ('id' in r ? r.id : ''));
    const results = Promise.allSettled(ids.map((id) => d.result(id).then((b) => new TextDecoder().decode(b!))));
    await until(async () => asked.results >= 3, 'the first requests out');
    expect(asked).toEqual({ results: 3, result: 0 }); // 1,000 ids a request

    // A job failed ends its own wait with its own error; the rest with their results.
    const failing = d.result('f7').catch((e: unknown) => e);
    for (let left = n; left > 0; ) {
      const got = await worker.claimMany('fan', 'w', 1000);
      left -= got.length;
      const ok = got.filter((c) => c.id !== 'f7');
      await Promise.all(ok.map((c) => worker.ack(c.id, 'w', { attempt: c.attempt, result: bytes(`r${c.id}`) }))); // coalesced
      for (const c of got) if (c.id === 'f7') await worker.nack(c.id, 'w', { error: 'seven', retry: false });
    }
    const settled = await results;
    expect(settled.filter((s) => s.status === 'fulfilled').map((s) => s.value)).toEqual(
      ids.filter((id) => id !== 'f7').map((id) => `r${id}`),
    );
    expect(await failing).toBeInstanceOf(InvocationFailedError);
    expect(settled[7]).toMatchObject({ status: 'rejected', reason: expect.any(InvocationFailedError) });
    expect(asked.result).toBe(0);
    expect(asked.results).toBeLessThan(100);
  });

  it('awaits 2,500 jobs it did not submit: their queues looked up 1,000 a request, then waited on together', async () => {
    const asked = { get: 0, results: 0, result: 0 };
    const counted: typeof fetch = (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      if (url.endsWith('/invocations/get')) asked.get++;
      else if (/\/queues\/[^/]+\/results$/.test(url)) asked.results++;
      else if (/\/invocations\/[^/]+\/result\?/.test(url)) asked.result++;
      return fetch(input, init);
    };
    const producer = client();
    const n = 2_500;
    const items = Array.from({ length: n }, (_, i) => ({ envelope: bytes('x'), opts: { id: `o${i}` } }));
    await producer.submitMany('elsewhere', items);
    // Another process's client: it knows the ids, not their queue.
    const d = client({ namespace: producer.namespace, fetch: counted });
    const waits = Promise.all(items.map((it) => d.result(it.opts.id).then((b) => new TextDecoder().decode(b!))));
    const missing = d.result('no-such-job').catch((e: unknown) => e);
    await until(async () => asked.results >= 3, 'the shared waits out');
    expect(asked).toEqual({ get: 3, results: 3, result: 1 }); // the missing one waits alone, and is told so
    expect(await missing).toBeInstanceOf(NotFoundError);
    const worker = client({ namespace: producer.namespace });
    for (let left = n; left > 0; ) {
      const got = await worker.claimMany('elsewhere', 'w', 1000);
      left -= got.length;
      await Promise.all(got.map((c) => worker.ack(c.id, 'w', { attempt: c.attempt, result: bytes(`r${c.id}`) })));
    }
    expect(await waits).toEqual(items.map((it) => `r${it.opts.id}`));
    expect(asked.result).toBe(1);
    // One wait alone (a client that knows nothing of it) is one request, as before: no look-up first.
    const alone = { ...asked };
    const fresh = client({ namespace: producer.namespace, fetch: counted });
    expect(new TextDecoder().decode((await fresh.result('o1'))!)).toBe('ro1');
    expect(asked).toEqual({ ...alone, result: alone.result + 1 });
  });

  it('calls off a wait on many jobs whose client left, its waiters with it, not at its timeout', async () => {
    const d = client();
    const waiters = async () => {
      const r = await fetch(`${inject('planeUrl')}/v1/ns/${d.namespace}/queues/gone/stats`, {
        headers: { authorization: `Bearer ${inject('planeToken')}` },
      });
      return ((await r.json()) as { waiters: number }).waiters;
    };
    for (const id of ['g1', 'g2']) await d.submit('gone', bytes('x'), { id });
    const ctl = new AbortController();
    const waiting = d.results('gone', ['g1', 'g2'], { timeoutMs: 120_000, signal: ctl.signal }).catch((e: unknown) => e);
    await until(async () => (await waiters()) === 2, 'both jobs waited on');
    ctl.abort(new Error('merged into another'));
    expect(await waiting).toMatchObject({ message: 'merged into another' });
    await until(async () => (await waiters()) === 0, 'the wait called off on the plane');
    expect(await d.count('gone')).toBe(2);
  });

  it('says a shared wait timed out as a single one does, and leaves an aborted one at once', async () => {
    const d = client();
    await d.submit('slow', bytes('x'), { id: 's1' });
    await expect(d.result('s1', { timeoutMs: 100 })).rejects.toThrow(/invocation s1 is still queued after 100 ms/);
    const ctl = new AbortController();
    const waiting = d.result('s1', { signal: ctl.signal });
    ctl.abort(new Error('gave up'));
    await expect(waiting).rejects.toThrow('gave up');
  });
});

describe('HttpDispatch claims', () => {
  it('keeps a job’s newer claim when the answer of its older attempt’s nack comes back after it', async () => {
    // A worker's slots share one client: the nack's answer, read after the job's next claim, made
    // the client forget that claim, and the slot holding it could not write its first frame.
    let run: (() => Promise<void>) | null = null;
    const d = client({
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        const then = run;
        if (then && new URL(String(input)).pathname.endsWith('/nack')) {
          run = null;
          await then();
        }
        return res;
      },
    });
    await checkANewerClaimOutlivesAnOlderAttemptsAnswer(d, (r) => (run = r));
  });
});
