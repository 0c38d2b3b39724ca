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
 * `start` marks the namespace and answers; the mover's alarm does the rest in steps, each an
 * invocation of its own that asks at most MOVE_STEP_SUBREQUESTS of D1 and the queue objects
 * (Cloudflare bounds what one invocation may ask: a namespace of millions of jobs takes hundreds of
 * thousands of statements). Its state, with the cursor of the step it is at, is kept in this
 * object's storage after each step, so a restart goes on where the last step ended (a unit run
 * again changes nothing: copy.ts). `status` answers where it is, and waits for its end if asked.
 *
 * If a step before the switch fails, the move is undone: the target's partial copy deleted, the
 * directory `active` on the shard it was on, every object unfenced there.
 */
import { DurableObject } from 'cloudflare:workers';
import { conflict, LakeshoreError } from '../core/errors.ts';
import { settle, type Settled } from '../core/settled.ts';
import { moveStepSubrequests } from '../core/subrequests.ts';
import {
  type Block,
  type Columns,
  type Cursor,
  DELETE_COST,
  deleteUnit,
  fingerprint,
  FINGERPRINT_COST,
  Meter,
  Metered,
  NamespaceCopy,
  RESERVE_COST,
  REST_TABLES,
  UNIT_OVERHEAD,
} from './copy.ts';
import { homeOf, shardNamed } from './directory.ts';
import { queueObjectName, type QueueObject } from './queue-object.ts';

/** How long the shard a namespace left keeps its rows: past every isolate's cached placement (directory.ts PLACEMENT_TTL_MS). */
export const CLEANUP_MS = 60_000;
/** Queue objects fenced or unfenced a unit. */
const OBJECTS_PER_UNIT = 100;
/** How long a step that failed after the switch (or while undoing) waits before it is tried again. */
const RETRY_MS = 1_000;

type Phase =
  | 'fence'
  | 'clear'
  | 'reserve'
  | 'jobs'
  | 'frames'
  | 'due'
  | 'rest'
  | 'verify'
  | 'switch'
  | 'unfence'
  | 'undo-clear'
  | 'undo-mark'
  | 'ended';
/** The phases after which nothing is undone. */
const SWITCHED: ReadonlySet<Phase> = new Set(['unfence', 'undo-clear', 'undo-mark', 'ended']);

/** A move, as the mover keeps it between steps and answers it. */
export interface MoveStatus {
  ns: string;
  from: string;
  to: string;
  /** `moving` until it ends: `moved`, or `undone` (with the error that undid it). */
  state: 'moving' | 'moved' | 'undone';
  phase: Phase;
  jobs: number;
  frames: number;
  queues: number;
  schedules: number;
  /** Queue objects fenced. */
  objects: number;
  /** How long writes were fenced, in ms (so far, while moving). */
  fencedMs: number;
  /** The mover's invocations it took, the most subrequests one asked, and D1's rows read in all. */
  steps: number;
  mostInStep: number;
  rowsRead: number;
  error: string | null;
}

interface Move extends MoveStatus {
  /** The directory's epoch: the mark's while copying, then the switch's (or the undo's). */
  epoch: number;
  startedAt: number;
  cursor: Cursor;
  /** In `rest`, which of REST_TABLES. */
  table: number;
  block: Block | null;
  /** Where the objects are unfenced onto: the target, or where it was (undone). */
  unfenceTo: string;
}

