/**
 * A wait on many jobs asked again with its last answer's cursor (core/ends.ts, results.ts): the
 * queue object, the single writer of its queue, reads again only the rows of the jobs that ended
 * since, and any cursor it cannot vouch for means a full look. The verb's rules on every plane are
 * the conformance suite's.
 */
import { describe, expect, it } from 'vitest';
import { runInDurableObject } from 'cloudflare:test';
import { b64, call, plane } from './setup/http.ts';
import { queueStub } from './setup/objects.ts';
import type { Engine } from '../../src/core/engine.ts';

describe('results, asked again after its cursor', () => {
  it('reads again only the jobs that ended since, and a cursor it cannot vouch for reads every one', async () => {
    const p = plane();
    const ids = Array.from({ length: 1000 }, (_, i) => `r${i}`);
    const items = ids.map((id) => ({ id, envelope: b64(id) }));
    expect((await call('POST', `/v1/ns/${p.ns}/queues/q/invocations/batch`, { items })).status).toBe(200);
    // The object's other work (an ack's follow-up) reads a few dozen rows of its own now and then:
    // a look after a cursor reads far fewer than its jobs, a full look at least one each.
    const few = 100;
    const stub = queueStub(p.ns, 'q');
    const wait = async (after: string | null, list = ids) => {
      const before = (await stub.stats()).read;
      const r = await call('POST', `/v1/ns/${p.ns}/queues/q/results`, { ids: list, timeout_ms: 0, after });
      expect(r.status).toBe(200);
      return {
        ...(r.body as { results: { id: string; state?: string }[]; cursor: string | null }),
        read: (await stub.stats()).read - before,
      };
    };
    const first = await wait(null);
    expect(first.results).toEqual([]);
    expect(first.cursor).toMatch(/^\w+\.\d+$/);
    expect(first.read).toBeGreaterThanOrEqual(ids.length); // every row, the first time

    const idle = await wait(first.cursor);
    expect(idle.results).toEqual([]);
    expect(idle.read).toBeLessThan(few); // none ended since: no job's row read

    // One ends after the cursor: it alone is read, and answered.
    await p.claim('q', 'w');
    await p.ack('r0', 'w', { result: b64('done') });
    const one = await wait(idle.cursor);
    expect(one.results).toEqual([{ id: 'r0', state: 'succeeded', result: b64('done') }]);
    expect(one.read).toBeLessThan(few);

    // A cursor it cannot vouch for: forged, of another instance, or from before the object forgot
    // what it knew (another writer): a full look, which still finds the end.
    for (const cursor of ['nope', 'abcdefgh.0', `${first.cursor!.split('.')[0]}.999999`]) {
      const full = await wait(cursor);
      expect(full.results.map((r) => r.id)).toEqual(['r0']);
      expect(full.read).toBeGreaterThanOrEqual(ids.length);
    }
    // Another writer changed the rows (what wakeAll stands for): the object forgets what it knew.
    await runInDurableObject(stub, (o) => (o as unknown as { engine: Engine }).engine.park.wakeAll());
    const cleared = await wait(first.cursor);
    expect(cleared.results.map((r) => r.id)).toEqual(['r0']);
    expect(cleared.read).toBeGreaterThanOrEqual(ids.length);
  });

  it('an answer cut at its bytes gives no cursor: the jobs it left out come at once when asked again', async () => {
    const p = plane();
    const ids = Array.from({ length: 12 }, (_, i) => `b${i}`);
    for (const id of ids) await p.submit('q', id);
    // 12 results of about 1 MB: more than one answer holds (RESULTS_BYTES, 8 MiB).
    for (const id of ids) {
      await p.claim('q', 'w');
      expect((await p.ack(id, 'w', { result: b64(id.padEnd(1_000_000, '.')) })).status).toBe(200);
    }
    const ask = async (list: string[], after: string | null) => {
      const r = await call('POST', `/v1/ns/${p.ns}/queues/q/results`, { ids: list, timeout_ms: 0, after });
      expect(r.status).toBe(200);
      return r.body as { results: { id: string; result: string }[]; cursor: string | null };
    };
    const first = await ask(ids, null);
    expect(first.results.length).toBeGreaterThan(0);
    expect(first.results.length).toBeLessThan(ids.length);
    // Jobs it left out ended before its mark: a cursor would let the next ask skip them.
    expect(first.cursor).toBeNull();
    const answered = new Set(first.results.map((r) => r.id));
    const rest = await ask(
      ids.filter((id) => !answered.has(id)),
      first.cursor,
    );
    expect(rest.results.map((r) => r.id).sort()).toEqual(ids.filter((id) => !answered.has(id)).sort());
    expect(rest.cursor).toMatch(/^\w+\.\d+$/);
  });

  it('refuses a cursor that is not a string, changing nothing', async () => {
    const p = plane();
    await p.submit('q', 'a');
    for (const after of [7, { c: 1 }, 'x'.repeat(101), '']) {
      const r = await call('POST', `/v1/ns/${p.ns}/queues/q/results`, { ids: ['a'], timeout_ms: 0, after });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body.error).sort()).toEqual(['code', 'message']);
    }
    expect((await p.get('a')).body.state).toBe('queued');
  });
});
