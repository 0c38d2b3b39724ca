/**
 * A queue object's place: the shard its namespace lives on (directory.ts), and the fence a move of
 * that namespace puts on its writes (mover.ts). While fenced, no batch of the object reaches any
 * shard: each answers 503 unavailable, which clients retry (d1-port.ts).
 *
 * The move ends for the object when the mover unfences it, or when the object reads the directory
 * itself and finds the move over: at a request that meets the fence (`asked`), at its pusher's
 * claim (pushing.ts), and at its alarm.
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

/** Least time between two looks at the directory that a fenced object's requests make (`asked`). */
const ASKED_LOOK_MS = 100;

export class ShardPlace {
  /** The shard its namespace lives on, read as the object starts. */
  shard = '';
  /** The epoch of the move that fenced it, while one does. */
  private fencedAt: number | null = null;
  /** The directory's epoch its shard was read or set at: an unfence of no later epoch finds it there already. */
  private epoch = 0;
  /**
   * Whether this instance has read its settings and swept (`started`) since it last entered or
   * its alarm last fired under a fence: then an unfence has nothing to read again (below).
   */
  private swept = false;
  /** The look that requests meeting the fence share, and when the last one began. */
  private asking: Promise<void> | null = null;
  private askedAt = 0;
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
    this.epoch = placed.epoch;
    engine.storage.shard = placed.shard;
    // Started while a move copies its namespace (the fence's call may be what started it): fenced
    // until the mover says where it went, or a request, its pusher or the alarm its timed work
    // stored finds the move over. It arms no alarm of its own, as a fence does not (fence()).
    if (placed.state === 'moving') {
      this.fencedAt = placed.epoch;
      void port.fence(this.movingMessage());
      return;
    }
    await this.o.started();
    this.swept = true;
  }

  /**
   * A move of its namespace begins: from now no batch of the object reaches any shard, parked
   * claims are woken to answer so, and this resolves once the batches already on their way have
   * answered. It arms no alarm of its own (a write of the object's storage, which a namespace of
   * 1,000 queues paid 1,000 times under its fence): the alarm its timed work has looks at the
   * directory when it fires, and a request that meets the fence looks at once. An object with
   * neither has nothing to do until a request comes.
   */
  async fence(epoch: number): Promise<{ shard: string }> {
    this.fencedAt = Math.max(this.fencedAt ?? 0, epoch);
    await this.o.port.fence(this.movingMessage());
    this.o.engine.park.wakeAll();
    return { shard: this.shard };
  }

  /**
   * The move ended: its namespace now lives on `shard` (the one it was on, if the move was rolled
   * back). Batches go there from now.
   *
   * An object that had swept before the fence, and whose alarm did not fire under it, reads
   * nothing again: its settings change only through it, its alarm is armed for its next timed work
   * and the copy's rows are the rows it swept, so it only forgets the old shard's size and its
   * hints (its next claim sweeps in full). Else (it started fenced, or its timed work came due
   * under the fence) it reads its settings and sweeps on the new shard, arming its alarm from its
   * rows. So the mover's unfence of a namespace of many queues costs a call each, not a read and
   * a sweep each.
   */
  async unfence(shard: string, epoch: number): Promise<void> {
    if (this.fencedAt !== null && epoch < this.fencedAt) throw new Error(`unfence at epoch ${epoch}, fenced at ${this.fencedAt}`);
    // Unfenced at this epoch already: by its own look, or it started after the move ended.
    if (!this.fenced && epoch <= this.epoch) return;
    const { env, ns, queue, port, engine } = this.o;
    const to = shardNamed(env, shard);
    port.unfence(to.db);
    this.fencedAt = null;
    this.epoch = epoch;
    this.shard = to.name;
    engine.storage.shard = to.name;
    engine.storage.forget();
    engine.hints?.forget(ns, queue);
    if (this.swept) return;
    await this.o.started();
    this.swept = true;
  }

  /**
   * A request met the fence: the directory is read now (one read for the requests that come
   * meanwhile, and at most one each ASKED_LOOK_MS), so that a queue in use writes to its new shard
   * as soon as the move has switched, not once the mover's unfence reaches it among every object
   * of the namespace (nor, should that call not arrive, at its alarm). A look that fails leaves it
   * fenced: the request is refused as before, and retried.
   */
  asked(): Promise<void> {
    if (!this.fenced) return Promise.resolve();
    if (!this.asking && Date.now() - this.askedAt >= ASKED_LOOK_MS) {
      this.askedAt = Date.now();
      this.asking = this.look()
        .catch((e) => console.error(`${this.o.ns}/${this.o.queue}: the directory could not be read: ${String(e)}`))
        .finally(() => (this.asking = null));
    }
    return this.asking ?? Promise.resolve();
  }

  /**
   * A fenced object's alarm (its timed work was due, or it looked before): the mover unfences
   * it; should that call not arrive, the directory says where the namespace went once the move
   * ended (or was undone). Until then, look again every MOVE_LOOK_MS (10 s by default): seldom,
   * since a namespace of many queues has as many fenced objects, and each look is a read of the
   * home database.
   */
  alarmed(): Promise<void> {
    // Its timed work may have come due under the fence: to sweep once unfenced.
    this.swept = false;
    return this.look();
  }

  /** Reads the directory, and unfences the object if the move it was fenced by has ended. */
  private async look(): Promise<void> {
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
