/**
 * Moving a namespace to another shard, without losing or repeating a job: one Durable Object per
 * namespace (named by it) runs the move, so two moves of one namespace cannot overlap.
 *
 *  1. mark    the directory says `moving` (epoch + 1): queue objects that start now start fenced;
 *  2. fence   every queue object the namespace ever started (directory.ts `enter` records them)
 *             stops writing: its batches answer 503 `unavailable`, which clients retry, and the
 *             fence returns once the batches already on their way have answered (d1-port.ts);
 *  3. copy    the rows go to the target (copy.ts), which first loses any copy an earlier try left;
 *  4. verify  both shards' fingerprints agree (jobs by queue and state, bytes, frames, settings);
 *  5. switch  the directory says the target, `active` (epoch + 1);
 *  6. unfence every queue object (those that started meanwhile too) writes to the target now;
 *  7. later   the copy on the shard it left is deleted (after CLEANUP_MS: an isolate's cached
 *             placement lives 5 s, and a read routed by one finds the old rows until then).
 *
 * If a step before the switch fails, the move is undone: the target's partial copy deleted, the
 * directory `active` on the shard it was on, every object unfenced there. The move's state is kept
 * in this object's storage, and its alarm finishes or undoes a move that its instance did not see
 * through (a restart in the middle).
 */
import { DurableObject } from 'cloudflare:workers';
import { conflict, LakeshoreError } from '../core/errors.ts';
import { settle, type Settled } from '../core/settled.ts';
import { copyNamespace, deleteNamespace, fingerprint, type Copied } from './copy.ts';
import { homeOf, shardNamed } from './directory.ts';
import { queueObjectName, type QueueObject } from './queue-object.ts';

/** How long the shard a namespace left keeps its rows: past every isolate's cached placement (directory.ts PLACEMENT_TTL_MS). */
export const CLEANUP_MS = 60_000;

export interface MoveReport extends Copied {
  ns: string;
  from: string;
  to: string;
  /** Queue objects fenced and unfenced. */
  objects: number;
  /** How long writes were fenced, in ms. */
  fencedMs: number;
}

interface Underway {
  from: string;
  to: string;
  epoch: number;
  /** When this instance started it; another instance finding it undoes it. */
  instance: string;
}

