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
 * changes nothing: copy.ts). `status` answers where it is, and waits for its end if asked.
 *
 * If a step before the switch fails, the move is undone: the target's partial copy deleted and,
 * once marked, the directory `active` on the shard it was on and every object unfenced there.
 */
import { DurableObject } from 'cloudflare:workers';
import { conflict, LakeshoreError } from '../core/errors.ts';
import { platformError } from '../core/platform-errors.ts';
import { settle, type Settled } from '../core/settled.ts';
import { moveStepSubrequests } from '../core/subrequests.ts';
import {
  CATCH_UP_COST,
  NamespaceCopy,
  PATCH_COST,
  RESERVE_COST,
  REST_TABLES,
  UNIT_OVERHEAD,
  type Block,
  type Cursor,
  type FramesOwed,
} from './copy.ts';
import type { Columns } from './copy-rows.ts';
import { Meter, Metered } from './metered.ts';
import { DELETE_COST, deleteUnit } from './shard-rows.ts';
import { CHECK_COST, checkUnit, compareWorkers, VERIFY_COST, verifyUnit } from './copy-check.ts';
import { homeOf, shardNamed } from './directory.ts';
import { lastDirty, TRACK_COST, trackStmts, UNTRACK_COST, untrackUnit } from './move-track.ts';
import { queueObjectName, type QueueObject } from './queue-object.ts';

/** How long the shard a namespace left keeps its rows: past every isolate's cached placement (directory.ts PLACEMENT_TTL_MS). */
export const CLEANUP_MS = 60_000;
/** Queue objects fenced or unfenced a unit. */
const OBJECTS_PER_UNIT = 100;
/** How long a step that failed after the switch (or while undoing) waits before it is tried again. */
const RETRY_MS = 1_000;
/**
 * Rounds of catching up while the namespace works: another while the last caught up at least
 * FEW_CHANGES jobs (what was written during it), at most MOST_ROUNDS. Then the fence catches up
 * what the last round left.
 */
const FEW_CHANGES = 50;
const MOST_ROUNDS = 8;
/** Passing failures of the platform in a row a move rides out before the switch (then it is undone). */
const PASSING_TRIES = 5;

type Phase =
  | 'clear'
  | 'track'
  | 'reserve'
  | 'jobs'
  | 'frames'
  | 'due'
  | 'workers'
  | 'check'
  | 'live'
  | 'mark'
  | 'fence'
  | 'changed'
  | 'rest'
  | 'verify'
  | 'switch'
  | 'unfence'
  | 'untrack'
  | 'undo-clear'
  | 'undo-mark'
  | 'ended';
/** The phases after which nothing is undone. */
const SWITCHED: ReadonlySet<Phase> = new Set(['unfence', 'untrack', 'undo-clear', 'undo-mark', 'ended']);

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
  /** Jobs copied again, made or deleted under the fence: what changed while the copy ran. */
  caughtUp: number;
  /** How long writes were fenced, in ms (so far, while moving), and the whole move. */
  fencedMs: number;
  ms: number;
  /** The mover's invocations it took, the most subrequests one asked, and D1's rows read in all. */
  steps: number;
  mostInStep: number;
  rowsRead: number;
  error: string | null;
}