interface Cleanup {
  shard: string;
  at: number;
}

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
    const home = homeOf(this.env);
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
    const m: Move = {
      ns,
      from: marked.shard,
      to: target.name,
      state: 'moving',
      phase: 'fence',
      jobs: 0,
      frames: 0,
      queues: 0,
      schedules: 0,
      objects: 0,
      fencedMs: 0,
      steps: 0,
      mostInStep: 0,
      rowsRead: 0,
      error: null,
      epoch: marked.epoch,
      startedAt: Date.now(),
      cursor: null,
      table: 0,
      block: null,
      unfenceTo: target.name,
    };
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
      while (m.phase !== 'ended' && (await this.unit(m, copy, home, meter)));
    } catch (e) {
      const why = e instanceof Error ? e.message : String(e);
      if (SWITCHED.has(m.phase)) {
        // Switched (or undoing): nothing is undone from here; the step is tried again.
        console.error(`move of ${this.ns} (${m.phase}): ${why}; trying again`);
        retryAt = Date.now() + RETRY_MS;
      } else {
        console.error(`move of ${this.ns} to ${m.to} failed in ${m.phase}: ${why}; undoing it`);
        Object.assign(m, { error: why, phase: 'undo-clear', cursor: null });
      }
    }
    m.steps++;
    m.mostInStep = Math.max(m.mostInStep, meter.used);
    m.rowsRead += meter.rowsRead;
    if (m.phase === 'ended') m.state = m.error ? 'undone' : 'moved';
    m.fencedMs = Date.now() - m.startedAt;
    await this.ctx.storage.put('move', m);
    if (m.state === 'moving') return retryAt;
    for (const wake of this.waiting) wake();
    return Number.POSITIVE_INFINITY;
  }

  /** One unit of the move's phase, if the meter covers it (else false: the step ends here). */
  private async unit(m: Move, copy: NamespaceCopy, home: Metered, meter: Meter): Promise<boolean> {
    const rows = meter.left - UNIT_OVERHEAD;
    switch (m.phase) {
      case 'fence':
      case 'unfence': {
        if (meter.left < 2) return false;
        const most = Math.min(OBJECTS_PER_UNIT, meter.left - 1);
        const queues = await this.objects(home, m.cursor, most);
        meter.used += queues.length;
        if (m.phase === 'fence') {
          await this.call(queues, (o) => o.fence(m.epoch), true);
          m.objects += queues.length;
        } else await this.call(queues, (o) => o.unfence(m.unfenceTo, m.epoch), false);
        if (queues.length === most) m.cursor = [queues.at(-1)!];
        else if (m.phase === 'fence') this.next(m, 'clear');
        else this.next(m, 'ended');
        return true;
      }
      case 'clear':
      case 'undo-clear': {
        if (meter.left < DELETE_COST) return false;
        if ((await deleteUnit(copy.to, this.ns)).done) this.next(m, m.phase === 'clear' ? 'reserve' : 'undo-mark');
        return true;
      }
      case 'reserve':
        if (meter.left < RESERVE_COST) return false;
        m.block = await copy.reserve();
        this.next(m, m.block ? 'jobs' : 'rest');
        return true;
      case 'jobs':
      case 'frames':
      case 'due': {
        if (rows < 1) return false;
        const u = await copy[m.phase](m.block!, m.cursor, rows);
        if (m.phase === 'jobs') m.jobs += u.rows;
        if (m.phase === 'frames') m.frames += u.rows;
        if (!u.done) m.cursor = u.cursor;
        else this.next(m, m.phase === 'jobs' ? 'frames' : m.phase === 'frames' ? 'due' : 'rest');
        return true;
      }
      case 'rest': {
        if (rows < 1) return false;
        const table = REST_TABLES[m.table]!;
        const u = await copy.rest(table, m.cursor, rows);
        if (table === 'queues') m.queues += u.rows;
        if (table === 'schedules') m.schedules += u.rows;
        if (!u.done) m.cursor = u.cursor;
        else if (++m.table < REST_TABLES.length) m.cursor = null;
        else this.next(m, 'verify');
        return true;
      }
      case 'verify': {
        if (meter.left < FINGERPRINT_COST) return false;
        // Tests only (SIMULATED_MOVE_PAUSE_MS): a copy as slow as a large one, so that a write an
        // unfenced object made meanwhile would land in the gap and show in the fingerprints.
        const pause = Number((this.env as unknown as Record<string, string | undefined>).SIMULATED_MOVE_PAUSE_MS ?? 0);
        if (pause > 0) await new Promise((r) => setTimeout(r, pause));
        const [a, b] = await Promise.all([fingerprint(copy.from, this.ns), fingerprint(copy.to, this.ns)]);
        if (a !== b) throw new LakeshoreError('internal', `the copy of ${this.ns} on ${m.to} does not match ${m.from}: ${a} vs ${b}`);
        this.next(m, 'switch');
        return true;
      }
      case 'switch': {
        if (meter.left < 1) return false;
        const switched = await home.first<{ epoch: number }>(
          `UPDATE namespaces SET shard = ?2, state = 'active', epoch = epoch + 1 WHERE ns = ?1 AND epoch = ?3 AND state = 'moving' RETURNING epoch`,
          this.ns,
          m.to,
          m.epoch,
        );
        if (!switched) throw new Error(`the directory entry of ${this.ns} changed during the move`);
        // Switched: from here nothing is undone. An object the unfence does not reach unfences
        // itself from the directory (its alarm looks while it is fenced).
        m.epoch = switched.epoch;
        this.next(m, 'unfence');
        await this.ctx.storage.put('cleanup', { shard: m.from, at: Date.now() + CLEANUP_MS } satisfies Cleanup);
        return true;
      }
      case 'undo-mark': {
        if (meter.left < 1) return false;
        const back = await home.first<{ epoch: number }>(
          `UPDATE namespaces SET state = 'active', epoch = epoch + 1 WHERE ns = ?1 AND state = 'moving' RETURNING epoch`,
          this.ns,
        );
        if (back) {
          Object.assign(m, { epoch: back.epoch, unfenceTo: m.from });
          this.next(m, 'unfence');
        } else this.next(m, 'ended');
        return true;
      }
      case 'ended':
        return false;
    }
  }

  private next(m: Move, phase: Phase): void {
    m.phase = phase;
    m.cursor = null;
  }

  /** The next names of the queue objects the namespace ever started (directory.ts records them), after the cursor. */
  private async objects(home: Metered, cursor: Cursor, most: number): Promise<string[]> {
    const after = cursor ? 'AND queue > ?2' : '';
    const rows = await home.all<{ queue: string }>(
      `SELECT queue FROM namespace_queues WHERE ns = ?1 ${after} ORDER BY queue LIMIT ${most}`,
      this.ns,
      ...(cursor ?? []),
    );
    return rows.map((r) => r.queue);
  }

  /**
   * Calls these queue objects, all at once. `must`: any failure fails the call (a fence must reach
   * every one); else failures are logged (an unfence an object missed, it takes from the directory
   * itself).
   */
  private async call<T>(queues: string[], call: (o: DurableObjectStub<QueueObject>) => Promise<T>, must: boolean): Promise<void> {
    const binding = this.env.QUEUE as unknown as DurableObjectNamespace<QueueObject>;
    const settled = await Promise.allSettled(queues.map((q) => call(binding.getByName(queueObjectName(this.ns, q)))));
    const failed = settled.flatMap((s, i) => (s.status === 'rejected' ? [`${queues[i]}: ${String(s.reason)}`] : []));
    if (failed.length && must) throw new Error(`queue objects of ${this.ns} did not answer: ${failed.join('; ')}`);
    if (failed.length) console.error(`move of ${this.ns}: ${failed.join('; ')} (they unfence themselves from the directory)`);
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

const statusOf = (m: Move): MoveStatus => ({
  ns: m.ns,
  from: m.from,
  to: m.to,
  state: m.state,
  phase: m.phase,
  jobs: m.jobs,
  frames: m.frames,
  queues: m.queues,
  schedules: m.schedules,
  objects: m.objects,
  fencedMs: m.fencedMs,
  steps: m.steps,
  mostInStep: m.mostInStep,
  rowsRead: m.rowsRead,
  error: m.error,
});
