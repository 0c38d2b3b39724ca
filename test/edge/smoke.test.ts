import { describe, expect, it } from 'vitest';
import { plane } from './setup/http.ts';

describe('smoke', () => {
  it('submits, claims and acks over the routes', async () => {
    const p = plane();
    expect((await p.submit('q', 'a')).status).toBe(201);
    const c = await p.claim('q', 'w');
    expect(c.body.claimed[0].id).toBe('a');
    expect((await p.ack('a', 'w')).status).toBe(200);
    expect((await p.result('a')).body.state).toBe('succeeded');
  });
});
