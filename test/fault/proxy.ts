/**
 * A loopback TCP proxy in front of the plane that misbehaves on purpose:
 *   cutAfterFrame  - cut a reader's connection right after it forwarded a frame event
 *   cutEvery       - cut a connection after every N frame events, in the middle of the next one
 *   dropResponses  - let requests reach the plane, then close the socket instead of answering
 * A drop is decided when an answer starts to come back, so it hits exactly the request in flight.
 * It also keeps the request line of every request that went through (`requests`).
 */
import { connect, createServer, type AddressInfo, type Server } from 'node:net';

export interface Proxy {
  url: string;
  cuts: number;
  dropped: number;
  /** Drop the responses of the next `n` requests. */
  dropNext(n: number): void;
  /** Request lines (`GET /path HTTP/1.1`) in the order they came. */
  requests: string[];
  /** The status of every answer that came back, in order. */
  statuses: number[];
  close(): Promise<void>;
}

const REQUEST_LINE = /(?:^|\r\n)((?:GET|HEAD|POST|PUT|DELETE|OPTIONS) \S+ HTTP\/1\.[01])\r\n/g;

export async function startProxy(upstreamUrl: string, opts: { cutAfterFrame?: number; cutEvery?: number } = {}): Promise<Proxy> {
  const up = new URL(upstreamUrl);
  let cutBudget = opts.cutAfterFrame ?? 0;
  let dropBudget = 0;
  const state = { cuts: 0, dropped: 0 };
  const requests: string[] = [];
  const statuses: number[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const server: Server = createServer((down) => {
    const upstream = connect(Number(up.port), up.hostname);
    sockets.add(down);
    down.on('close', () => sockets.delete(down));
    down.on('data', (chunk: Buffer) => {
      for (const m of chunk.toString('latin1').matchAll(REQUEST_LINE)) requests.push(m[1]!);
    });
    down.pipe(upstream);
    let seen = '';
    let frames = 0;
    upstream.on('data', (chunk: Buffer) => {
      // An answer's head starts its chunk (bodies are streamed after it).
      const head = /^HTTP\/1\.[01] (\d{3}) /.exec(chunk.toString('latin1', 0, 16));
      if (head) statuses.push(Number(head[1]));
      if (opts.cutEvery) {
        const text = chunk.toString('latin1');
        const here = text.split('event: frame').length - 1;
        if (frames + here > opts.cutEvery) {
          // Forward up to the middle of the frame event past the count, then cut.
          let at = -1;
          for (let k = 0; k <= opts.cutEvery - frames; k++) at = text.indexOf('event: frame', at + 1);
          down.write(chunk.subarray(0, at + 20));
          state.cuts++;
          upstream.destroy();
          down.destroy();
          return;
        }
        frames += here;
      }
      // Decided per answer, not per connection: a kept-alive connection carries many requests.
      if (dropBudget > 0) {
        dropBudget--;
        // The plane answered, so it committed; the client never hears it.
        state.dropped++;
        upstream.destroy();
        down.destroy();
        return;
      }
      down.write(chunk);
      seen += chunk.toString('latin1');
      if (cutBudget > 0 && seen.includes('event: frame')) {
        cutBudget--;
        state.cuts++;
        upstream.destroy();
        down.destroy();
      }
    });
    upstream.on('end', () => down.end());
    upstream.on('error', () => down.destroy());
    down.on('error', () => upstream.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get cuts() {
      return state.cuts;
    },
    get dropped() {
      return state.dropped;
    },
    dropNext(n: number) {
      dropBudget += n;
    },
    requests,
    statuses,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
