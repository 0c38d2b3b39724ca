/**
 * How a claim picks its rows: fifo and filo in one guarded UPDATE per row, boltzmann by sampling
 * a priority level first. Every claim plan starts with the queue's sweep (`sweep`): overdue
 * leases expire, due delayed rows move to queued, rows past their TTL fail. So a claim does all
 * that itself, whether or not an alarm ever fires.
 */
import type { Limits } from './limits.ts';
import { followUp, type Plan } from './plan.ts';
import type { StmtResult, Stmt } from './port.ts';
import { claimOrder, claimStmts, toClaimed, type ClaimInput } from './sql/claim.ts';
import { expireStmt, type Moved } from './sql/expire.ts';
import { promoteStmt, ttlStmt } from './sql/promote.ts';
import { levelsStmt, markSampledStmts } from './sql/sample.ts';
import { wakeOf, wakeStmt, type Wake } from './sql/wake.ts';
import { type KnownWorkers, registration } from './sql/workers.ts';
import type { Hints } from './hints.ts';
import type { Claimed, ClaimKind } from './types.ts';

export interface ClaimContext {
  now: number;
  ns: string;
  queue: string;
  limits: Limits;
  random: () => number;
  /** Queues (`ns\0queue`) this engine has seen marked sampled: their level counts are kept. */
  sampled: Set<string>;
  /** Workers this engine has seen registered, and their numbers (sql/workers.ts): their claims need not register them. */
  workers: KnownWorkers;
}

export type ClaimRequestInput = ClaimInput & { temperature: number };

export interface ClaimOutcome {
  claimed: Claimed[];
  /** What the sweep in front of the claim moved (whose waiters the engine wakes). */
  moved: Moved[];
  /** What the queue waits for, read in the same batch: asked for by a claim about to park, or after a hinted sweep (to refresh the hints). */
  wake?: Wake;
}

/**
 * The sweep: expire overdue leases, promote due delayed rows, fail rows past their TTL. With
 * hints (a single writer's knowledge, hints.ts) only the statements that can do something.
 */
export function sweep(
  now: number,
  ns: string,
  queue: string,
  limits: Limits,
  known?: Hints,
): { stmts: Stmt[]; moved: (rs: StmtResult[]) => Moved[] } {
  const due = (at: number | null | undefined) => !known || (at !== null && at !== undefined && at <= now);
  const parts: [Stmt, (r: StmtResult) => Moved[]][] = [];
  if (due(known?.lease))
    parts.push([
      expireStmt(now, ns, queue, limits.defaultMaxAttempts),
      (r) => r.rows.map((x) => ({ id: String(x.id), state: x.state as Moved['state'], cause: 'lease' as const })),
    ]);
  if (due(known?.due))
    parts.push([
      promoteStmt(now, ns, queue),
      (r) => r.rows.map((x) => ({ id: String(x.id), state: 'queued' as const, cause: 'due' as const })),
    ]);
  if (due(known?.ttl))
    parts.push([
      ttlStmt(now, ns, queue),
      (r) => r.rows.map((x) => ({ id: String(x.id), state: 'failed' as const, cause: 'ttl' as const })),
    ]);
  return { stmts: parts.map(([st]) => st), moved: (rs) => parts.flatMap(([, read], i) => read(rs[i]!)) };
}

/**
 * Claims up to `max`. `known`: a single writer's hints of the queue (null: it keeps hints, but
 * knows none of this queue yet; undefined: it keeps none). It reads what the queue waits for in
 * the same batch (`wake`) when asked (`withWake`: a claim about to park), and where it keeps hints
 * but has none or its sweep moved rows, to learn them afresh.
 */
export function claimPlan(
  ctx: ClaimContext,
  c: ClaimRequestInput,
  max: number,
  withWake = false,
  known?: Hints | null,
): Plan<ClaimOutcome> {
  const hints = known ?? undefined;
  if (c.kind === 'boltzmann' && c.temperature > 0) return boltzmannPlan(ctx, c, max, [], 0, null, hints);
  const kind: ClaimKind = c.kind === 'boltzmann' ? 'fifo' : c.kind; // T = 0: the top level, oldest first
  const sw = sweep(ctx.now, ctx.ns, ctx.queue, ctx.limits, hints);
  const reg = registration(ctx.workers, ctx.ns, c.workerId);
  const claim = claimStmts(ctx.now, ctx.ns, ctx.queue, { ...c, kind }, ctx.limits.defaultLeaseMs, null, max, hints);
  // A claim about to park needs to know how long it may sleep; the hints of a queue with no pause,
  // cap or rate say it already (work.ts), so only a queue without them reads it here.
  const wake = (withWake && !plain(hints)) || known === null || (hints !== undefined && sw.stmts.length > 0);
  const stmts = [...sw.stmts, ...reg.stmts, ...claim, ...(wake ? [wakeStmt(ctx.ns, ctx.queue)] : [])];
  return {
    stmts,
    done: (rs) => {
      const rows = rs[sw.stmts.length + reg.stmts.length]!.rows;
      reg.done(rows);
      return {
        claimed: claimOrder(rows, kind).map(toClaimed),
        moved: sw.moved(rs),
        ...(wake ? { wake: wakeOf(rs[rs.length - 1]!.rows[0], ctx.now) } : {}),
      };
    },
  };
}

