/**
 * A loopback TCP proxy in front of the plane that misbehaves on purpose:
 *   cutAfterFrame  - cut a reader's connection right after it forwarded a frame event
 *   dropResponses  - let requests reach the plane, then close the socket instead of answering
 * A drop is decided when an answer starts to come back, so it hits exactly the request in flight.
 */
import { connect, createServer, type AddressInfo, type Server } from 'node:net';

export interface Proxy {
  url: string;
  cuts: number;
  dropped: number;
  /** Drop the responses of the next `n` requests. */
  dropNext(n: number): void;
  close(): Promise<void>;
}

export async function startProxy(upstreamUrl: string, opts: { cutAfterFrame?: number } = {}): Promise<Proxy> {
  const up = new URL(upstreamUrl);
  let cutBudget = opts.cutAfterFrame ?? 0;
  let dropBudget = 0;
  const state = { cuts: 0, dropped: 0 };
  const server: Server = createServer((down) => {
    const upstream = connect(Number(up.port), up.hostname);
    down.pipe(upstream);
    let seen = '';
    upstream.on('data', (chunk: Buffer) => {
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
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
