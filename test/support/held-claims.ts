import { expect } from 'vitest';
import type { DispatchPlane } from '../../client/local/index.ts';

const bytes = (s: string) => new TextEncoder().encode(s);

/**
 * A job nacked for a retry can be claimed again through the same client (another slot of a
 * worker's concurrency) before the nack's answer is read. The newer claim must stay this client's,
 * so a call that names no attempt (a journal append, an ack) still finds it. `between(run)` makes
 * the client run `run` after the nack reached the plane and before its answer is read.
 */
export async function checkANewerClaimOutlivesAnOlderAttemptsAnswer(
  d: DispatchPlane,
  between: (run: () => Promise<void>) => void,
): Promise<void> {
  await d.submit('again', bytes('x'), { id: 'twice' });
  expect((await d.claim('again', 'w'))!.attempt).toBe(1);
  let meanwhile: { id: string; attempt: number } | null = null;
  between(async () => {
    meanwhile = await d.claim('again', 'w');
  });
  expect(await d.nack('twice', 'w', { error: 'once more' })).toBe('queued');
  expect(meanwhile).toMatchObject({ id: 'twice', attempt: 2 });
  // No worker id, no attempt: the client's memory of its claim names them, the second attempt's.
  expect(await d.journalAppend('twice', null, { kind: 0, seq: 0, body: bytes('"v"'), meta: null })).toBe(0);
  await d.ack('twice', 'w', { result: bytes('done') });
  expect(await d.get('twice')).toMatchObject({ state: 'succeeded', attempt: 2 });
}
