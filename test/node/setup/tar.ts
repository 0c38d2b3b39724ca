/** A tar writer for tests: entries of any kind, hostile ones included (absolute paths, `..`, links out, devices). */
export interface TarEntry {
  name: string;
  /** '0' file, '1' hard link, '2' symbolic link, '3' character device, '5' directory. */
  type?: '0' | '1' | '2' | '3' | '5';
  body?: string;
  linkname?: string;
}

export function tarOf(entries: TarEntry[]): Uint8Array {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '');
    const h = Buffer.alloc(512);
    const put = (at: number, len: number, v: string) => h.write(v.slice(0, len), at, 'utf8');
    const octal = (at: number, len: number, n: number) => put(at, len, `${n.toString(8).padStart(len - 1, '0')}\0`);
    put(0, 100, e.name);
    octal(100, 8, e.type === '5' ? 0o755 : 0o644);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, e.type && e.type !== '0' ? 0 : body.length);
    octal(136, 12, 1_700_000_000);
    h.write('        ', 148, 'ascii');
    put(156, 1, e.type ?? '0');
    put(157, 100, e.linkname ?? '');
    put(257, 6, 'ustar\0');
    put(263, 2, '00');
    let sum = 0;
    for (const b of h) sum += b;
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
    blocks.push(h);
    if (!e.type || e.type === '0') {
      blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
    }
  }
  blocks.push(Buffer.alloc(1024));
  return new Uint8Array(Buffer.concat(blocks));
}
