/**
 * The units of a namespace's move, phase by phase (the order and what each does: mover.ts). A unit
 * asks at most what the step's meter has left, and is one the mover may run again after a restart.
 */
import { type NamespaceCopy, RESERVE_COST, REST_TABLES, UNIT_OVERHEAD } from './copy.ts';
import { CATCH_UP_COST, catchUp, owedFrames, PATCH_COST } from './copy-catch-up.ts';
import { CHECK_COST, checkUnit, compareWorkers, VERIFY_COST, verifyUnit } from './copy-check.ts';
import type { Meter, Metered } from './metered.ts';
import { callObjects, queueObjects } from './move-objects.ts';
import type { Cleanup, Move, Phase } from './move-state.ts';
import { lastDirty, TRACK_COST, trackStmts, UNTRACK_COST, untrackUnit } from './move-track.ts';
import { DELETE_COST, deleteUnit } from './shard-rows.ts';

/** How long the shard a namespace left keeps its rows: past every isolate's cached placement (directory.ts PLACEMENT_TTL_MS). */
export const CLEANUP_MS = 60_000;
/** Queue objects fenced or unfenced a unit. */
const OBJECTS_PER_UNIT = 100;
/**
 * Rounds of catching up while the namespace works: another while the last caught up at least
 * FEW_CHANGES jobs (what was written during it), at most MOST_ROUNDS. Then the fence catches up
 * what the last round left.
 */
const FEW_CHANGES = 50;
const MOST_ROUNDS = 8;

/** One step's units: the namespace, the copy between its two shards, the home database, and the step's meter. */
export class MoveUnits {
  private readonly ns: string;
  private readonly env: Env;
  private readonly storage: DurableObjectStorage;
  private readonly copy: NamespaceCopy;
  private readonly home: Metered;
  private readonly meter: Meter;

  constructor(ns: string, env: Env, storage: DurableObjectStorage, copy: NamespaceCopy, home: Metered, meter: Meter) {
    this.ns = ns;
    this.env = env;
    this.storage = storage;
    this.copy = copy;
    this.home = home;
    this.meter = meter;
  }

  /** One unit of the move's phase, if the meter covers it (else false: the step ends here). */
  async unit(m: Move): Promise<boolean> {
    const { copy, home, meter } = this;
    const rows = meter.left - UNIT_OVERHEAD;
    if (m.owed) {
      // A job's frames first, before its phase goes on past it.
      if (rows < 1) return false;
      m.owed = await owedFrames(copy, m.owed, rows);
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
        const queues = await queueObjects(home, this.ns, m.cursor, most);
        meter.used += queues.length;
        if (m.phase === 'fence') {
          await callObjects(this.env, this.ns, queues, (o) => o.fence(m.epoch), true);
          m.objects += queues.length;
        } else await callObjects(this.env, this.ns, queues, (o) => o.unfence(m.unfenceTo, m.epoch), false);
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
        const u = await catchUp(copy, m.block!, m.cursor, meter, live, live ? (m.round.until ?? null) : null);
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
        await this.storage.put('cleanup', { shard: m.from, at: Date.now() + CLEANUP_MS } satisfies Cleanup);
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
}
