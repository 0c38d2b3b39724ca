/**
 * Code archives in R2 (src/worker/routes/code.ts), in workerd with Miniflare's R2: an upload is
 * checked against the SHA-256 it names, stored once per namespace and stamp, answered by HEAD and
 * fetched by workers with its digest; a stamp names one archive; namespaces do not see each other's.
 */
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { call, freshNs } from './setup/http.ts';
import { CODE_MAX_BYTES } from '../../src/worker/routes/code.ts';

const STAMP = 'a'.repeat(40);
const sha = async (b: Uint8Array) => new Uint8Array(await crypto.subtle.digest('SHA-256', b));
const b64 = (b: Uint8Array) => btoa(String.fromCharCode(...b));
const hex = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, '0')).join('');

async function send(method: string, ns: string, stamp: string, opts: { body?: Uint8Array; digest?: string | null; token?: string } = {}) {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.token ?? 'test-token'}` };
  if (opts.body && opts.digest !== null) headers['content-digest'] = opts.digest ?? `sha-256=:${b64(await sha(opts.body))}:`;
  return (exports as any).default.fetch(`http://plane/v1/ns/${ns}/code/${stamp}`, {
    method,
    headers,
    body: opts.body,
  }) as Promise<Response>;
}

const mint = async (ns: string, role: string) => (await call('POST', `/v1/ns/${ns}/tokens`, { role })).body.token as string;

describe('code archives', () => {
  it('stores an archive once per stamp, checked against its digest; HEAD says whether it is there; a worker fetches it with its digest', async () => {
    const ns = freshNs();
    const tar = new TextEncoder().encode('pretend this is a tar of one git tree');
    expect((await send('HEAD', ns, STAMP)).status).toBe(404);
    const first = await send('PUT', ns, STAMP, { body: tar });
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ stamp: STAMP, sha256: hex(await sha(tar)), bytes: tar.length, created: true });
    const again = await send('PUT', ns, STAMP, { body: tar });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { created: boolean }).created).toBe(false);
    const head = await send('HEAD', ns, STAMP);
    expect(head.status).toBe(200);
    expect(head.headers.get('content-digest')).toBe(`sha-256=:${b64(await sha(tar))}:`);
    const worker = await mint(ns, 'worker');
    const got = await send('GET', ns, STAMP, { token: worker });
    expect(got.status).toBe(200);
    expect(new Uint8Array(await got.arrayBuffer())).toEqual(tar);
    expect(got.headers.get('content-digest')).toBe(`sha-256=:${b64(await sha(tar))}:`);
    // Another namespace has no such archive.
    expect((await send('HEAD', freshNs(), STAMP)).status).toBe(404);
    expect((await send('GET', freshNs(), STAMP)).status).toBe(404);
  });

  it('lets producers and workers ask (HEAD), only workers fetch (GET), only producers push; nothing across namespaces', async () => {
    const ns = freshNs();
    const tar = new TextEncoder().encode('tree');
    expect((await send('PUT', ns, STAMP, { body: tar })).status).toBe(201);
    const [producer, worker, foreign] = [await mint(ns, 'producer'), await mint(ns, 'worker'), await mint(freshNs(), 'admin')];
    expect((await send('HEAD', ns, STAMP, { token: producer })).status).toBe(200);
    expect((await send('HEAD', ns, STAMP, { token: worker })).status).toBe(200);
    expect((await send('GET', ns, STAMP, { token: producer })).status).toBe(403);
    expect((await send('PUT', ns, 'd'.repeat(40), { body: tar, token: worker })).status).toBe(403);
    expect((await send('HEAD', ns, STAMP, { token: foreign })).status).toBe(403);
    expect((await send('GET', ns, STAMP, { token: foreign })).status).toBe(403);
    expect((await send('HEAD', ns, STAMP, { token: 'nope' })).status).toBe(401);
  });

  it('refuses a body whose digest is not the one named, no digest, a stamp that is no tree hash, another archive for a stamp, and too big a one', async () => {
    const ns = freshNs();
    const tar = new TextEncoder().encode('tree one');
    const other = new TextEncoder().encode('tree two');
    const wrong = await send('PUT', ns, STAMP, { body: tar, digest: `sha-256=:${b64(await sha(other))}:` });
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { error: { message: string } }).error.message).toContain('not the one its Content-Digest names');
    expect((await send('PUT', ns, STAMP, { body: tar, digest: null })).status).toBe(400);
    expect((await send('PUT', ns, 'not-a-tree', { body: tar })).status).toBe(400);
    expect((await send('HEAD', ns, STAMP)).status).toBe(404); // nothing stored by the refusals
    expect((await send('PUT', ns, STAMP, { body: tar })).status).toBe(201);
    const clash = await send('PUT', ns, STAMP, { body: other });
    expect(clash.status).toBe(409);
    const big = new Uint8Array(CODE_MAX_BYTES + 1);
    const tooBig = await send('PUT', ns, 'b'.repeat(64), { body: big });
    expect(tooBig.status).toBe(413);
    expect((await send('HEAD', ns, 'b'.repeat(64))).status).toBe(404);
  }, 60_000);
});
