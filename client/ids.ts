/** Random ids (UUID v4 form) on every runtime the client supports, Node 18 without the Web Crypto global included. */
export function randomId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  const hex = Array.from({ length: 32 }, () => Math.floor(Math.random() * 16).toString(16));
  hex[12] = '4';
  hex[16] = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Base 62 in ASCII order, so ids sort as their times do. */
const DIGITS = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * The id a submit without one gets (docs/contract.md, "Ids"): 20 characters, letters and digits.
 * The first 8 are the time in ms (base 62: good for 6,900 years), so a shard's id index takes new
 * ids at its end, in full pages, where random ids split pages all over it; the last 12 are random
 * (71 bits: two ids of one namespace in one millisecond collide once in 10^21). Python's
 * `queue.job_id` makes the same. A UUID costs 32 more bytes a job, on the row and in the index.
 */
export function jobId(now = Date.now()): string {
  let t = Math.floor(now);
  let head = '';
  for (let i = 0; i < 8; i++, t = Math.floor(t / 62)) head = DIGITS[t % 62] + head;
  const bytes = new Uint8Array(12);
  const c = (globalThis as { crypto?: { getRandomValues?: (b: Uint8Array) => Uint8Array } }).crypto;
  if (c?.getRandomValues) c.getRandomValues(bytes);
  else for (let i = 0; i < 12; i++) bytes[i] = Math.floor(Math.random() * 256);
  // 248 = 4 × 62: the bytes at or above it are drawn again, so every digit is equally likely.
  let tail = '';
  for (let i = 0; i < 12; i++) {
    let b = bytes[i]!;
    while (b >= 248) {
      const one = new Uint8Array(1);
      if (c?.getRandomValues) c.getRandomValues(one);
      else one[0] = Math.floor(Math.random() * 256);
      b = one[0]!;
    }
    tail += DIGITS[b % 62];
  }
  return head + tail;
}
