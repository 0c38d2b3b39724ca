/**
 * The byte codecs' rules (src/core/bytes.ts), run in workerd (the runtime's own
 * Uint8Array.fromBase64/toHex...) and in Node 22 (Buffer), and each codec the runtime has
 * (the plain loops everywhere) through the same round trips.
 */
import { expect, it } from 'vitest';
import { asText, codecs, fromBase64, fromHex, toBase64, toHex } from '../../src/core/bytes.ts';

export function bytesCases(native: boolean) {
  it(`uses the ${native ? 'native' : 'Buffer'} codec here`, () => {
    expect(codecs.native !== null).toBe(native);
    if (!native) expect(codecs.node).not.toBeNull();
  });

  // Only the codecs this runtime has (which those are is the test above).
  for (const [name, c] of Object.entries(codecs).filter(([, c]) => c !== null)) {
    it(`the ${name} codec round-trips every byte value and length`, () => {
      for (const n of [0, 1, 2, 3, 255, 256, 70_000]) {
        const b = Uint8Array.from({ length: n }, (_, i) => (i * 7 + n) & 0xff);
        expect([...c!.fromBase64(c!.toBase64(b))]).toEqual([...b]);
        expect(c!.toHex(b)).toBe([...b].map((x) => x.toString(16).padStart(2, '0')).join(''));
        expect([...c!.fromHex(c!.toHex(b).toUpperCase())]).toEqual([...b]);
      }
    });
  }

  it('base64 and hex round-trip every byte value and length', () => {
    for (const n of [0, 1, 2, 3, 4, 255, 256, 1000, 70_000]) {
      const b = Uint8Array.from({ length: n }, (_, i) => (i * 7 + n) & 0xff);
      expect([...fromBase64(toBase64(b))!]).toEqual([...b]);
      expect([...fromHex(toHex(b))]).toEqual([...b]);
    }
    expect(toBase64(new Uint8Array([0xfb, 0xff]))).toBe('+/8=');
    expect(toHex(new Uint8Array([0, 0xab, 0xff]))).toBe('00abff');
    expect([...fromHex('00ABff')]).toEqual([0, 0xab, 0xff]); // SQL hex() writes upper case
  });

  it('base64: padding optional; anything else that is not standard base64 is refused', () => {
    expect([...fromBase64('QQ')!]).toEqual([0x41]);
    expect([...fromBase64('QQ==')!]).toEqual([0x41]);
    for (const bad of ['@@@', ' QQ==', 'QQ==\n', 'QUJD    ', 'QU\nJ\tDRA', 'Q', 'QQ=A', '-_8=', 'QQ==='])
      expect(fromBase64(bad), JSON.stringify(bad)).toBeNull();
  });

  it('asText: only UTF-8 that turns back into the same bytes, without NUL', () => {
    expect(asText(new TextEncoder().encode('{"a":"é日"}'))).toBe('{"a":"é日"}');
    expect(asText(new Uint8Array([0xef, 0xbb, 0xbf, 0x41]))).toBe('\ufeffA');
    for (const bad of [[0x41, 0x00], [0xff], [0xed, 0xa0, 0x80], [0xe6, 0x97]]) expect(asText(new Uint8Array(bad)), String(bad)).toBeNull();
  });
}
