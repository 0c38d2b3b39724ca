/**
 * How the transport makes one HTTP request: the status, a header, and the body piece by piece (a
 * claim that waited streams its answer, see transport.ts).
 *
 * In Node (and Bun, Deno) it is node:http(s) with a keep-alive pool of its own; anywhere else, and
 * whenever the caller gives its own `fetch`, it is fetch. Measured on this project's machine
 * against the plane's own workerd: a small JSON POST costs ~70 µs of the client's CPU through
 * node:http and ~240 µs through Node's fetch (undici's WHATWG layer: Request, Headers, the body's
 * ReadableStream), and ~140 µs more of wall time; the edge bench's single submits went ~20 %
 * faster with it (bench/README.md).
 */
import { nodeBuiltin } from '../node-builtin.ts';

/** A request's answer as the transport reads it. */
export interface Answer {
  status: number;
  header(name: string): string | null;
  /** The body's next piece, or null at its end. Rejects if the connection breaks first. */
  read(): Promise<Uint8Array | null>;
  /** Stops reading: the rest of the body is not wanted (its connection is not reused). */
  cancel(): void;
}

export interface Requester {
  /**
   * One request. Rejects with `signal.reason` once aborted (before the answer or while its body is
   * read), and with a TypeError whose `cause` is the system error when the plane cannot be
   * reached or the connection breaks, as fetch does.
   */
  send(method: string, url: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal): Promise<Answer>;
  /** Closes the pool's idle connections (node:http; calls in flight finish); nothing for fetch. */
  close(): void;
}

export function fetchRequester(fetchImpl: typeof fetch): Requester {
  return {
    async send(method, url, headers, body, signal) {
      const res = await fetchImpl(url, { method, headers, body, signal });
      const reader = res.body?.getReader();
      return {
        status: res.status,
        header: (name) => res.headers.get(name),
        read: async () => {
          if (!reader) return null;
          const { done, value } = await reader.read();
          return done ? null : value;
        },
        cancel: () => void reader?.cancel().catch(() => {}),
      };
    },
    close() {},
  };
}

type NodeHttp = typeof import('node:http');

/** Node, Bun and Deno have node:http; a Worker (workerd) and a browser use fetch. */
function hasNodeHttp(): boolean {
  const g = globalThis as { process?: { versions?: { node?: string } }; navigator?: { userAgent?: string } };
  return typeof g.process?.versions?.node === 'string' && g.navigator?.userAgent !== 'Cloudflare-Workers';
}

/** node:http's requester, or null where the runtime has no node:http. */
export async function nodeRequester(userAgent: string): Promise<Requester | null> {
  if (!hasNodeHttp()) return null;
  let http: NodeHttp, https: typeof import('node:https');
  try {
    [http, https] = await Promise.all([nodeBuiltin<NodeHttp>('node:http'), nodeBuiltin<typeof import('node:https')>('node:https')]);
  } catch {
    return null;
  }
  // Idle pooled sockets are unref'd by Node's Agent: they never keep a process alive.
  const agents = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) };
  return {
    send(method, url, headers, body, signal) {
      return new Promise<Answer>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        const u = new URL(url);
        const mod = u.protocol === 'https:' ? https : u.protocol === 'http:' ? http : null;
        if (!mod) return reject(new TypeError(`${u.protocol} is not http: or https:`));
        const all: Record<string, string | number> = { 'user-agent': userAgent, ...headers };
        if (body !== undefined) all['content-length'] = Buffer.byteLength(body);
        let answered = false;
        // The answer's body, as it comes: pieces not yet read, its end, or why it stopped.
        const pieces: Uint8Array[] = [];
        let ended = false;
        let failed: unknown = null;
        let wake: (() => void) | null = null;
        const poke = () => {
          const w = wake;
          wake = null;
          w?.();
        };
        const broken = (e: unknown) => new TypeError(`the connection to ${u.host} failed`, { cause: e });
        const req = mod.request(u, { method, headers: all, agent: agents[u.protocol as 'http:'] });
        const onAbort = () => {
          failed ??= signal.reason;
          req.destroy();
          if (!answered) reject(signal.reason);
          poke();
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const settle = () => signal.removeEventListener('abort', onAbort);
        req.on('error', (e) => {
          settle();
          if (!answered) reject(signal.aborted ? signal.reason : broken(e));
          failed ??= broken(e);
          poke();
        });
        req.on('response', (res) => {
          answered = true;
          res.on('data', (d: Buffer) => {
            pieces.push(d);
            poke();
          });
          res.on('end', () => {
            ended = true;
            settle();
            poke();
          });
          // Closed before its end: the plane went away mid-answer.
          res.on('close', () => {
            if (!ended) failed ??= broken(Object.assign(new Error('the answer was cut short'), { code: 'ECONNRESET' }));
            settle();
            poke();
          });
          resolve({
            status: res.statusCode ?? 0,
            header: (name) => {
              const v = res.headers[name.toLowerCase()];
              return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
            },
            read: async () => {
              for (;;) {
                if (pieces.length) return pieces.shift()!;
                if (ended) return null;
                if (failed !== null) throw failed;
                await new Promise<void>((r) => (wake = r));
              }
            },
            cancel: () => {
              if (!ended) res.destroy();
            },
          });
        });
        req.end(body);
      });
    },
    close() {
      for (const agent of Object.values(agents))
        for (const idle of Object.values(agent.freeSockets)) for (const s of idle ?? []) s.destroy();
    },
  };
}
