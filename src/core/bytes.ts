/**
 * Bytes <-> base64, the form opaque bytes take inside JSON bodies, and <-> hex. Uses the runtime's
 * own Uint8Array.fromBase64/toBase64/fromHex/toHex where it has them (workerd, browsers, Node 24+),
 * else `btoa`/`atob` and plain loops.
 */
interface NativeCodecs {
  fromBase64?: (s: string) => Uint8Array;
  fromHex?: (s: string) => Uint8Array;
}
const U8 = Uint8Array as unknown as NativeCodecs;
type Coding = Uint8Array & { toBase64?: () => string; toHex?: () => string };
const NATIVE_TO_B64 = typeof (Uint8Array.prototype as Coding).toBase64 === 'function';
const NATIVE_TO_HEX = typeof (Uint8Array.prototype as Coding).toHex === 'function';

const CHUNK = 0x8000;

export function toBase64(bytes: Uint8Array): string {
  if (NATIVE_TO_B64) return (bytes as Coding).toBase64!();
  let bin = '';
  for (let i = 0; i < bytes.length; i += CHUNK) {
    bin += String.fromCharCode.apply(null, bytes.subarray(i, i + CHUNK) as unknown as number[]);
  }
  return btoa(bin);
}

const B64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decodes standard base64 (padding optional). Returns null for anything that is not base64. */
export function fromBase64(s: string): Uint8Array | null {
  const clean = s.length % 4 === 0 ? s : s + '='.repeat(4 - (s.length % 4));
  // The pattern first: the native decoder would also take whitespace, and this one must not.
  if (!B64.test(clean) || s.length % 4 === 1) return null;
  if (U8.fromBase64) {
    try {
      return U8.fromBase64(clean);
    } catch {
      return null;
    }
  }
  let bin: string;
  try {
    bin = atob(clean);
  } catch {
    return null;
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
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
export function toHex(b: Uint8Array): string {
  if (NATIVE_TO_HEX) return (b as Coding).toHex!();
  let s = '';
  for (let i = 0; i < b.length; i++) s += HEX[b[i]!];
  return s;
}

/** '00'..'ff': every envelope a submit stores passes through toHex. */
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** A hex digit's value from its char code: '0'-'9', 'A'-'F', 'a'-'f'. */
const nibble = (c: number) => (c & 0xf) + (c >> 6) * 9;

/** Hex (as SQL `hex()` writes it) -> bytes. On a claim's hot path, so no substrings. */
export function fromHex(h: string): Uint8Array {
  if (U8.fromHex) return U8.fromHex(h);
  const out = new Uint8Array(h.length >> 1);
  for (let i = 0, j = 0; i < out.length; i++, j += 2) out[i] = (nibble(h.charCodeAt(j)) << 4) | nibble(h.charCodeAt(j + 1));
  return out;
}
