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
  /** Reads its settings and sweeps once (at its first call, and once a move has ended). */
  started(): Promise<void>;
  /** The storage budget a namespace new to the directory is placed by (the shard with the most room). */
  limitBytes: number;
}

/** Least time between two looks at the directory that a fenced object's requests make (`asked`). */
const ASKED_LOOK_MS = 100;

export class ShardPlace {
  /** The shard its namespace lives on, once placed. */
  shard = '';
  /** The epoch of the move that fenced it, while one does. */
  private fencedAt: number | null = null;
  /** The directory's epoch its shard was read or set at: an unfence of no later epoch finds it there already. */
  private epoch = 0;
  /** Whether it knows its shard: read from the directory (`enter`), or told by a move's unfence. */
  private placed = false;
  /**
   * Whether this instance has read its settings and swept (`started`) since it was placed, and
   * not had its alarm fire under a fence since: then an unfence has nothing to read again (below).
   */
  private swept = false;
  /** Its alarm fired under the fence: timed work may have come due, so the unfence sweeps at once. */
  private due = false;
  /** The placing and the start that the calls waiting for them share. */
  private entering: Promise<void> | null = null;
  private starting: Promise<void> | null = null;
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

  /** Whether a call may run at once: placed, started, and no move fences it (a call's one check). */
  get ready(): boolean {
    return this.swept && !this.o.port.fenced;
  }

  /**
   * What a call waits for when the object is not `ready`. A fenced object first looks whether the
   * move has ended (`asked`); a call still fenced after that is refused by the port (503), and its
   * client retries. Else the object finds its shard in the directory, if no unfence told it, and
   * starts (reads its settings and sweeps), once for all the calls that wait. Answers whether this
   * call started it (an alarm then has swept already).
   *
   * An object starts at its first call, not as it is made: the first call a move's fence makes of
   * an object that was not running (evicted, on Cloudflare, after a minute or two idle) is the only
   * one it gets until the move ends, and a fenced object has nothing to read. So that fence costs
   * no read of the home database, and its unfence no read and no sweep of the new shard: the
   * object starts at its next call or alarm, on the shard the move left it on, as it would have
   * had the move not called it.
   */
  async prepare(): Promise<boolean> {
    if (this.fenced) await this.asked();
    if (this.fenced) return false;
    if (!this.placed) await (this.entering ??= this.enter().finally(() => (this.entering = null)));
    if (this.fenced || this.swept) return false;
    await this.start();
    return true;
  }

  /** Reads its settings and sweeps, once for every caller waiting meanwhile. */
  private start(): Promise<void> {
    this.starting ??= this.o
      .started()
      .then(() => {
        this.swept = true;
        this.due = false;
      })
      .finally(() => (this.starting = null));
    return this.starting;
  }

  /** Finds its shard in the directory (and records the queue there): fenced, if a move copies its namespace right now. */
  private async enter(): Promise<void> {
    const { env, ns, queue, port, engine } = this.o;
    const placed = await enter(env, ns, queue, this.o.limitBytes);
    // A move's fence or unfence came while it read: what it read is older than what they said.
    if (this.fencedAt !== null || this.placed) return;
    port.use(placed.db);
    this.shard = placed.shard;
    this.epoch = placed.epoch;
    engine.storage.shard = placed.shard;
    // Found while a move copies its namespace: fenced until the mover says where it went, or a
    // request, its pusher or the alarm its timed work stored finds the move over. It arms no alarm
    // of its own, as a fence does not (fence()).
    if (placed.state === 'moving') {
      this.fencedAt = placed.epoch;
      void port.fence(this.movingMessage());
      return;
    }
    this.placed = true;
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
   * hints (its next claim sweeps in full). One whose alarm fired under the fence reads its
   * settings and sweeps on the new shard now, arming its alarm from its rows. One that never
   * started (the fence's call made it, or it was made fenced) starts at its next call or alarm
   * (`prepare`). So the mover's unfence of a namespace of many queues costs a call each, not a
   * read and a sweep each.
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
    this.placed = true;
    engine.storage.shard = to.name;
    engine.storage.forget();
    engine.hints?.forget(ns, queue);
    if (this.due) await this.start();
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
    this.due = true;
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
