/**
 * The queue Durable Object: one per (namespace, queue). Every transition of the queue's rows goes
 * through it, so they are serialized and group-committed to D1; waiting claims, result waits and
 * journal readers park here and are woken by the transition that satisfies them. The D1 rows stay
 * the only truth: this object keeps waiters and an alarm, never queue state.
 */
import { DurableObject } from 'cloudflare:workers';
import { Engine, type AppendRequest, type ClaimRequest, type HolderRequest, type SubmitRequest } from '../core/engine.ts';
import { D1Port } from './d1-port.ts';
import { capture, tagged } from './result.ts';
import { settingsFrom } from './settings.ts';
import { STREAM_LEASE_MS, type TokenGate } from './gate.ts';
import { journalStream } from './sse.ts';

interface Ident {
  ns: string;
  queue: string;
}

export class QueueObject extends DurableObject<Env> {
  private readonly engine: Engine;
  private readonly port: D1Port;
  private ident: Ident | null = null;
  /** The alarm time this instance last set; a cache of a timer, not of queue state. */
  private alarmAt: number | null = null;
  /** D1 rows read and written by this object's batches, for benchmarks. */
  private readonly rows = { read: 0, written: 0, batches: 0, plans: 0, calls: 0, callMs: 0 };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const settings = settingsFrom(env);
    this.port = new D1Port(env.DB);
    this.engine = new Engine(this.port, {
      limits: settings.limits,
      committer: {
        simulatedDelayMs: settings.simulatedDelayMs,
        onBatch: (results, plans) => {
          for (const r of results) {
            this.rows.read += r.rowsRead;
            this.rows.written += r.rowsWritten;
          }
          this.rows.batches++;
          this.rows.plans += plans;
        },
      },
      onLease: (_ns, _queue, deadline) => this.armAlarm(deadline),
    });
    // Initialise before any request runs. A throw here resets the object, and the next request retries.
    void ctx.blockConcurrencyWhile(async () => {
      this.ident = (await ctx.storage.get<Ident>('ident')) ?? null;
      // Alarms may not survive a restart (local workerd drops them): sweep once and re-arm.
      if (this.ident) await this.sweep();
    });
  }

  // ------------------------------------------------------------ producers

  submit(ns: string, queue: string, req: SubmitRequest) {
    return this.run(ns, queue, () => this.engine.submit(ns, queue, req));
  }

  submitMany(ns: string, queue: string, items: SubmitRequest[]) {
    return this.run(ns, queue, async () => {
      return (await this.engine.submitMany(ns, queue, items)).map(tagged);
    });
  }

  cancel(ns: string, queue: string, id: string) {
    return this.run(ns, queue, () => this.engine.cancel(ns, id, queue));
  }

  result(ns: string, queue: string, id: string, timeoutMs: unknown) {
    return this.run(ns, queue, () => this.engine.result(ns, id, timeoutMs));
  }

  trim(ns: string, queue: string, id: string, keepLast: unknown) {
    return this.run(ns, queue, () => this.engine.trim(ns, id, keepLast, queue));
  }

  configure(ns: string, queue: string, cfg: { leaseMs?: unknown; maxAttempts?: unknown }) {
    return this.run(ns, queue, () => this.engine.configure(ns, queue, cfg));
  }

  // ------------------------------------------------------------ workers

  claim(ns: string, queue: string, req: Omit<ClaimRequest, 'signal'> & { max?: unknown }) {
    return this.run(ns, queue, () => this.engine.claimMany(ns, queue, req));
  }

  /** A worker's acks (of this queue's invocations) and its next claim, in one D1 batch. */
  ackAndClaim(ns: string, queue: string, acks: (HolderRequest & { id: string; result?: unknown })[], req: Omit<ClaimRequest, 'signal'> & { max?: unknown }) {
    return this.run(ns, queue, async () => {
      const out = await this.engine.ackAndClaim(ns, queue, acks, req);
      return { claimed: out.claimed, acks: out.acks.map(tagged) };
    });
  }

  ack(ns: string, queue: string, id: string, req: HolderRequest & { result?: unknown }) {
    return this.run(ns, queue, () => this.engine.ack(ns, id, { ...req, queue }));
  }

  ackMany(ns: string, queue: string, items: (HolderRequest & { id: string; result?: unknown })[]) {
    return this.run(ns, queue, async () => {
      return (await this.engine.ackMany(ns, items.map((it) => ({ ...it, queue })))).map(tagged);
    });
  }

  nackMany(ns: string, queue: string, items: (HolderRequest & { id: string; error: unknown; retry?: unknown })[]) {
    return this.run(ns, queue, async () => {
      return (await this.engine.nackMany(ns, items.map((it) => ({ ...it, queue })))).map(tagged);
    });
  }

  nack(ns: string, queue: string, id: string, req: HolderRequest & { error: unknown; retry?: unknown }) {
    return this.run(ns, queue, () => this.engine.nack(ns, id, { ...req, queue }));
  }

  heartbeat(ns: string, queue: string, id: string, req: HolderRequest & { leaseMs?: unknown }) {
    return this.run(ns, queue, () => this.engine.heartbeat(ns, id, { ...req, queue }));
  }

  append(ns: string, queue: string, id: string, req: AppendRequest) {
    return this.run(ns, queue, () => this.engine.append(ns, id, { ...req, queue }));
  }

  follow(ns: string, queue: string, id: string, since: unknown, timeoutMs: unknown) {
    return this.run(ns, queue, () => this.engine.follow(ns, id, since, timeoutMs));
  }

  /** D1 rows read and written by this object so far (D1's own result metadata). */
  stats() {
    return { ...this.rows, d1_ms: this.port.busyMs, waiters: this.engine.waiters.size };
  }

  /** Server-Sent Events of one invocation's journal: the one route that needs a stream. */
  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const ns = url.searchParams.get('ns') ?? '';
    const queue = url.searchParams.get('queue') ?? '';
    const id = url.searchParams.get('id') ?? '';
    const since = Number(url.searchParams.get('since') ?? '-1');
    await this.own(ns, queue);
    // The stream counts against its token while it lives (src/worker/limits.ts).
    const gateKey = url.searchParams.get('gate');
    const lease = url.searchParams.get('lease');
    const gates = this.env.GATE as unknown as DurableObjectNamespace<TokenGate>;
    const gate = gateKey && lease ? gates.get(gates.idFromName(gateKey)) : null;
    let renewed = Date.now();
    return journalStream(this.engine, ns, id, since, gate && lease ? {
      renew: () => {
        if (Date.now() - renewed < STREAM_LEASE_MS / 3) return;
        renewed = Date.now();
        void gate.renewStream(lease).catch(() => {});
      },
      end: () => void gate.closeStream(lease).catch(() => {}),
    } : undefined);
  }

  // ------------------------------------------------------------ leases

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    await this.sweep();
  }

  /** Expires overdue leases and arms the alarm for the next deadline. */
  private async sweep(): Promise<void> {
    if (!this.ident) return;
    const next = await this.engine.expire(this.ident.ns, this.ident.queue);
    if (next !== null) this.armAlarm(next);
  }

  private armAlarm(deadline: number): void {
    if (this.alarmAt !== null && this.alarmAt <= deadline) return;
    this.alarmAt = deadline;
    void this.ctx.storage.setAlarm(deadline);
  }

  /** Runs one verb for the queue: records the identity, then answers a tagged result. */
  private run<T>(ns: string, queue: string, fn: () => Promise<T>) {
    return capture(async () => {
      const t0 = Date.now();
      try {
        await this.own(ns, queue);
        return await fn();
      } finally {
        this.rows.calls++;
        this.rows.callMs += Date.now() - t0;
      }
    });
  }

  /** Remembers which queue this object serves, so its alarm can sweep after a restart. */
  private async own(ns: string, queue: string): Promise<void> {
    if (this.ident) return;
    this.ident = { ns, queue };
    await this.ctx.storage.put('ident', this.ident);
  }
}
