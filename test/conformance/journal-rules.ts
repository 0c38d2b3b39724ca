/**
 * Conformance: the journal's ordering rules and free-form values, the same on every plane.
 * - A new frame goes after every seq the journal ever held; a retry of a stored (seq, attempt) is
 *   absorbed; nothing follows a final frame of the same attempt (409).
 * - `trimmedBefore` is the highest seq a trim removed: `since < trimmedBefore` means lost frames.
 * - meta and error objects come back exactly as sent, own `__proto__` keys included, and nest at
 *   most 64 levels (deeper is a 400 that changes nothing).
 */
import { beforeEach, describe, expect, it } from 'vitest';
import {
  BadRequestError,
  FencingConflictError,
  FrameKind,
  type InvocationFailedError,
  TimeoutError,
  type DispatchPlane,
} from '../../client/local/index.ts';
import { work } from '../support/wait.ts';

const bytes = (s: string) => new TextEncoder().encode(s);
const frame = (kind: number, body = '', meta: Record<string, unknown> | null = null) => ({
  kind: kind as 0,
  seq: 0,
  body: bytes(body),
  meta,
});
/** A JSON object nested `depth` levels deep (the outermost counts as one). */
const nested = (depth: number): Record<string, unknown> => {
  let v: Record<string, unknown> = { leaf: true };
  for (let i = 1; i < depth; i++) v = { a: v };
  return v;
};
/** An object with an own `__proto__` key, as JSON.parse makes one. */
const withProto = () => JSON.parse('{"__proto__": {"p": 1}, "k": 1}') as Record<string, unknown>;

export function journalRules(plane: () => DispatchPlane) {
  describe('journal rules', () => {
    let d: DispatchPlane;
    beforeEach(async () => {
      d = plane();
      await d.submit('q', bytes('x'), { id: 'a' });
      await d.claim('q', 'w');
    });

    it('a read’s timeout bounds silence, not the stream: a stream that keeps writing outlives it, a silent one times out', async () => {
      const read = async (id: string, timeoutMs: number) => {
        const seqs: number[] = [];
        for await (const f of d.journalRead(id, { timeoutMs })) seqs.push(f.seq);
        return seqs;
      };
      // A live stream of 1.8 s, a frame every 300 ms, read with a 1 s timeout.
      const live = read('a', 1_000);
      for (let i = 0; i < 6; i++) {
        await work(300); // the producer's pace
        await d.journalAppend('a', i, frame(FrameKind.VALUE, `step ${i}`), { final: i === 5 });
      }
      expect(await live).toEqual([0, 1, 2, 3, 4, 5]);
      await d.submit('q', bytes('x'), { id: 'silent' });
      const t0 = Date.now();
      await expect(read('silent', 300)).rejects.toBeInstanceOf(TimeoutError);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    });

    it('refuses a seq behind the journal’s last one (a reader may be past it), and absorbs a retry of a stored one', async () => {
      await d.journalAppend('a', 10, frame(FrameKind.VALUE, 'ten'));
      await d.journalAppend('a', 11, frame(FrameKind.VALUE, 'eleven'));
      await expect(d.journalAppend('a', 5, frame(FrameKind.VALUE, 'late'))).rejects.toBeInstanceOf(FencingConflictError);
      await expect(d.journalAppend('a', 11, frame(FrameKind.VALUE, 'x'))).resolves.toBe(11); // a retry: absorbed
      expect(await d.journalAppend('a', null, frame(FrameKind.VALUE, 'next'))).toBe(12);
      expect((await d.journalPage('a')).frames.map((f) => f.seq)).toEqual([10, 11, 12]);
    });

    it('appends nothing after a final frame of the same attempt; the next attempt continues the journal', async () => {
      await d.journalAppend('a', 0, frame(FrameKind.VALUE, 'v'));
      await d.journalAppend('a', 1, frame(FrameKind.ERROR, 'boom'));
      await expect(d.journalAppend('a', 2, frame(FrameKind.VALUE, 'after'))).rejects.toBeInstanceOf(FencingConflictError);
      await expect(d.journalAppend('a', null, frame(FrameKind.VALUE, 'after'))).rejects.toBeInstanceOf(FencingConflictError);
      expect(await d.journalAppend('a', 1, frame(FrameKind.ERROR, 'boom'))).toBe(1); // retry of the final frame: absorbed
      expect(await d.journalPage('a')).toMatchObject({ done: true });
      await d.nack('a', 'w', { error: 'boom' });
      await d.claim('q', 'w');
      expect(await d.journalAppend('a', null, frame(FrameKind.BEGIN))).toBe(2);
      expect((await d.journalPage('a')).frames.map((f) => [f.seq, f.attempt])).toEqual([
        [0, 1],
        [1, 1],
        [2, 2],
      ]);
    });

    it('says what a trim removed: trimmedBefore is the highest seq it took, and a new frame goes after it', async () => {
      expect((await d.journalPage('a')).trimmedBefore).toBe(-1);
      for (let s = 0; s < 5; s++) await d.journalAppend('a', s, frame(FrameKind.CHUNK, `c${s}`));
      expect(await d.journalTrim('a', 4)).toBe(1);
      const page = await d.journalPage('a');
      expect(page.trimmedBefore).toBe(0);
      expect(page.frames.map((f) => f.seq)).toEqual([1, 2, 3, 4]);
      // A reader that saw seq 0 lost nothing (0 < 0 is false); one that saw nothing lost seq 0.
      expect(await d.journalTrim('a', 0)).toBe(4);
      expect((await d.journalPage('a')).trimmedBefore).toBe(4);
      await expect(d.journalAppend('a', 3, frame(FrameKind.CHUNK, 'old'))).rejects.toBeInstanceOf(FencingConflictError);
      expect(await d.journalAppend('a', null, frame(FrameKind.CHUNK, 'new'))).toBe(5);
    });

    it('keeps own __proto__ keys of meta and of an error object', async () => {
      await d.journalAppend('a', 0, frame(FrameKind.VALUE, 'v', withProto()));
      const [f] = (await d.journalPage('a')).frames;
      expect(Object.keys(f!.meta!)).toEqual(['__proto__', 'k']);
      expect(JSON.stringify(f!.meta)).toBe('{"__proto__":{"p":1},"k":1}');
      await d.nack('a', 'w', { error: { message: 'bad', ...{}, ...withProto() } as { message: string }, retry: false });
      const err = await d.result('a').catch((e: InvocationFailedError) => e.error);
      expect(JSON.stringify(err)).toBe('{"message":"bad","__proto__":{"p":1},"k":1}');
    });

    it('refuses meta and errors nested deeper than 64 levels with a 400, and changes nothing', async () => {
      await d.journalAppend('a', 0, frame(FrameKind.VALUE, 'v', nested(64)));
      await expect(d.journalAppend('a', 1, frame(FrameKind.VALUE, 'v', nested(65)))).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.journalAppend('a', 1, frame(FrameKind.VALUE, 'v', nested(500)))).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.nack('a', 'w', { error: { message: 'deep', x: nested(500) } })).rejects.toBeInstanceOf(BadRequestError);
      expect((await d.journalPage('a')).frames.map((f) => f.seq)).toEqual([0]);
      expect(await d.get('a')).toMatchObject({ state: 'running', error: null });
    });
  });
}