interface Move extends MoveStatus {
  /** The directory's epoch: the mark's while fenced, then the switch's (or the undo's). */
  epoch: number;
  startedAt: number;
  /** When the directory was marked and writes fenced (null: not yet). */
  markedAt: number | null;
  /** A job whose frames are copied before the phase goes on (copy.ts). */
  owed: FramesOwed | null;
  /** Passing failures of the platform in a row (platform-errors.ts). */
  passing: number;
  cursor: Cursor;
  /** In `rest`, which of REST_TABLES. */
  table: number;
  /** The highest worker number copied and compared while it works (phase `workers`); the fence copies those after it. */
  workersTo: number;
  /** In `live`, which round of catching up, how many jobs it caught up so far, and the last id it takes. */
  round: { n: number; caughtUp: number; until?: string | null; before?: number };
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
    const row = await homeOf(this.env)
      .prepare(`SELECT shard, state FROM namespaces WHERE ns = ?1`)
      .bind(ns)
      .first<{ shard: string; state: string }>();
    if (!row) throw new LakeshoreError('not_found', `namespace ${JSON.stringify(ns)} has never been used: nothing to move`);
    if (row.state === 'moving') throw conflict(`namespace ${JSON.stringify(ns)} is being moved already`);
    if (row.shard === target.name) throw conflict(`namespace ${JSON.stringify(ns)} is on ${row.shard} already`);
    const m: Move = {
      ns,
      from: row.shard,
      to: target.name,
      state: 'moving',
      phase: 'clear',
      jobs: 0,
      frames: 0,
      queues: 0,
      schedules: 0,
      objects: 0,
      caughtUp: 0,
      fencedMs: 0,
      ms: 0,
      steps: 0,
      mostInStep: 0,
      rowsRead: 0,
      error: null,
      epoch: 0,
      startedAt: Date.now(),
      markedAt: null,
      owed: null,
      passing: 0,
      cursor: null,
      table: 0,
      workersTo: 0,
      round: { n: 1, caughtUp: 0 },
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
      while (m.phase !== 'ended' && (await this.unit(m, copy, home, meter)));
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

  /** One unit of the move's phase, if the meter covers it (else false: the step ends here). */
  private async unit(m: Move, copy: NamespaceCopy, home: Metered, meter: Meter): Promise<boolean> {
    const rows = meter.left - UNIT_OVERHEAD;
    if (m.owed) {
      // A job's frames first, before its phase goes on past it.
      if (rows < 1) return false;
      m.owed = await copy.owedFrames(m.owed, rows);
      return true;
    }
    switch (m.phase) {
      case 'clear':
      case 'undo-clear': {
        if (meter.left < DELETE_COST + 1) return false;
        if ((await deleteUnit(copy.to, this.ns)).done && (await copy.dropPlaceholder()))
          this.next(m, m.phase === 'clear' ? 'track' : m.markedAt === null ? 'untrack' : 'undo-mark');
        return true;
      }
      case 'track':
        // Before the copy reads a row: every write from here on is noted.
        if (meter.left < TRACK_COST) return false;
        await copy.from.batch(trackStmts(this.ns));
        this.next(m, 'reserve');
        return true;
      case 'untrack':
        if (meter.left < UNTRACK_COST + 2) return false;
        if (m.cursor === null) {
          if (m.markedAt !== null && !m.error) {
            // Moved: what the new shard holds (the counts so far were of the copies made, some made twice).
            const moved = await copy.to.first<{ jobs: number; frames: number }>(
              `SELECT (SELECT count(*) FROM invocations WHERE ns = ?1) AS jobs,
                      (SELECT count(*) FROM frames WHERE inv IN (SELECT rid FROM invocations WHERE ns = ?1)) AS frames`,
              this.ns,
            );
            Object.assign(m, moved);
          }
          await copy.dropPlaceholder();
          m.cursor = ['placeholder dropped'];
        }
        if ((await untrackUnit(copy.from, this.ns)).done) this.next(m, 'ended');
        return true;
      case 'reserve':
        if (meter.left < RESERVE_COST) return false;
        m.block = await copy.reserve();
        this.next(m, 'jobs');
        return true;
      case 'jobs':
      case 'frames':
      case 'due': {
        if (rows < 1) return false;
        const u = await copy[m.phase](m.block!, m.cursor, rows);
        if (m.phase === 'jobs') m.jobs += u.rows;
        if (m.phase === 'frames') m.frames += u.rows;
        if (!u.done) m.cursor = u.cursor;
        else this.next(m, m.phase === 'jobs' ? 'frames' : m.phase === 'frames' ? 'due' : 'workers');
        return true;
      }
      case 'workers': {
        // A worker's row never changes once written, and a new one is numbered after the highest
        // (src/core/sql/workers.ts): those copied and compared now stay as they are, and the fence
        // copies only those numbered since. A namespace gains a row each worker process it ever
        // saw, so they may outnumber its queues by far.
        if (rows < 3) return false;
        const u = await copy.rest('workers', m.workersTo ? [m.workersTo] : null, rows - 2);
        if (u.rows) {
          const last = Number(u.cursor![0]);
          await compareWorkers(copy, m.workersTo, last);
          m.workersTo = last;
        }
        if (u.done) this.next(m, 'check');
        return true;
      }
      case 'check': {
        if (meter.left < CHECK_COST) return false;
        const u = await checkUnit(copy, m.cursor);
        if (!u.done) m.cursor = u.cursor;
        else this.next(m, 'live');
        return true;
      }
      case 'mark': {
        if (meter.left < 1) return false;
        const marked = await home.first<{ epoch: number }>(
          `UPDATE namespaces SET state = 'moving', epoch = epoch + 1 WHERE ns = ?1 AND state = 'active' AND shard = ?2 RETURNING epoch`,
          this.ns,
          m.from,
        );
        if (!marked) throw new Error(`the directory entry of ${this.ns} changed before its move fenced its writes`);
        Object.assign(m, { epoch: marked.epoch, markedAt: Date.now() });
        this.next(m, 'fence');
        return true;
      }
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
        else this.next(m, m.phase === 'fence' ? 'changed' : 'untrack');
        return true;
      }
      case 'live':
      case 'changed': {
        const live = m.phase === 'live';
        if (meter.left < CATCH_UP_COST[live ? 'live' : 'fenced'] + PATCH_COST + 1) return false;
        if (live && m.round.until === undefined) {
          m.round.until = await lastDirty(copy.from, this.ns);
          if (m.round.until === null) {
            this.next(m, 'mark');
            return true;
          }
        }
        const u = await copy.catchUp(m.block!, m.cursor, meter, live, live ? (m.round.until ?? null) : null);
        m.owed = u.owed ?? null;
        if (live) m.round.caughtUp += u.rows;
        else m.caughtUp += u.rows;
        if (!u.done) m.cursor = u.cursor;
        else if (
          live &&
          m.round.caughtUp >= FEW_CHANGES &&
          m.round.n < MOST_ROUNDS &&
          m.round.caughtUp * 2 <= (m.round.before ?? Infinity)
        ) {
          // Another round while it works: what was written during this one (while the rounds halve:
          // writes faster than the catching up would make each round longer than the last).
          m.round = { n: m.round.n + 1, caughtUp: 0, before: m.round.caughtUp };
          m.cursor = null;
        } else if (live) this.next(m, 'mark');
        else {
          this.next(m, 'rest');
          m.table = 0;
        }
        return true;
      }
      case 'rest': {
        if (rows < 1) return false;
        const table = REST_TABLES[m.table]!;
        // Of the workers, those numbered since the copy while it worked.
        const from = m.cursor ?? (table === 'workers' && m.workersTo ? [m.workersTo] : null);
        const u = await copy.rest(table, from, rows);
        if (table === 'queues') m.queues += u.rows;
        if (table === 'schedules') m.schedules += u.rows;
        if (!u.done) m.cursor = u.cursor;
        else if (++m.table < REST_TABLES.length) m.cursor = null;
        else this.next(m, 'verify');
        return true;
      }
      case 'verify': {
        if (meter.left < VERIFY_COST) return false;
        // Tests only (SIMULATED_MOVE_PAUSE_MS): a catch-up as slow as a large one, so that a write
        // an unfenced object made meanwhile would land before the check and show in it.
        const pause = Number((this.env as unknown as Record<string, string | undefined>).SIMULATED_MOVE_PAUSE_MS ?? 0);
        if (pause > 0 && m.cursor === null) await new Promise((r) => setTimeout(r, pause));
        const u = await verifyUnit(copy, m.cursor, m.workersTo);
        if (!u.done) m.cursor = u.cursor;
        else this.next(m, 'switch');
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
        } else this.next(m, 'untrack');
        return true;
      }
      case 'ended':
        return false;
    }
  }

  private next(m: Move, phase: Phase): void {
    // Unfenced: how long writes waited is known now (the noting's end comes after).
    if (m.phase === 'unfence' && m.markedAt !== null) m.fencedMs = Date.now() - m.markedAt;
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
    const each = async (qs: string[]) => {
      const settled = await Promise.allSettled(qs.map((q) => call(binding.getByName(queueObjectName(this.ns, q)))));
      return qs.flatMap((q, i) => {
        const s = settled[i]!;
        return s.status === 'rejected' ? [{ q, why: String(s.reason) }] : [];
      });
    };
    let failed = await each(queues);
    // An unfence is tried once more: what it misses waits for the object's own look (MOVE_LOOK_MS).
    if (failed.length && !must) failed = await each(failed.map((f) => f.q));
    if (!failed.length) return;
    const said = failed.map((f) => `${f.q}: ${f.why}`).join('; ');
    if (must) throw new Error(`queue objects of ${this.ns} did not answer: ${said}`);
    console.error(`move of ${this.ns}: ${said} (they unfence themselves from the directory)`);
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

/** A move as it is answered: without what only the mover needs between steps. */
const statusOf = ({
  epoch,
  startedAt,
  markedAt,
  owed,
  passing,
  cursor,
  table,
  workersTo,
  round,
  block,
  unfenceTo,
  ...status
}: Move): MoveStatus => status;
