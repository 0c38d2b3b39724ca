/**
 * Code archives (push_code, docs/code-mount.md): a producer's git tree as a tar, stored once per
 * namespace and stamp in R2 (binding CODE, key `<namespace>/<stamp>`). The stamp is the commit's
 * tree hash (40 or 64 lowercase hex digits). An upload names its SHA-256 in `Content-Digest`
 * (RFC 9530, `sha-256=:<base64>:`): the plane refuses a body whose digest is not the one named,
 * and keeps the digest with the object, so a worker checks what it fetched against it. A stamp
 * names one archive: the same one again is answered as stored (nothing written), another one is a
 * 409. At most CODE_MAX_BYTES (413 past it).
 *
 *   PUT  /v1/ns/:ns/code/:stamp   producer or admin   201 {stamp, sha256, bytes, created: true} (200 created: false)
 *   HEAD /v1/ns/:ns/code/:stamp   producer, worker    200 with Content-Length and Content-Digest, or 404
 *   GET  /v1/ns/:ns/code/:stamp   worker or admin     the archive (application/x-tar), with Content-Digest
 */
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { toBase64, fromBase64 } from '../../core/bytes.ts';
import { badRequest, LakeshoreError } from '../../core/errors.ts';
import { may } from '../auth.ts';
import type { App, Ctx } from '../plane.ts';

export const CODE_MAX_BYTES = 64 << 20;
const STAMP = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const DIGEST = /(?:^|,)\s*sha-256=:([A-Za-z0-9+/]+={0,2}):/;

function stampOf(c: Ctx): string {
  const s = c.req.param('stamp') ?? '';
  if (!STAMP.test(s)) throw badRequest(`stamp ${JSON.stringify(s.slice(0, 80))} is not a git tree hash (40 or 64 lowercase hex digits)`);
  return s;
}

const keyOf = (c: Ctx, stamp: string) => `${c.var.ns}/${stamp}`;
const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, '0')).join('');
const digestHeader = (sha256: string) => `sha-256=:${toBase64(new Uint8Array(sha256.match(/../g)!.map((h) => parseInt(h, 16))))}:`;
const missing = (stamp: string) =>
  new LakeshoreError('not_found', `no code archive ${stamp} in this namespace: push it first (pushCode / push_code)`);

const limit = bodyLimit({
  maxSize: CODE_MAX_BYTES,
  onError: () => {
    throw new LakeshoreError(
      'payload_too_large',
      `a code archive is at most ${CODE_MAX_BYTES} bytes; leave build output and data out of the git tree`,
    );
  },
});

export const code = new Hono<App>()
  .put('/:stamp', may('codePut'), limit, async (c) => {
    const stamp = stampOf(c);
    const named = DIGEST.exec(c.req.header('content-digest') ?? '')?.[1];
    const claimed = named ? fromBase64(named) : null;
    if (claimed?.length !== 32) throw badRequest("name the archive's SHA-256: Content-Digest: sha-256=:<base64 of the 32-byte digest>:");
    const body = await c.req.arrayBuffer();
    const sha256 = hex(await crypto.subtle.digest('SHA-256', body));
    if (sha256 !== [...claimed].map((x) => x.toString(16).padStart(2, '0')).join(''))
      throw badRequest(
        `the archive's SHA-256 is ${sha256}, not the one its Content-Digest names: it changed on the way, or the digest is wrong`,
      );
    const bucket = c.env.CODE as R2Bucket;
    const have = await bucket.head(keyOf(c, stamp));
    if (have) {
      if (have.customMetadata?.sha256 === sha256) return c.json({ stamp, sha256, bytes: have.size, created: false }, 200);
      throw new LakeshoreError(
        'conflict',
        `stamp ${stamp} already names another archive (SHA-256 ${have.customMetadata?.sha256}): a stamp is one git tree`,
      );
    }
    await bucket.put(keyOf(c, stamp), body, { sha256, customMetadata: { sha256 }, httpMetadata: { contentType: 'application/x-tar' } });
    return c.json({ stamp, sha256, bytes: body.byteLength, created: true }, 201);
  })
  // Hono answers HEAD with the GET route (without its body); a HEAD is authorized as codeHead:
  // a producer asks whether to push, a worker whether to fetch.
  .get(
    '/:stamp',
    (c, next) => (c.req.raw.method === 'HEAD' ? may('codeHead') : may('codeGet'))(c, next),
    async (c) => {
      const stamp = stampOf(c);
      const bucket = c.env.CODE as R2Bucket;
      if (c.req.raw.method === 'HEAD') {
        const have = await bucket.head(keyOf(c, stamp));
        if (!have) throw missing(stamp);
        return c.body(null, 200, { 'content-length': String(have.size), 'content-digest': digestHeader(have.customMetadata!.sha256!) });
      }
      const obj = await bucket.get(keyOf(c, stamp));
      if (!obj) throw missing(stamp);
      return c.body(obj.body, 200, {
        'content-type': 'application/x-tar',
        'content-length': String(obj.size),
        'content-digest': digestHeader(obj.customMetadata!.sha256!),
      });
    },
  );
