/**
 * A push receiver for tests (docs/contract.md, "Push delivery"): a small HTTP server on loopback
 * that checks each request's signature with the Standard Webhooks reference library
 * (`standardwebhooks`, not our own helper), records it, and answers as the test says.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface Hit {
  body: string;
  headers: Record<string, string>;
  id: string;
  attempt: number;
  webhookId: string;
  at: number;
  verified: boolean;
  delivery: Record<string, unknown>;
  /** A batch's jobs (a queue with push.batch_size above 1); empty for a one-job delivery. */
  jobs: { id: string; attempt: number }[];
}

export type Handler = (hit: Hit, req: IncomingMessage, res: ServerResponse) => void;

/** A receiver on loopback: checks each request's signature with the reference library, records it, and answers by `handle`. */
export async function receiver(handle: Handler): Promise<{ url: string; hits: Hit[]; setSecret: (s: string) => void; server: Server }> {
  const hits: Hit[] = [];
  let wh: Webhook | null = null;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let verified = false;
      try {
        wh!.verify(body, req.headers as Record<string, string>);
        verified = true;
      } catch {
        verified = false;
      }
      const delivery = JSON.parse(body) as Record<string, unknown>;
      const hit: Hit = {
        body,
        headers: req.headers as Record<string, string>,
        id: String(delivery.id),
        attempt: Number(delivery.attempt),
        webhookId: String(req.headers['webhook-id']),
        at: Date.now(),
        verified,
        delivery,
        jobs: Array.isArray(delivery.jobs)
          ? (delivery.jobs as Record<string, unknown>[]).map((j) => ({ id: String(j.id), attempt: Number(j.attempt) }))
          : [],
      };
      hits.push(hit);
      handle(hit, req, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook`, hits, setSecret: (s) => (wh = new Webhook(s)), server };
}

export const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

/** Closes a receiver and every connection it holds. */
export async function closeReceiver(s: Server): Promise<void> {
  s.closeAllConnections();
  await new Promise((r) => s.close(r));
}
