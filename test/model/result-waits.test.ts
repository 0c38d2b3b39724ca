/**
 * How the HTTP client shares result waits (client/http/result-waits.ts): which requests go out,
 * which are called off and merged, and who is handed back to the single wait. The plane is a
 * recorder here; test/node/http-client.test.ts runs the same against the real one.
 */
import { describe, expect, it } from 'vitest';
import { type Item, MAX_IDS, MAX_REQUESTS, ResultWaits } from '../../client/http/result-waits.ts';

interface Asked {
  queue: string;
  ids: string[];
  signal: AbortSignal;
  cursor: string | null;
  answer: (items: Record<string, unknown>[]) => void;
  fail: (e: Error) => void;
}

function plane() {
  const asked: Asked[] = [];
  const waits = new ResultWaits(
    (queue, ids, signal, cursor) =>
      new Promise((answer, fail) => {
        const n = asked.length;
        asked.push({ queue, ids, signal, cursor, answer: (items) => answer({ items: items as Item[], cursor: `c${n}` }), fail });
        signal.addEventListener('abort', () => fail(new Error('called off')), { once: true });
      }),
  );
  const outcomes = new Map<string, string>();
  const wait = (queue: string, id: string) =>
    new Promise<string>((resolve) => {
      waits.add(
        queue,
        id,
        (item) => resolve(`${item.state}:${String(item.result ?? '')}`),
        () => resolve('alone'),
      );
    }).then((o) => {
      outcomes.set(id, o);
      return o;
    });
  const tick = () => new Promise((r) => setImmediate(r));
  const open = () => asked.filter((a) => !a.signal.aborted);
  return { waits, asked, wait, tick, open, outcomes };
}

describe('shared result waits', () => {
  it('sends the waits of one tick together, at most MAX_IDS a request, and settles each by its own answer', async () => {
    const p = plane();
    for (let i = 0; i < 2_500; i++) void p.wait('q', `j${i}`);
    await p.tick();
    expect(p.asked.map((a) => a.ids.length)).toEqual([MAX_IDS, MAX_IDS, 500]);
    // An answer settles its ended jobs; the rest are asked again, alone in the next request.
    p.asked[0]!.answer([
      { id: 'j0', state: 'succeeded', result: 'a' },
      { id: 'j1', state: 'failed' },
    ]);
    await p.tick();
    expect(p.outcomes.get('j0')).toBe('succeeded:a');
    expect(p.outcomes.get('j1')).toBe('failed:');
    expect(p.asked[3]!.ids).toHaveLength(MAX_IDS - 2);
    expect(p.asked[3]!.ids).not.toContain('j0');
    // Asked again after the answer's cursor; after a round with no end, without one (a full look).
    expect(p.asked.slice(0, 4).map((a) => a.cursor)).toEqual([null, null, null, 'c0']);
    p.asked[1]!.answer([]);
    await p.tick();
    expect(p.asked[4]!).toMatchObject({ cursor: null });
    expect(p.asked[4]!.ids).toHaveLength(MAX_IDS);
    // A job its queue does not have (no state), and a request refused: handed back to the single wait.
    p.asked[3]!.answer([{ id: 'j2', error: { code: 'not_found', message: 'not in queue q' } }]);
    p.asked[2]!.fail(new Error('unreachable'));
    await p.tick();
    expect(p.outcomes.get('j2')).toBe('alone');
    expect(p.outcomes.get('j2400')).toBe('alone');
    expect(p.waits.size.jobs).toBe(2_500 - 3 - 500);
  });

  it(`keeps at most ${MAX_REQUESTS} requests of a queue out: the smallest is called off and joins the next`, async () => {
    const p = plane();
    for (let i = 0; i < MAX_REQUESTS + 2; i++) {
      void p.wait('q', `t${i}`);
      await p.tick();
      expect(p.open().length).toBeLessThanOrEqual(MAX_REQUESTS);
    }
    expect(p.open()).toHaveLength(MAX_REQUESTS);
    const waited = p
      .open()
      .flatMap((a) => a.ids)
      .sort();
    expect(waited).toEqual(Array.from({ length: MAX_REQUESTS + 2 }, (_, i) => `t${i}`).sort());
    // Another queue's waits go out on their own.
    void p.wait('other', 'o1');
    await p.tick();
    expect(
      p
        .open()
        .filter((a) => a.queue === 'other')
        .map((a) => a.ids),
    ).toEqual([['o1']]);
  });

  it('calls a request off once nobody awaits any of its jobs, and two waits of one job share it', async () => {
    const p = plane();
    const drops: (() => void)[] = [];
    let answers = 0;
    for (const id of ['a', 'a', 'b'])
      drops.push(
        p.waits.add(
          'q',
          id,
          () => answers++,
          () => {},
        ),
      );
    await p.tick();
    expect(p.asked.map((a) => a.ids)).toEqual([['a', 'b']]);
    drops[0]!();
    drops[2]!();
    expect(p.asked[0]!.signal.aborted).toBe(false); // the second wait of a still awaits it
    p.asked[0]!.answer([{ id: 'a', state: 'succeeded' }]);
    await p.tick();
    expect(answers).toBe(1);
    drops[1]!();
    void p.wait('q', 'c');
    await p.tick();
    const last = p.asked.at(-1)!;
    expect(last.ids).toEqual(['c']);
    p.waits.add(
      'q',
      'c',
      () => {},
      () => {},
    )();
    expect(last.signal.aborted).toBe(false);
    const dropD = p.waits.add(
      'q',
      'd',
      () => {},
      () => {},
    );
    await p.tick();
    const forD = p.asked.at(-1)!;
    expect(forD.ids).toEqual(['d']);
    dropD();
    expect(forD.signal.aborted).toBe(true);
    expect(p.waits.size).toEqual({ jobs: 1, requests: 1 }); // c's
  });
});
