/** CHUNK frames of written text each decode alone: a frame's size limit never cuts a character (Node and Python writers). */
import { describe, expect, it } from 'vitest';
import { ChunkWriter, wholeChars } from '../../client/worker/chunks.ts';

const fatal = new TextDecoder('utf-8', { fatal: true });

describe('the CHUNK writer', () => {
  it('cuts a long write into frames of whole characters, every byte in order', async () => {
    const sent: Uint8Array[] = [];
    const w = new ChunkWriter(async (b) => void sent.push(b), { maxBytes: 8, windowMs: 0 });
    const text = 'aé€😀'.repeat(20); // 1, 2, 3 and 4 bytes a character
    w.write(text);
    await w.flush();
    expect(sent.length).toBeGreaterThan(10);
    for (const b of sent) expect(b.length).toBeLessThanOrEqual(8);
    expect(sent.map((b) => fatal.decode(b)).join('')).toBe(text); // each frame decodes alone
  });

  it('cuts bytes that are no UTF-8 at the limit', () => {
    expect(wholeChars(new Uint8Array(20).fill(0x80), 8)).toBe(8);
    expect(wholeChars(new TextEncoder().encode('abcdefg€'), 8)).toBe(7);
  });
});