/** Hints that settle when a parked claim must look again: no pause, running cap or claim rate to read. */
export const plain = (h: Hints | undefined): h is Hints => h !== undefined && !h.paused && !h.capped && !h.rated;

/** Hints for a follow-up round of a sampled claim: its sweep already ran. */
const SWEPT: Hints = { lease: null, due: null, ttl: null, paused: false, capped: false, rated: false };

/**
 * Boltzmann: pick a priority level with probability ∝ n_level · exp(level / T), where n_level
 * comes from queue_levels (O(levels) rows), then claim that level's oldest row. Every queued
 * row thus has probability ∝ exp(priority / T); T → 0 is fifo, large T approaches uniform.
 */
function boltzmannPlan(
  ctx: ClaimContext,
  c: ClaimRequestInput,
  max: number,
  got: Claimed[],
  tries: number,
  moved: Moved[] | null,
  known?: Hints,
): Plan<ClaimOutcome> {
  // Until this engine has seen the queue marked sampled, the batch marks it (see markSampledStmts).
  const key = `${ctx.ns}\u0000${ctx.queue}`;
  const mark = ctx.sampled.has(key) ? [] : markSampledStmts(ctx.now, ctx.ns, ctx.queue);
  const sw = sweep(ctx.now, ctx.ns, ctx.queue, ctx.limits, moved ? SWEPT : known);
  const reg = registration(ctx.workers, ctx.ns, c.workerId);
  return {
    stmts: [...sw.stmts, ...mark, ...reg.stmts, levelsStmt(ctx.ns, ctx.queue)],
    done: (rs) => {
      const all = [...(moved ?? []), ...sw.moved(rs)];
      const lv = rs[rs.length - 1];
      ctx.sampled.add(key);
      reg.done([]); // registered; its number comes with the rows the levels' claims return
      const levels = lv!.rows.map((r) => ({ p: Number(r.priority), n: Number(r.queued) }));
      if (!levels.length) return { claimed: got, moved: all };
      // Draws in order, then one UPDATE per level drawn, claiming that level's oldest rows.
      const picks = sampleLevels(levels, c.temperature, max - got.length, ctx.random);
      const perLevel = new Map<number, number>();
      for (const p of picks) perLevel.set(p, (perLevel.get(p) ?? 0) + 1);
      const parts = [...perLevel].map(([p, k]) => claimStmts(ctx.now, ctx.ns, ctx.queue, c, ctx.limits.defaultLeaseMs, p, k, known));
      const at = parts.map((_, i) => parts.slice(0, i).reduce((n, x) => n + x.length, 0));
      return followUp({
        stmts: parts.flat(),
        done: (rs) => {
          // Hand rows out in draw order: the i-th draw of a level gets that level's i-th oldest row.
          const byLevel = new Map([...perLevel.keys()].map((p, i) => [p, claimOrder(rs[at[i]!]!.rows, 'fifo')]));
          reg.done(rs[0]?.rows ?? []); // the rows tell the worker's number
          const drawn = picks.flatMap((p) => {
            const r = byLevel.get(p)!.shift();
            return r ? [toClaimed(r)] : [];
          });
          const more = [...got, ...drawn];
          // A level can empty under us (another claim in the same batch); sample again, a few times.
          if (more.length < max && tries < 3 && more.length < levels.reduce((a, l) => a + l.n, 0)) {
            return followUp(boltzmannPlan(ctx, c, max, more, tries + 1, all, known));
          }
          return { claimed: more, moved: all };
        },
      });
    },
  };
}

/** Draws `k` levels without replacement of rows: each draw ∝ n · exp((p - pmax) / T). */
export function sampleLevels(levels: { p: number; n: number }[], t: number, k: number, random: () => number): number[] {
  const pmax = Math.max(...levels.map((l) => l.p));
  const left = levels.map((l) => ({ p: l.p, n: l.n, w: Math.exp((l.p - pmax) / t) }));
  const out: number[] = [];
  for (let i = 0; i < k; i++) {
    const total = left.reduce((a, l) => a + l.n * l.w, 0);
    if (total <= 0) break;
    let r = random() * total;
    let pick = left.find((l) => l.n > 0)!;
    for (const l of left) {
      if (l.n <= 0) continue;
      r -= l.n * l.w;
      pick = l;
      if (r < 0) break;
    }
    pick.n--;
    out.push(pick.p);
  }
  return out;
}

/** What the queue waits for (wake.ts): how long a parked claim may sleep, when the alarm fires. */
export const wakePlan = (now: number, ns: string, queue: string): Plan<Wake> => ({
  stmts: [wakeStmt(ns, queue)],
  done: ([r]) => wakeOf(r!.rows[0], now),
});

/** The whole sweep, then what the queue waits for next (the alarm's work). */
export function sweepPlan(now: number, ns: string, queue: string, limits: Limits): Plan<{ moved: Moved[]; wake: Wake }> {
  const sw = sweep(now, ns, queue, limits);
  return {
    stmts: [...sw.stmts, wakeStmt(ns, queue)],
    done: (rs) => ({ moved: sw.moved(rs), wake: wakeOf(rs[rs.length - 1]!.rows[0], now) }),
  };
}
