/**
 * Conformance: answers that carry many large values come in parts, each part bounded in bytes
 * (docs/contract.md, "Limits"): a journal page holds about 1 MiB of frames and a wait on many jobs
 * about 8 MiB of results, at least one each, and the rest come at the next ask. Before, one page of
 * 256 KiB frames or one answer of forty 1 MB results was hundreds of MB in an isolate of 128, and
 * over the 32 MiB an RPC carries (a 500), and an SSE reader of such a journal was cut before it had
 * read a frame, every time it came back.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { type DispatchPlane, type Ended, FrameKind, type JournalFrame } from '../../client/local/index.ts';
import { work } from '../support/wait.ts';

const KIB = 1 << 10;
/** `n` bytes, each its index's low byte plus `salt`: a value cut, shifted or swapped shows. */
const filled = (n: number, salt: number) => Uint8Array.from({ length: n }, (_, i) => (i + salt) & 0xff);
const intact = (b: Uint8Array, n: number, salt: number) => b.length === n && b[0] === (salt & 0xff) && b[n - 1] === ((n - 1 + salt) & 0xff);

export function largeValues(plane: () => DispatchPlane) {
  describe('large values, answered in parts', () => {
    let d: DispatchPlane;
    beforeEach(() => {
      d = plane();
    });

    /** A job of queue `q` whose journal holds `n` frames of `size` bytes, ended with an ack. */
    async function bigJournal(id: string, n: number, size: number) {
      await d.submit('q', new Uint8Array([1]), { id });
      const c = (await d.claim('q', 'w'))!;
      for (let i = 0; i < n; i++)
        await d.journalAppend(
          c.id,
          i,
          { kind: FrameKind.VALUE, seq: i, body: filled(size, i), meta: null },
          { workerId: 'w', attempt: c.attempt },
        );
      await d.ack(c.id, 'w', { attempt: c.attempt, result: new Uint8Array([2]) });
    }

    it('a journal page holds about 1 MiB of frames (at least one): an ended job of large frames is read in pages, each frame once, the last page done', async () => {
      await bigJournal('pages', 10, 200 * KIB);
      const pages: { seqs: number[]; done: boolean }[] = [];
      const got: JournalFrame[] = [];
      for (let since = -1, i = 0; i < 20; i++) {
        const page = await d.journalPage('pages', { since });
        got.push(...page.frames);
        pages.push({ seqs: page.frames.map((f) => f.seq), done: page.done });
        if (page.done) {
          expect(page.outcome).toEqual({ state: 'succeeded', result: new Uint8Array([2]) });
          break;
        }
        expect(page.frames.length, 'a page that is not done has frames').toBeGreaterThan(0);
        since = page.next;
      }
      // 2 MB of frames: more than one page, though the job ended and 1,000 frames were allowed.
      expect(pages.length, JSON.stringify(pages)).toBeGreaterThan(1);
      expect(pages[0]!.done).toBe(false);
      expect(pages.at(-1)!.done).toBe(true);
      for (const p of pages.slice(0, -1)) expect(p.seqs.length * 200 * KIB).toBeLessThanOrEqual(2 * (1 << 20));
      expect(got.map((f) => f.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      for (const f of got) expect(intact(f.body, 200 * KIB, f.seq), `frame ${f.seq}`).toBe(true);
      // A frame larger than the page's bytes is still a page of its own.
      expect((await d.journalPage('pages', { since: 3, limit: 1 })).frames.map((f) => f.seq)).toEqual([4]);
      // Many smaller frames: a page ends at about 1 MiB of them.
      await bigJournal('medium', 200, 8000);
      const first = await d.journalPage('medium');
      expect(first.frames.length).toBeGreaterThan(1);
      expect(first.frames.length).toBeLessThan(200);
      expect(first.frames.length * 8000).toBeLessThanOrEqual((1 << 20) + 8000);
      expect(first.done).toBe(false);
      const rest = await d.journalPage('medium', { since: first.next });
      expect([...first.frames, ...rest.frames].map((f) => f.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i));
      expect(rest.done).toBe(true);
    });

    it('a reader of a journal of large frames reads every frame once, at its own pace', async () => {
      // 40 frames of 250 KiB (10 MB): over HTTP, an SSE stream the reader reads slowly.
      await bigJournal('stream', 40, 250 * KIB);
      const seqs: number[] = [];
      for await (const f of d.journalRead('stream', { timeoutMs: 30_000 })) {
        expect(intact(f.body, 250 * KIB, f.seq), `frame ${f.seq}`).toBe(true);
        seqs.push(f.seq);
        // A reader slower than the plane: its handler works on each frame.
        await work(10);
      }
      expect(seqs).toEqual(Array.from({ length: 40 }, (_, i) => i));
    }, 60_000);

    it('a listing and get many carry an error whole up to 8 KiB, else its type and the start of its message, marked truncated; get has it whole', async () => {
      const ids = Array.from({ length: 20 }, (_, i) => `f${String(i).padStart(2, '0')}`);
      for (const id of ids) await d.submit('q', new Uint8Array([1]), { id });
      const whole = (id: string) =>
        Number(id.slice(1)) % 2
          ? { type: 'MemoryError', message: `${id} `.padEnd(1000 * KIB - 1000, 'e'), stack: 'at f' }
          : { type: 'ValueError', message: `${id} small`, stack: 'at g' };
      for (let i = 0; i < ids.length; i++) {
        const c = (await d.claim('q', 'w'))!;
        await d.nack(c.id, 'w', { attempt: c.attempt, error: whole(c.id), retry: false });
      }
      // 10 MB of errors: one page, newest first, each large error cut.
      const page = await d.list('q', { state: 'failed', limit: 100 });
      expect(page.items.map((x) => x.id)).toEqual([...ids].reverse());
      expect(page.cursor).toBeNull();
      for (const x of page.items) {
        const w = whole(x.id);
        expect(x.error, x.id).toEqual(
          w.message.length > 1000 ? { type: 'MemoryError', message: `${w.message.slice(0, 499)}\u2026`, truncated: true } : w,
        );
      }
      // get many shows each as the listing does; get has the whole error.
      expect(await d.getMany([...ids].reverse())).toEqual(page.items);
      expect((await d.get('f01'))!.error).toEqual(whole('f01'));
    }, 60_000);

    it('a wait on many jobs answers about 8 MiB of results (at least one); the rest come at once when asked again', async () => {
      const ids = Array.from({ length: 12 }, (_, i) => `big${i}`);
      for (const id of ids) await d.submit('q', new Uint8Array([1]), { id });
      for (let i = 0; i < ids.length; i++) {
        const c = (await d.claim('q', 'w'))!;
        await d.ack(c.id, 'w', { attempt: c.attempt, result: filled(1000 * KIB - 1000, Number(c.id.slice(3))) });
      }
      const all: Ended[] = [];
      const answers: number[] = [];
      for (let left = ids; left.length && answers.length < 12; ) {
        const got = await d.results('q', left, { timeoutMs: 5_000 });
        expect(got.length, 'an answer while jobs have ended').toBeGreaterThan(0);
        answers.push(got.length);
        all.push(...got);
        const seen = new Set(got.map((e) => e.id));
        left = left.filter((id) => !seen.has(id));
      }
      // 12 MB of results: more than one answer, the first of several results.
      expect(answers.length, String(answers)).toBeGreaterThan(1);
      expect(answers[0]).toBeGreaterThan(1);
      expect(all.map((e) => e.id).sort()).toEqual([...ids].sort());
      for (const e of all) {
        expect(e.ok, e.id).toBe(true);
        if (e.ok) expect(intact(e.result!, 1000 * KIB - 1000, Number(e.id.slice(3))), e.id).toBe(true);
      }
    }, 60_000);
  });
}
