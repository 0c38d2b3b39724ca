/**
 * A queue object's place: the shard its namespace lives on (directory.ts), and the fence a move of
 * that namespace puts on its writes (mover.ts). While fenced, no batch of the object reaches any
 * shard: each answers 503 unavailable, which clients retry (d1-port.ts).
 */
import type { Engine } from '../core/engine.ts';
import type { D1Port } from './d1-port.ts';
import { enter, homeOf, shardNamed } from './directory.ts';
import { settingsFrom } from './settings.ts';

/** What a place needs of its object. */
export interface PlaceOf {
  env: Env;
  ns: string;
  queue: string;
  port: D1Port;
  engine: Engine;
  /** Arms the object's alarm (a fenced object looks at the directory every MOVE_LOOK_MS). */
  armAlarm(at: number): void;
  /** Reads its settings and sweeps once (at start, and once a move has ended). */
  started(): Promise<void>;
}

export class ShardPlace {
  /** The shard its namespace lives on, read as the object starts. */
  shard = '';
  /** The epoch of the move that fenced it, while one does. */
  private fencedAt: number | null = null;
  private readonly o: PlaceOf;

  constructor(o: PlaceOf) {
    this.o = o;
  }

  get fenced(): boolean {
    return this.o.port.fenced;
  }

  /** Finds its shard as the object starts: fenced, if a move copies its namespace right now. */
  async enter(limitBytes: number): Promise<void> {
    const { env, ns, queue, port, engine } = this.o;
    const placed = await enter(env, ns, queue, limitBytes);
    port.use(placed.db);
    this.shard = placed.shard;
    engine.storage.shard = placed.shard;
    // Started while a move copies its namespace: fenced until the mover says where it went.
    if (placed.state === 'moving') {
      this.fencedAt = placed.epoch;
      void port.fence(this.movingMessage());
      this.lookLater();
      return;
    }
    await this.o.started();
  }

  /**
   * A move of its namespace begins: from now no batch of the object reaches any shard, parked
   * claims are woken to answer so, and this resolves once the batches already on their way have
   * answered.
   */
  async fence(epoch: number): Promise<{ shard: string }> {
    this.fencedAt = Math.max(this.fencedAt ?? 0, epoch);
    await this.o.port.fence(this.movingMessage());
    this.o.engine.park.wakeAll();
    // While fenced, the alarm looks at the directory now and then (look()).
    this.lookLater();
    return { shard: this.shard };
  }

  /**
   * The move ended: its namespace now lives on `shard` (the one it was on, if the move was rolled
   * back). Batches go there from now; the alarm is armed again from its rows.
   */
  async unfence(shard: string, epoch: number): Promise<void> {
    if (this.fencedAt !== null && epoch < this.fencedAt) throw new Error(`unfence at epoch ${epoch}, fenced at ${this.fencedAt}`);
    const { env, ns, queue, port, engine } = this.o;
    const to = shardNamed(env, shard);
    port.unfence(to.db);
    this.fencedAt = null;
    this.shard = to.name;
    engine.storage.shard = to.name;
    engine.hints?.forget(ns, queue);
    await this.o.started();
  }

  /**
   * A fenced object's alarm: the mover unfences it; should that call not arrive, the directory
   * says where the namespace went once the move ended (or was undone). Until then, look again
   * every MOVE_LOOK_MS (10 s by default): seldom, since a namespace of many queues has as many
   * fenced objects, and each look is a read of the home database.
   */
  async look(): Promise<void> {
    const row = await homeOf(this.o.env)
      .prepare(`SELECT shard, state, epoch FROM namespaces WHERE ns = ?1`)
      .bind(this.o.ns)
      .first<{ shard: string; state: string; epoch: number }>();
    if (row?.state === 'active' && row.epoch > (this.fencedAt ?? 0)) await this.unfence(row.shard, row.epoch);
    else this.lookLater();
  }

  private lookLater(): void {
    this.o.armAlarm(Date.now() + settingsFrom(this.o.env).moveLookMs);
  }

  private movingMessage(): string {
    return `namespace ${JSON.stringify(this.o.ns)} is moving to another shard: retry in a moment`;
  }
}
