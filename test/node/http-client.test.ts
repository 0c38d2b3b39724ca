/**
 * What only the HTTP client adds to the contract. The verbs, errors, waits and the journal are the
 * conformance suite's (test/conformance, run against this plane too); a stream cut mid-frame is
 * test/fault/sse-cuts.test.ts, through the one cutting proxy (test/fault/proxy.ts).
 */
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { ForbiddenError, HttpDispatch, UnauthorizedError } from '../../client/index.ts';
import { bytes, client } from './setup/client.ts';

describe('HttpDispatch', () => {
  it('raises UnauthorizedError for a token the plane does not know, ForbiddenError for another namespace’s', async () => {
    const d = client();
    const anon = new HttpDispatch(inject('planeUrl'), { token: 'wrong', namespace: d.namespace });
    await expect(anon.count('q')).rejects.toBeInstanceOf(UnauthorizedError);
    const other = await d.createToken('producer');
    const elsewhere = new HttpDispatch(inject('planeUrl'), { token: other.token, namespace: `${d.namespace}x` });
    await expect(elsewhere.submit('q', bytes('x'), { id: 'a' })).rejects.toBeInstanceOf(ForbiddenError);
    expect(await d.count('q')).toBe(0);
  });
});
