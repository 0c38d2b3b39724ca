/**
 * verifyDelivery and the body a receiver hands it. The signature covers the bytes the plane sent:
 * a body parsed by the receiver's framework (Express's `express.json()`, a Next.js or Vercel
 * function's `req.body`) is refused as a setup error saying how to get the one received, and one
 * written again from the parsed JSON is refused saying it was altered. The vector is the Standard
 * Webhooks reference library's (`new Webhook(SECRET).sign('j1.1', new Date(1796400000000), BODY)`),
 * as in client/python/tests/test_push.py.
 */
import { describe, expect, it } from 'vitest';
import { UnauthorizedError, verifyDelivery } from '../../client/receiver.ts';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const BODY =
  '{"type":"lakeshore.delivery","id":"j1","namespace":"default","queue":"q","attempt":1,"lease_until":1,' +
  '"priority":0,"envelope":"e30=","worker_id":"lakeshore-push","delivery_token":null}';
const HEADERS = {
  'Webhook-Id': 'j1.1',
  'webhook-timestamp': '1796400000',
  'webhook-signature': 'v1,m8kIpkAP31pSPgFjOxtcx4lmEvxiH4dsCSJL7+aI/Go=',
};
const now = 1796400010_000;

describe("verifyDelivery and the receiver's body", () => {
  it('reads the body as received: text, Buffer, Uint8Array or ArrayBuffer', async () => {
    const bytes = new TextEncoder().encode(BODY);
    for (const body of [BODY, Buffer.from(BODY), bytes, bytes.buffer]) {
      expect((await verifyDelivery(SECRET, HEADERS, body, { now })).id).toBe('j1');
    }
  });

  it('refuses a parsed body as a setup error that says how to get the one received', async () => {
    const parsed = JSON.parse(BODY) as unknown as string;
    await expect(verifyDelivery(SECRET, HEADERS, parsed, { now })).rejects.toThrow(
      /^the delivery's body must be its bytes or text as received .*, not a parsed object: .*express\.raw/,
    );
    await expect(verifyDelivery(SECRET, HEADERS, parsed, { now })).rejects.toBeInstanceOf(TypeError);
  });

  it('refuses a body written again from the parsed JSON as altered, saying to give it as received', async () => {
    const again = JSON.stringify(JSON.parse(BODY), null, 1);
    const e = await verifyDelivery(SECRET, HEADERS, again, { now }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(UnauthorizedError);
    expect((e as Error).message).toMatch(/altered \(a body parsed and written again is: give the body as received\)/);
  });
});
