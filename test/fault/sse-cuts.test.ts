/**
 * SSE reconnect under many cuts: a reader whose connection is cut after every frame resumes with
 * Last-Event-ID each time. Gaps and duplicates must both be 0. SSE_CUTS cuts (20 in CI, 200
 * with `npm run fault`).
 */
import { describe, expect, it } from 'vitest';
import { until } from '../support/wait.ts';
import { inject } from 'vitest';
import { FrameKind, HttpDispatch, type JournalFrame } from '../../client/local/index.ts';
import { client } from '../node/setup/client.ts';
import { startProxy } from './proxy.ts';

const CUTS = Number(process.env.SSE_CUTS ?? 20);

describe('fault: SSE reconnect', () => {
  it(`resumes through ${CUTS} cuts with 0 gaps and 0 duplicates`, async () => {
    const proxy = await startProxy(inject('planeUrl'), { cutAfterFrame: CUTS });
    try {
      const worker = client();
      const reader = new HttpDispatch(proxy.url, { token: inject('planeToken'), namespace: worker.namespace });
      await worker.submit('q', new Uint8Array([1]), { id: 'stream' });
      await worker.claim('q', 'w');
      const got: JournalFrame[] = [];
      const reading = (async () => {
        for await (const f of reader.journalRead('stream', { timeoutMs: 300_000 })) got.push(f);
      })();
      const total = CUTS + 10;
      for (let i = 0; i < total; i++) {
        await worker.journalAppend('stream', i, { kind: FrameKind.VALUE, seq: i, body: new TextEncoder().encode(String(i)), meta: null });
        // Let the reader see each frame (and be cut) before the next one lands.
        await until(() => got.length > i || proxy.cuts >= CUTS, `frame ${i} read`, 5_000).catch(() => {}); // a cut may delay it; the totals below tell
      }
      await worker.journalAppend('stream', total, { kind: FrameKind.END, seq: total, body: new Uint8Array(), meta: null });
      await reading;
      const seqs = got.map((f) => f.seq);
      const gaps = seqs.filter((s, i) => i > 0 && s !== seqs[i - 1]! + 1).length + (seqs[0] === 0 ? 0 : 1);
      const dups = seqs.length - new Set(seqs).size;
      console.log(`sse cuts: ${proxy.cuts}, frames: ${seqs.length}, gaps: ${gaps}, duplicates: ${dups}`);
      expect(proxy.cuts).toBe(CUTS);
      expect(gaps).toBe(0);
      expect(dups).toBe(0);
      expect(seqs).toEqual(Array.from({ length: total + 1 }, (_, i) => i));
    } finally {
      await proxy.close();
    }
  }, 600_000);
});
