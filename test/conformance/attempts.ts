/**
 * Conformance: one attempt budget (the queue's max_attempts, else the plane's default) governs
 * nacks and lease expiry alike; a job whose last attempt fails ends failed with
 * error.type = "AttemptsExhausted", its last error kept as `last`.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { BadRequestError, InvocationFailedError, type DispatchPlane } from '../../client/local/index.ts';

const bytes = (s: string) => new TextEncoder().encode(s);

export function attempts(plane: () => DispatchPlane, lacks: ReadonlySet<string> = new Set()) {
  describe('attempt budget', () => {
    let d: DispatchPlane;
    beforeEach(() => {
      d = plane();
    });

    it.skipIf(lacks.has('configure'))(
      'a nack with retry on the last attempt fails the job: AttemptsExhausted, with the last error',
      async () => {
        await d.configureQueue('q', { maxAttempts: 1 });
        await d.submit('q', bytes('x'), { id: 'one' });
        await d.claim('q', 'w');
        await d.nack('one', 'w', { error: { message: 'flaky', type: 'IOError' }, retry: true });
        expect(await d.claim('q', 'w')).toBeNull();
        const e = await d.result('one').catch((x: InvocationFailedError) => x);
        expect(e).toBeInstanceOf(InvocationFailedError);
        expect((e as InvocationFailedError).error).toEqual({
          type: 'AttemptsExhausted',
          message: 'flaky (attempt 1 of 1, none left)',
          attempts: 1,
          last: { message: 'flaky', type: 'IOError' },
        });
        await d.nack('one', 'w', { error: { message: 'flaky', type: 'IOError' }, retry: true }); // a repeat is absorbed
      },
    );

    it('a worker gives back jobs it never started: queued again, not charged; one no longer its own stays as it is', async () => {
      await d.submit('q', bytes('x'), { id: 'kept' });
      await d.submit('q', bytes('x'), { id: 'back' });
      expect((await d.claimMany('q', 'w', 2)).map((c) => c.id)).toEqual(['kept', 'back']);
      // Its attempt from the client's own claims (or, where another process claimed it, none: any of the worker's).
      expect(await d.release('q', 'w', [{ id: 'back' }])).toEqual(['back']);
      expect(await d.get('back')).toMatchObject({ state: 'queued', attempt: 1 });
      // Not charged: the next claim is the first of its budget (a nack would have made it the 2nd).
      expect(await d.claim('q', 'w2')).toMatchObject({ id: 'back', attempt: 2, budgetAttempt: 1 });
      // Another worker's now, an attempt gone by, a finished job: none goes back.
      await d.ack('kept', 'w');
      expect(
        await d.release('q', 'w', [
          { id: 'back', attempt: 1 },
          { id: 'kept', attempt: 1 },
        ]),
      ).toEqual([]);
      expect(await d.release('q', 'w2', [{ id: 'back', attempt: 1 }])).toEqual([]);
      // Bad input is refused whole, before anything moves.
      await expect(
        d.release('q', 'w2', [
          { id: 'back', attempt: 2 },
          { id: 'back', attempt: -1 },
        ]),
      ).rejects.toBeInstanceOf(BadRequestError);
      await expect(d.release('q', 'w2', [{ id: '', attempt: 2 }])).rejects.toBeInstanceOf(BadRequestError);
      expect(await d.get('back')).toMatchObject({ state: 'running', attempt: 2 });
      expect(await d.get('kept')).toMatchObject({ state: 'succeeded' });
    });

    it('nacks with retry requeue while attempts are left, on the plane default of 3', async () => {
      await d.submit('q', bytes('x'), { id: 'three' });
      for (let attempt = 1; attempt <= 3; attempt++) {
        // budgetAttempt: which of its budget the attempt is (what a worker's retries count against).
        expect(await d.claim('q', 'w')).toMatchObject({ attempt, budgetAttempt: attempt });
        await d.nack('three', 'w', { error: `try ${attempt}` });
      }
      expect(await d.get('three')).toMatchObject({
        state: 'failed',
        attempt: 3,
        // Integers, whatever the plane stores the default as ("3 of 3.0" was D1's REAL).
        error: { type: 'AttemptsExhausted', message: 'try 3 (attempt 3 of 3, none left)', attempts: 3, last: { message: 'try 3' } },
      });
      // Retried: a fresh budget, and the message says which of it the attempt was.
      await d.retry('three');
      for (let attempt = 4; attempt <= 6; attempt++) {
        expect(await d.claim('q', 'w')).toMatchObject({ attempt, budgetAttempt: attempt - 3 });
        await d.nack('three', 'w', { error: `try ${attempt}` });
      }
      expect((await d.get('three'))!.error).toMatchObject({
        message: 'try 6 (attempt 6, the 3rd of 3 since its retry, none left)',
        attempts: 3,
      });
    });
  });
}
