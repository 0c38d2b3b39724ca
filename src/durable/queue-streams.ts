/**
 * A queue object's streams, served as fetches whose bodies the Worker relays (a reader going away
 * cancels the body back here, as through any proxy):
 * - `/events?last=&kinds=&batch=&gate=&lease=`: the queue's lifecycle feed (feed-streams.ts);
 * - `/journal-stream?id=&since=&gate=&lease=`: an invocation's journal (journal-streams.ts). A bad
 *   id fails before any stream exists: its status and `{error}` body.
 * Each stream keeps its token's stream lease (gate.ts) while it lives.
 */
import type { Engine } from '../core/engine.ts';
import type { Settled } from '../core/settled.ts';
import { FeedStreams, type Kinds } from './feed-streams.ts';
import { leaseKeeper, type TokenGate } from './gate.ts';
import { JournalStreams } from './journal-streams.ts';

/** What the streams need of their object. */
export interface StreamsOf {
  env: Env;
  ns: string;
  queue: string;
  engine: Engine;
  waitUntil(p: Promise<unknown>): void;
  /** Runs one verb of the object, settled (its calls are counted, its bookmark told). */
  run<T>(fn: () => Promise<T>): Promise<Settled<T>>;
}

export class QueueStreams {
  /** The lifecycle feed's readers. */
  readonly feed: FeedStreams;
  /** The SSE readers of this queue's journals. */
  readonly journals: JournalStreams;
  private readonly o: StreamsOf;

  constructor(o: StreamsOf) {
    this.o = o;
    this.feed = new FeedStreams(o.engine.park.events);
    this.journals = new JournalStreams((id, since, waitMs, signal) =>
      o.engine.journal.follow(o.ns, id, since, waitMs, signal, undefined, o.queue),
    );
  }

  async fetch(req: Request): Promise<Response> {
    const { env, ns, queue, engine } = this.o;
    const url = new URL(req.url);
    const p = url.searchParams;
    const lease = () =>
      leaseKeeper(env.GATE as unknown as DurableObjectNamespace<TokenGate>, { key: p.get('gate') ?? '', id: p.get('lease') ?? '' }, (x) =>
        this.o.waitUntil(x),
      );
    if (url.pathname === '/events') {
      // A namespace-wide reader's Worker keeps its lease itself (it merges many queues): no gate then.
      const l = p.get('gate') ? lease() : null;
      l?.renew();
      return new Response(
        this.feed.open(
          p.get('last'),
          l ? { alive: l.renew, ended: l.close } : undefined,
          (p.get('kinds') ?? 'all') as Kinds,
          p.get('batch') === '1' ? 'batch' : 'each',
        ),
      );
    }
    if (url.pathname !== '/journal-stream')
      return Response.json({ error: { code: 'not_found', message: 'no such path' } }, { status: 404 });
    const id = p.get('id') ?? '';
    const since = Number(p.get('since'));
    const out = await this.o.run(async () => engine.journal.follow(ns, id, since, 0, undefined, undefined, queue));
    if (!out.ok) return Response.json({ error: out.error }, { status: 400 });
    const l = lease();
    return new Response(this.journals.open(id, since, out.value, { alive: l.renew, ended: l.close }));
  }
}