export class MoverObject extends DurableObject<Env> {
  private readonly ns: string;
  /** This instance: a move underway that names another one was cut by a restart. */
  private readonly instance = crypto.randomUUID();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    if (!ctx.id.name) throw new Error('a mover is reached by its namespace (getByName)');
    this.ns = ctx.id.name;
  }

  /** Moves the namespace to shard `to` (answered settled: error classes do not cross RPC). */
  move(to: string): Promise<Settled<MoveReport>> {
    return settle(() => this.moveTo(to));
  }

  private async moveTo(to: string): Promise<MoveReport> {
    const home = homeOf(this.env);
    const target = shardNamed(this.env, to);
    const ns = this.ns;
    const marked = await home
      .prepare(
        `UPDATE namespaces SET state = 'moving', epoch = epoch + 1 WHERE ns = ?1 AND state = 'active' AND shard <> ?2 RETURNING shard, epoch`,
      )
      .bind(ns, target.name)
      .first<{ shard: string; epoch: number }>();
    if (!marked) {
      const row = await home
        .prepare(`SELECT shard, state FROM namespaces WHERE ns = ?1`)
        .bind(ns)
        .first<{ shard: string; state: string }>();
      if (!row) throw new LakeshoreError('not_found', `namespace ${JSON.stringify(ns)} has never been used: nothing to move`);
      if (row.state === 'moving') throw conflict(`namespace ${JSON.stringify(ns)} is being moved already`);
      throw conflict(`namespace ${JSON.stringify(ns)} is on ${row.shard} already`);
    }
    const from = shardNamed(this.env, marked.shard);
    const underway: Underway = { from: from.name, to: target.name, epoch: marked.epoch, instance: this.instance };
    await this.ctx.storage.put('underway', underway);
    // A watchdog: if this instance dies in the middle, the alarm undoes the move.
    await this.ctx.storage.setAlarm(Date.now() + 60_000);
    const t0 = Date.now();
    let objects = 0;
    let copied: Copied;
    let epoch: number;
    try {
      objects = (await this.everyObject((o) => o.fence(marked.epoch), true)).length;
      await deleteNamespace(target.db, ns);
      copied = await copyNamespace(from.db, target.db, ns);
      // Tests only (SIMULATED_MOVE_PAUSE_MS): a copy as slow as a large one, so that a write an
      // unfenced object made meanwhile would land in the gap and show in the fingerprints.
      const pause = Number((this.env as unknown as Record<string, string | undefined>).SIMULATED_MOVE_PAUSE_MS ?? 0);
      if (pause > 0) await new Promise((r) => setTimeout(r, pause));
      const [a, b] = await Promise.all([fingerprint(from.db, ns), fingerprint(target.db, ns)]);
      if (a !== b) throw new LakeshoreError('internal', `the copy of ${ns} on ${target.name} does not match ${from.name}: ${a} vs ${b}`);
      const switched = await home
        .prepare(
          `UPDATE namespaces SET shard = ?2, state = 'active', epoch = epoch + 1 WHERE ns = ?1 AND epoch = ?3 AND state = 'moving' RETURNING epoch`,
        )
        .bind(ns, target.name, marked.epoch)
        .first<{ epoch: number }>();
      if (!switched) throw new Error(`the directory entry of ${ns} changed during the move`);
      epoch = switched.epoch;
    } catch (e) {
      await this.undo(underway);
      throw e;
    }
    // Switched: from here nothing is undone. An object this call does not reach unfences itself
    // from the directory (its alarm looks while it is fenced).
    await this.ctx.storage.delete('underway');
    await this.everyObject((o) => o.unfence(target.name, epoch), false);
    await this.ctx.storage.put('cleanup', { shard: from.name, at: Date.now() + CLEANUP_MS });
    await this.ctx.storage.setAlarm(Date.now() + CLEANUP_MS);
    return { ns, from: from.name, to: target.name, ...copied, objects, fencedMs: Date.now() - t0 };
  }

  /** Puts a move that did not switch back where it was: the target's copy deleted, the namespace active on its shard, every object unfenced. */
  private async undo(u: Underway): Promise<void> {
    const home = homeOf(this.env);
    await deleteNamespace(shardNamed(this.env, u.to).db, this.ns);
    const back = await home
      .prepare(`UPDATE namespaces SET state = 'active', epoch = epoch + 1 WHERE ns = ?1 AND state = 'moving' RETURNING epoch`)
      .bind(this.ns)
      .first<{ epoch: number }>();
    await this.ctx.storage.delete('underway');
    if (back) await this.everyObject((o) => o.unfence(u.from, back.epoch), false);
  }

  /**
   * Calls every queue object the namespace ever started (directory.ts records them), all at once.
   * `must`: any failure fails the call (a fence must reach every one); else failures are logged
   * (an unfence an object missed, it takes from the directory itself).
   */
  private async everyObject<T>(call: (o: DurableObjectStub<QueueObject>) => Promise<T>, must: boolean): Promise<string[]> {
    const rows = await homeOf(this.env).prepare(`SELECT queue FROM namespace_queues WHERE ns = ?1`).bind(this.ns).all<{ queue: string }>();
    const binding = this.env.QUEUE as unknown as DurableObjectNamespace<QueueObject>;
    const settled = await Promise.allSettled(rows.results.map((r) => call(binding.getByName(queueObjectName(this.ns, r.queue)))));
    const failed = settled.flatMap((s, i) => (s.status === 'rejected' ? [`${rows.results[i]!.queue}: ${String(s.reason)}`] : []));
    if (failed.length && must) throw new Error(`queue objects of ${this.ns} did not answer: ${failed.join('; ')}`);
    if (failed.length) console.error(`move of ${this.ns}: ${failed.join('; ')} (they unfence themselves from the directory)`);
    return rows.results.map((r) => r.queue);
  }

  override async alarm(): Promise<void> {
    const u = await this.ctx.storage.get<Underway>('underway');
    // A move its instance is not seeing through (this one restarted): undo it.
    if (u && u.instance !== this.instance) await this.undo(u);
    else if (u) await this.ctx.storage.setAlarm(Date.now() + 60_000);
    const c = await this.ctx.storage.get<{ shard: string; at: number }>('cleanup');
    if (c && c.at <= Date.now()) {
      // Only if the namespace did not come back to that shard meanwhile.
      const row = await homeOf(this.env).prepare(`SELECT shard FROM namespaces WHERE ns = ?1`).bind(this.ns).first<{ shard: string }>();
      if (row && row.shard !== c.shard) await deleteNamespace(shardNamed(this.env, c.shard).db, this.ns);
      await this.ctx.storage.delete('cleanup');
    } else if (c) await this.ctx.storage.setAlarm(c.at);
  }
}
