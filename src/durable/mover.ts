/**
 * Moving a namespace to another shard, without losing or repeating a job: one Durable Object per
 * namespace (named by it) runs the move, so two moves of one namespace cannot overlap.
 *
 *  1. copy    while the namespace goes on working, the shard it leaves notes every job of it
 *             written from now on (move-track.ts), and its jobs as they are when the copy begins
 *             go to the target with their frames (copy.ts), which first loses any copy an
 *             earlier try left; then its workers, each compared as copied (a worker's row never
 *             changes, and new ones are numbered after the highest);
 *  2. check   still while it works, every job not noted is compared on both shards, a page at a
 *             time (it was not written since before the copy read it: its copy must be equal);
 *  3. live    still while it works, rounds of catching up: the jobs noted dirty copied again (or
 *             deleted), and compared, while a round catches up FEW_CHANGES or more (what was
 *             written during the round before) and at most half the round before, at most
 *             MOST_ROUNDS;
 *  4. mark    the directory says `moving` (epoch + 1): queue objects that start now start fenced;
 *  5. fence   every queue object the namespace ever started (directory.ts `enter` records them)
 *             stops writing: its batches answer 503 `unavailable`, which clients retry, and the
 *             fence returns once the batches already on their way have answered (d1-port.ts);
 *  6. catch up the jobs still dirty (written during the last round) copied again, then the queues'
 *             settings, levels and schedules, and the workers numbered since their copy;
 *  7. verify  the jobs still dirty compared on both shards, and the other tables: with steps 2
 *             and 3, every job was compared once as it is;
 *  8. switch  the directory says the target, `active` (epoch + 1);
 *  9. unfence every queue object (those that started meanwhile too) writes to the target now, and
 *             the shard it left stops noting;
 * 10. later   the copy on the shard it left is deleted (after CLEANUP_MS: an isolate's cached
 *             placement lives 5 s, and a read routed by one finds the old rows until then).
 *
 * So writes wait for steps 5-9: for what was written during the last round of catching up, not
 * for the whole copy, nor for what was written while it ran, nor for a comparison of every job.
 *
 * `start` reads the directory and answers; the mover's alarm does the rest in steps, each an
 * invocation of its own that asks at most MOVE_STEP_SUBREQUESTS of D1 and the queue objects
 * (Cloudflare bounds what one invocation may ask: a namespace of millions of jobs takes millions
 * of statements). Its state, with the cursor of the step it is at, is kept in this object's
 * storage after each step, so a restart goes on where the last step ended (a unit run again
 * changes nothing: copy.ts). `status` answers where it is, and waits for its end if asked. Each
 * phase's units are in move-units.ts, and the state kept between steps in move-state.ts.
 *
 * If a step before the switch fails, the move is undone: the target's partial copy deleted and,
 * once marked, the directory `active` on the shard it was on and every object unfenced there.
 */
import { DurableObject } from 'cloudflare:workers';
import { conflict, LakeshoreError } from '../core/errors.ts';
import { platformError } from '../core/platform-errors.ts';
import { settle, type Settled } from '../core/settled.ts';
import { moveStepSubrequests } from '../core/subrequests.ts';
import { NamespaceCopy } from './copy.ts';
import type { Columns } from './copy-rows.ts';
import { homeOf, shardNamed } from './directory.ts';
import { Meter, Metered } from './metered.ts';
import { type Cleanup, type Move, type MoveStatus, newMove, statusOf, SWITCHED } from './move-state.ts';
import { MoveUnits } from './move-units.ts';
import { DELETE_COST, deleteUnit } from './shard-rows.ts';

/** How long a step that failed after the switch (or while undoing) waits before it is tried again. */
const RETRY_MS = 1_000;
/** Passing failures of the platform in a row a move rides out before the switch (then it is undone). */
const PASSING_TRIES = 5;

