/**
 * Many viewers on one job (`wrangler dev`): many SSE readers of one journal each get every frame
 * once, in order, and the plane's D1 reads per append do not grow with the readers (the queue
 * object's own rows_read, from the stats route). The readers use one stream token minted for all
 * their streams: a stream token has its own cap (docs/contract.md). 100 readers in `npm test`
 * (were each to read for itself, 100 would cost ten times the bound below); 1,000 with `npm run
 * fault` (FANOUT_READERS).
 */
import { describe, expect, inject, it } from 'vitest';
import { sseEvents } from '../../client/http/sse.ts';
import { encodeFrame, FrameKind } from '../../client/local/index.ts';
import { bytes, client } from './setup/client.ts';
import { until } from '../support/wait.ts';

interface Stats {
  read: number;
  written: number;
  streams: number;
}

/**
 * One EventSource-like reader: the seqs it got, in order, and whether it saw the end. A plane cuts
 * a reader that falls behind (its unread bytes past a bound: on a loaded machine, this process's
 * readers); like EventSource it then reconnects with Last-Event-ID, and must miss nothing.
 */
async function reader(url: string, seqs: number[], ac: AbortController, cuts: { n: number }): Promise<boolean> {
  for (let tries = 0; tries < 50; tries++) {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (seqs.length) headers['last-event-id'] = String(seqs[seqs.length - 1]);
    try {
      const res = await fetch(url, { headers, signal: ac.signal });
      if (res.status !== 200) throw new Error(`reader got ${res.status}: ${await res.text()}`);
      for await (const ev of sseEvents(res.body!, ac.signal)) {
        if (ev.event === 'frame') seqs.push(JSON.parse(ev.data).seq);
        else if (ev.event === 'end') return true;
        else if (ev.event === 'problem') throw new Error(ev.data);
      }
    } catch (e) {
      if (ac.signal.aborted || !(e instanceof TypeError)) throw e; // a TypeError is a cut connection
    }
    cuts.n++;
  }
  return false;
}

/** Runs `readers` SSE readers on one job while a worker appends `frames`; answers rows read per append. */
async function fanOut(readers: number, frames: number) {
  const d = client();
  const queue = 'fan';
  const id = `watched-${readers}`;
  await d.submit(queue, bytes('{}'), { id });
  const [job] = await d.claimMany(queue, 'w', 1, { leaseMs: 600_000 });
  expect(job!.id).toBe(id);
  const { url } = await d.streamToken(id, { streams: readers });
  const stats = async () =>
    (await (
      await fetch(`${d.baseUrl}/v1/ns/${d.namespace}/queues/${queue}/stats`, {
        headers: { authorization: `Bearer ${inject('planeToken')}` },
      })
    ).json()) as Stats;
  // A signal per reader: fetch raises a shared signal's listener cap to 1,500 by itself, and 1,000
  // readers put ~3,000 listeners on one.
  const acs = Array.from({ length: readers }, () => new AbortController());
  const got = Array.from({ length: readers }, () => [] as number[]);
  const cuts = { n: 0 };
  const ended = got.map((seqs, k) => reader(url, seqs, acs[k]!, cuts));
  // Every reader is parked on the journal before the first frame.
  const t0 = Date.now();
  await until(async () => (await stats()).streams >= readers, `${readers} readers parked`, 120_000);
  const t1 = Date.now();
  const before = await stats();
  for (let s = 0; s < frames; s++)
    await d.journalAppend(id, s, encodeFrame({ kind: FrameKind.VALUE, seq: s, body: bytes(`v${s}`), meta: null }), { workerId: 'w' });
  const after = await stats();
  console.log(
    `${readers} readers: parked in ${t1 - t0} ms, ${frames} appends in ${Date.now() - t1} ms, ${cuts.n} reader(s) cut and resumed`,
  );
  await d.ack(id, 'w', { result: bytes('done') });
  const ends = await Promise.all(ended);
  for (const ac of acs) ac.abort();
  await d.close();
  return { got, ends, readPerAppend: (after.read - before.read) / frames };
}

const READERS = Number(process.env.FANOUT_READERS ?? 100);

describe('many viewers on one job', () => {
  it(`${READERS.toLocaleString('en')} SSE readers each get all 500 frames in order, and D1 reads per append are what one reader costs`, async () => {
    const one = await fanOut(1, 500);
    const many = await fanOut(READERS, 500);
    const all = Array.from({ length: 500 }, (_, i) => i);
    expect(one.got[0]).toEqual(all);
    for (const [k, seqs] of many.got.entries()) expect(seqs, `reader ${k}`).toEqual(all);
    expect(many.ends.every(Boolean)).toBe(true);
    console.log(`D1 rows read per append: 1 reader ${one.readPerAppend.toFixed(2)}, ${READERS} readers ${many.readPerAppend.toFixed(2)}`);
    // Per append: the append's own reads and one shared read for every reader. Were each reader to
    // read for itself, N readers would cost at least N rows per append.
    expect(many.readPerAppend).toBeLessThan(one.readPerAppend * 2 + 10);
  }, 300_000);
});
