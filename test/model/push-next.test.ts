/**
 * A nacked delivery's line says what became of its job (docs/contract.md, "Push delivery"): the
 * pusher passes on what its plane's nack answered, and the line (the feed's, `lakeshore push`'s)
 * tells when the job is delivered again, or that it failed. Run against a port that answers each
 * nack as the test says, and a receiver that is down.
 */
import { describe, expect, it } from 'vitest';
import type { Delivered } from '../../src/core/push.ts';
import type { Retried } from '../../src/core/push-port.ts';
import { deliveryLine } from '../../src/core/push-wire.ts';
import { deliverOnce as once, NOW } from '../support/pusher.ts';

const deliverOnce = async (retried: Retried, answer = async () => new Response('deploying', { status: 503 })): Promise<Delivered> =>
  (await once(answer, retried)).delivered;

describe("a nacked delivery's line", () => {
  it('tells when its job is delivered again, or that it failed', async () => {
    const later = await deliverOnce({ state: 'delayed', runAt: NOW + 10_000 });
    expect(later).toMatchObject({ outcome: 'nacked', status: 503, next: { state: 'delayed', inMs: 10_000 } });
    expect(deliveryLine(later).message).toBe(
      'push attempt 1: 503 in 0 ms, nacked: push target answered 503: deploying; delivered again in 10 s',
    );
    expect(deliveryLine(await deliverOnce({ state: 'delayed', runAt: NOW + 360_000 })).message).toMatch(/; delivered again in 6 min$/);
    expect(deliveryLine(await deliverOnce({ state: 'queued', runAt: null })).message).toMatch(/; delivered again at once$/);
    expect(deliveryLine(await deliverOnce({ state: 'failed', runAt: null })).message).toMatch(/: deploying; its job failed$/);
    // workerd's words for a refused connection end in a stop: the line goes on after it without one.
    const lost = await deliverOnce({ state: 'delayed', runAt: NOW + 10_000 }, async () => {
      throw new Error('Network connection lost.');
    });
    expect(deliveryLine(lost).message).toMatch(/: push target could not be reached: Network connection lost; delivered again in 10 s$/);
  });
});