export class MoverObject extends DurableObject<Env> {
  private readonly ns: string;
  private readonly budget: number;
  /** Calls of `status` waiting for the move to end. */
  private readonly waiting = new Set<() => void>();
  /** The copy's columns (copy.ts), read once an instance. */
  private columns: { key: string; of: Map<string, Columns> } | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    if (!ctx.id.name) throw new Error('a mover is reached by its namespace (getByName)');
    this.ns = ctx.id.name;
    this.budget = moveStepSubrequests((env as unknown as Record<string, string | undefined>).MOVE_STEP_SUBREQUESTS);
  }

  /** Starts moving the namespace to shard `to`; the alarm carries it on (answered settled: error classes do not cross RPC). */
  start(to: string): Promise<Settled<MoveStatus>> {
    return settle(() => this.begin(to));
  }

  /** The namespace's move (the last one, once ended); with `waitMs`, once it ends or that has passed. */
  status(waitMs: number): Promise<Settled<MoveStatus>> {
    return settle(async () => {
      let m = await this.ctx.storage.get<Move>('move');
      if (!m) throw new LakeshoreError('not_found', `namespace ${JSON.stringify(this.ns)} has not been moved`);
      if (m.state === 'moving' && waitMs > 0) {
        let wake = () => {};
        const timer = new Promise<void>((r) => {
          const t = setTimeout(r, waitMs);
          wake = () => {
            clearTimeout(t);
            r();
          };
        });
        this.waiting.add(wake);
        await timer;
        this.waiting.delete(wake);
        m = (await this.ctx.storage.get<Move>('move'))!;
      }
      return statusOf(m);
    });
  }

  private async begin(to: string): Promise<MoveStatus> {
    const ns = this.ns;
    const was = await this.ctx.storage.get<Move>('move');
    if (was?.state === 'moving') throw conflict(`namespace ${JSON.stringify(ns)} is being moved already`);
    const target = shardNamed(this.env, to);
    const row = await homeOf(this.env)
      .prepare(`SELECT shard, state FROM namespaces WHERE ns = ?1`)
      .bind(ns)
      .first<{ shard: string; state: string }>();
    if (!row) throw new LakeshoreError('not_found', `namespace ${JSON.stringify(ns)} has never been used: nothing to move`);
    if (row.state === 'moving') throw conflict(`namespace ${JSON.stringify(ns)} is being moved already`);
    if (row.shard === target.name) throw conflict(`namespace ${JSON.stringify(ns)} is on ${row.shard} already`);
    const m = newMove(ns, row.shard, target.name);
    // The move's clear step deletes what a cleanup of its target would (and the cleanup must not
    // delete what the move copies there).
    const cleanup = await this.ctx.storage.get<Cleanup>('cleanup');
    if (cleanup?.shard === m.to) await this.ctx.storage.delete('cleanup');
    await this.ctx.storage.put('move', m);
    await this.ctx.storage.setAlarm(Date.now());
    return statusOf(m);
  }

  override async alarm(): Promise<void> {
    const meter = new Meter(this.budget);
    const m = await this.ctx.storage.get<Move>('move');
    let next = Number.POSITIVE_INFINITY;
    if (m?.state === 'moving') next = await this.step(m, meter);
    const c = await this.ctx.storage.get<Cleanup>('cleanup');
    if (c && c.at <= Date.now()) next = Math.min(next, await this.cleanup(c, meter));
    else if (c) next = Math.min(next, c.at);
    if (next < Number.POSITIVE_INFINITY) await this.ctx.storage.setAlarm(next);
  }

  /** One step of the move: units until the budget would not cover the next one. Answers when the next step is due. */
  private async step(m: Move, meter: Meter): Promise<number> {
    // A move a Worker of before the workers' own phase began (a deploy while it ran): none copied yet.
    m.workersTo ??= 0;
    let retryAt = Date.now();
    const home = new Metered(homeOf(this.env), meter);
    const key = `${m.from}>${m.to}`;
    if (this.columns?.key !== key) this.columns = { key, of: new Map() };
    const copy = new NamespaceCopy(
      this.ns,
      new Metered(shardNamed(this.env, m.from).db, meter),
      new Metered(shardNamed(this.env, m.to).db, meter),
      this.columns.of,
    );
    try {
      const units = new MoveUnits(this.ns, this.env, this.ctx.storage, copy, home, meter);
      while (m.phase !== 'ended' && (await units.unit(m)));
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      if (SWITCHED.has(m.phase)) {
        // Switched (or undoing): nothing is undone from here; the step is tried again.
        console.error(`move of ${this.ns} (${m.phase}): ${why}; trying again`);
        retryAt = Date.now() + RETRY_MS;
      } else if (platformError(e) && m.passing < PASSING_TRIES) {
        // A passing failure of the platform (a lost connection, D1 overloaded): the unit again, later.
        m.passing++;
        console.warn(`move of ${this.ns} (${m.phase}): ${why}; trying again (${m.passing} of ${PASSING_TRIES})`);
        retryAt = Date.now() + RETRY_MS * 2 ** m.passing;
      } else {
        console.error(`move of ${this.ns} to ${m.to} failed in ${m.phase}: ${why}; undoing it`);
        Object.assign(m, { error: why, phase: 'undo-clear', cursor: null, owed: null });
      }
    }
    if (meter.used > 0 && retryAt <= Date.now()) m.passing = 0;
    m.steps++;
    m.mostInStep = Math.max(m.mostInStep, meter.used);
    m.rowsRead += meter.rowsRead;
    if (m.markedAt !== null && m.phase !== 'untrack' && m.phase !== 'ended') m.fencedMs = Date.now() - m.markedAt;
    if (m.phase === 'ended') m.state = m.error ? 'undone' : 'moved';
    m.ms = Date.now() - m.startedAt;
    await this.ctx.storage.put('move', m);
    if (m.state === 'moving') return retryAt;
    for (const wake of this.waiting) wake();
    return Number.POSITIVE_INFINITY;
  }

  /** Deletes the copy on the shard the namespace left, a step at a time, unless it came back there. Answers when the next is due. */
  private async cleanup(c: Cleanup, meter: Meter): Promise<number> {
    const home = new Metered(homeOf(this.env), meter);
    try {
      if (meter.left < 1) return Date.now();
      const row = await home.first<{ shard: string }>(`SELECT shard FROM namespaces WHERE ns = ?1`, this.ns);
      if (row && row.shard !== c.shard) {
        const db = new Metered(shardNamed(this.env, c.shard).db, meter);
        while (meter.left >= DELETE_COST) if ((await deleteUnit(db, this.ns)).done) return this.cleaned();
        return Date.now();
      }
      return this.cleaned();
    } catch (e) {
      console.error(`cleanup of ${this.ns} on ${c.shard}: ${e instanceof Error ? e.message : String(e)}; trying again`);
      return Date.now() + RETRY_MS;
    }
  }

  private async cleaned(): Promise<number> {
    await this.ctx.storage.delete('cleanup');
    return Number.POSITIVE_INFINITY;
  }
}
