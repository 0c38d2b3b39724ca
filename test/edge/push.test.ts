/**
 * Push targets as a deployed plane checks them (wrangler.toml's PUSH_HOSTS = "public"): https://
 * to public hosts only, never loopback, private, link-local or credentials in the URL; only an
 * admin sets one; the secret is shown once. Delivery itself is test/node/push.test.ts (a receiver
 * needs a real socket on loopback, which a deployed plane refuses, as here).
 */
import { describe, expect, it } from 'vitest';
import { call, plane, unb64 } from './setup/http.ts';
import { verifyDelivery } from '../../client/push.ts';
import { dbOf } from './setup/objects.ts';

describe('push targets on a deployed plane', () => {
  it('refuses loopback, private and link-local hosts, and http://, with 400 and nothing stored', async () => {
    const p = plane();
    for (const url of [
      'http://127.0.0.1:8080/hook',
      'https://127.0.0.1/hook',
      'https://localhost/hook',
      'https://[::1]/hook',
      'https://10.0.0.7/hook',
      'https://172.16.3.4/hook',
      'https://192.168.1.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://100.64.0.1/hook',
      'https://[fd00::1]/hook',
      'https://[::ffff:7f00:1]/hook',
      'https://0.0.0.0/hook',
      'https://db.internal/hook',
      'http://example.com/hook',
      'https://user:pw@example.com/hook',
    ]) {
      const r = await p.configure('q', { push: { url } });
      expect(r.status, url).toBe(400);
      expect(r.body.error.code, url).toBe('bad_request');
      expect(r.body.error.message, url).toMatch(/push\.url/);
    }
    const row = await (await dbOf(p.ns)).prepare(`SELECT push_url, push_secret FROM queues WHERE ns = ?1`).bind(p.ns).first();
    expect(row?.push_url ?? null).toBeNull();
    expect(row?.push_secret ?? null).toBeNull();
  });

  it('takes a public https:// target, shows its secret once, and never again', async () => {
    const p = plane();
    const set = await p.configure('q', { push: { url: 'https://hooks.example.com/lakeshore', concurrency: 3 } });
    expect(set.status).toBe(200);
    expect(set.body.settings.push).toEqual({
      url: 'https://hooks.example.com/lakeshore',
      concurrency: 3,
      timeout_ms: 30_000,
      batch_size: 1,
      secret: expect.stringMatching(/^whsec_/),
    });
    const info = await call('GET', `/v1/ns/${p.ns}/queues/q`);
    expect(info.body.settings.push).toEqual({
      url: 'https://hooks.example.com/lakeshore',
      concurrency: 3,
      timeout_ms: 30_000,
      batch_size: 1,
    });
    expect(JSON.stringify(info.body)).not.toContain('whsec_');
    const overview = await call('GET', `/v1/ns/${p.ns}/queues`);
    expect(JSON.stringify(overview.body)).not.toContain('whsec_');
    expect((await p.configure('q', { push: null })).body.settings.push).toBeNull();
  });

  it('pushes to a Worker through a service binding named in PUSH_SERVICES, signed; names no other binding', async () => {
    const p = plane();
    for (const url of ['service://DB/hook', 'service://NOPE/hook', 'service://push_test_hooks/hook']) {
      const r = await p.configure('q', { push: { url } });
      expect(r.status, url).toBe(400);
      expect(r.body.error.message, url).toMatch(/PUSH_SERVICES: PUSH_TEST_HOOKS/);
    }
    const set = await p.configure('q', { push: { url: 'service://PUSH_TEST_HOOKS/jobs?team=a', concurrency: 2 } });
    expect(set.status).toBe(200);
    const secret = set.body.settings.push.secret as string;
    expect((await p.submit('q', 'via-binding')).status).toBe(201);
    // The bound Worker answers with what reached it, which is the job's result.
    const res = await p.result('via-binding', 10_000);
    expect(res.body.state).toBe('succeeded');
    const seen = JSON.parse(unb64(res.body.result)) as { url: string; method: string; headers: Record<string, string>; body: string };
    expect(seen.url).toBe('https://push_test_hooks/jobs?team=a'); // the binding's name as a host, lowercased as URLs do
    expect(seen.method).toBe('POST');
    expect(seen.headers['webhook-id']).toBe('via-binding.1');
    const delivery = await verifyDelivery(secret, seen.headers, seen.body);
    expect(delivery).toMatchObject({ id: 'via-binding', attempt: 1, queue: 'q' });
    expect(new TextDecoder().decode(delivery.envelope)).toBe('env-via-binding');
    expect((await p.configure('q', { push: null })).body.settings.push).toBeNull();
  });
});
