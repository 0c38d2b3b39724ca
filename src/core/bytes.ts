/**
 * Bytes <-> base64, the form opaque bytes take inside JSON bodies, and <-> hex. One codec is
 * chosen once: the runtime's own Uint8Array.fromBase64/toBase64/fromHex/toHex where it has them
 * (workerd, browsers, Node 24+), else Node's Buffer, else `btoa`/`atob` and plain loops.
 */
interface Codec {
  toBase64(b: Uint8Array): string;
  /** Only ever given strict base64 with its padding (fromBase64 checks first). */
  fromBase64(s: string): Uint8Array;
  toHex(b: Uint8Array): string;
  fromHex(h: string): Uint8Array;
}

/** '00'..'ff'. */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
/** A hex digit's value from its char code: '0'-'9', 'A'-'F', 'a'-'f'. */
const nibble = (c: number) => (c & 0xf) + (c >> 6) * 9;
const CHUNK = 0x8000;

const plain: Codec = {
  toBase64(bytes) {
    let bin = '';
    for (let i = 0; i < bytes.length; i += CHUNK)
      bin += String.fromCharCode.apply(null, bytes.subarray(i, i + CHUNK) as unknown as number[]);
    return btoa(bin);
  },
  fromBase64(s) {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  },
  toHex(b) {
    let s = '';
    for (let i = 0; i < b.length; i++) s += HEX[b[i]!];
    return s;
  },
  // No substrings: on a claim's hot path where nothing faster exists.
  fromHex(h) {
    const out = new Uint8Array(h.length >> 1);
    for (let i = 0, j = 0; i < out.length; i++, j += 2) out[i] = (nibble(h.charCodeAt(j)) << 4) | nibble(h.charCodeAt(j + 1));
    return out;
  },
};

type NativeU8 = {
  fromBase64?(s: string): Uint8Array;
  fromHex?(h: string): Uint8Array;
  prototype: { toBase64?(): string; toHex?(): string };
};
const U8 = Uint8Array as unknown as NativeU8;
const native: Codec | null =
  U8.fromBase64 && U8.fromHex && U8.prototype.toBase64 && U8.prototype.toHex
    ? {
        toBase64: (b) => (b as unknown as { toBase64(): string }).toBase64(),
        fromBase64: (s) => U8.fromBase64!(s),
        toHex: (b) => (b as unknown as { toHex(): string }).toHex(),
        fromHex: (h) => U8.fromHex!(h),
      }
    : null;

type NodeBuffer = {
  from(b: ArrayBufferLike, offset: number, length: number): { toString(enc: 'base64' | 'hex'): string };
  from(s: string, enc: 'base64' | 'hex'): Uint8Array;
};
const NodeBuf = (globalThis as { Buffer?: NodeBuffer }).Buffer;
const view = (b: Uint8Array) => new Uint8Array(b.buffer, b.byteOffset, b.length);
const node: Codec | null = NodeBuf
  ? {
      toBase64: (b) => NodeBuf.from(b.buffer, b.byteOffset, b.length).toString('base64'),
      fromBase64: (s) => view(NodeBuf.from(s, 'base64')),
      toHex: (b) => NodeBuf.from(b.buffer, b.byteOffset, b.length).toString('hex'),
      fromHex: (h) => view(NodeBuf.from(h, 'hex')),
    }
  : null;

/** Every codec this runtime has, for tests; `codec` is the one in use. */
export const codecs = { native, node, plain };
const codec: Codec = native ?? node ?? plain;

export const toBase64 = (bytes: Uint8Array): string => codec.toBase64(bytes);

const B64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decodes standard base64 (padding optional). Returns null for anything that is not base64. */
export function fromBase64(s: string): Uint8Array | null {
  const clean = s.length % 4 === 0 ? s : s + '='.repeat(4 - (s.length % 4));
  // The pattern first: native decoders also take whitespace (and Buffer anything), this one must not.
  if (!B64.test(clean) || s.length % 4 === 1) return null;
  try {
    return codec.fromBase64(clean);
  } catch {
    return null;
  }
}

const enc = new TextEncoder();
const dec = new TextDecoder();
export const utf8 = (s: string): Uint8Array => enc.encode(s);
export const fromUtf8 = (b: Uint8Array): string => dec.decode(b);

const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The bytes as text when they are UTF-8 that turns back into exactly these bytes (no NUL, the
 * BOM kept), else null. Envelopes are stored as such text where they can be (sql/submit.ts).
 */
export function asText(b: Uint8Array): string | null {
  if (b.indexOf(0) !== -1) return null;
  try {
    return strict.decode(b);
  } catch {
    return null;
  }
}

/** Bytes -> lowercase hex, the form bytes take inside a JSON statement parameter (SQL `unhex`). */
export const toHex = (b: Uint8Array): string => codec.toHex(b);

/** Hex (as SQL `hex()` writes it, either case) -> bytes. */
export const fromHex = (h: string): Uint8Array => codec.fromHex(h);

/**
 * A body's first `limit` bytes at most, and whether that was all of it. Past `limit` the rest is
 * not read (the stream is cancelled), so a peer's answer of any size costs at most `limit` bytes:
 * `Response.arrayBuffer()` would hold all of it, and an isolate has 128 MB.
 */
export async function readUpTo(body: ReadableStream<Uint8Array> | null, limit: number): Promise<{ bytes: Uint8Array; whole: boolean }> {
  if (!body) return { bytes: new Uint8Array(0), whole: true };
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  let whole = true;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const room = limit - n;
    parts.push(value.length > room ? value.subarray(0, room) : value);
    n += Math.min(value.length, room);
    if (value.length > room) {
      whole = false;
      await reader.cancel().catch(() => {});
      break;
    }
  }
  const bytes = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.length;
  }
  return { bytes, whole };
}
