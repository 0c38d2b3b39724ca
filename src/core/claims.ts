/**
 * How a claim picks its rows: fifo and filo in one guarded UPDATE per row, boltzmann by sampling
 * a priority level first. Every claim plan starts by expiring the queue's overdue leases, so a
 * claim reclaims them itself whether or not an alarm ever fires.
 */
import type { Limits } from './limits.ts';
import { followUp, type Plan } from './plan.ts';
import type { StmtResult } from './port.ts';
import { claimOrder, claimStmt, toClaimed, type ClaimInput } from './sql/claim.ts';
import { expireStmt, nextLeaseStmt, type Expired } from './sql/expire.ts';
import { levelsStmt, markSampledStmts } from './sql/sample.ts';
import type { Claimed, ClaimKind } from './types.ts';

export interface ClaimContext {
  now: number;
  ns: string;
  queue: string;
  limits: Limits;
  random: () => number;
  /** Queues (`ns\0queue`) this engine has seen marked sampled: their level counts are kept. */
  sampled: Set<string>;
}

export type ClaimRequestInput = ClaimInput & { temperature: number };

export interface ClaimOutcome {
  claimed: Claimed[];
  /** What the expiry in front of the claim moved (whose waiters the engine wakes). */
  expired: Expired[];
  /** With `withNextLease`: the queue's next lease deadline, read in the same batch. */
  nextLease?: number | null;
}

/** Claims up to `max`; a fifo/filo claim `withNextLease` also reads the next lease deadline, for a claim about to park. */
export function claimPlan(ctx: ClaimContext, c: ClaimRequestInput, max: number, withNextLease = false): Plan<ClaimOutcome> {
  if (c.kind === 'boltzmann' && c.temperature > 0) return boltzmannPlan(ctx, c, max, [], 0, null);
  const kind: ClaimKind = c.kind === 'boltzmann' ? 'fifo' : c.kind; // T = 0: the top level, oldest first
  const stmts = [expire(ctx), claimStmt(ctx.now, ctx.ns, ctx.queue, { ...c, kind }, ctx.limits.defaultLeaseMs, null, max)];
  if (withNextLease) stmts.push(nextLeaseStmt(ctx.ns, ctx.queue));
  return {
    stmts,
    done: ([ex, claimed, next]) => ({
      claimed: claimOrder(claimed!.rows, kind).map(toClaimed),
      expired: expiredOf(ex!),
      ...(next ? { nextLease: deadlineOf(next) } : {}),
    }),
  };
}

const expire = (ctx: ClaimContext) => expireStmt(ctx.now, ctx.ns, ctx.queue, ctx.limits.defaultMaxAttempts);

export const expiredOf = (r: StmtResult): Expired[] => r.rows.map((x) => ({ id: String(x.id), state: x.state as Expired['state'] }));

/**
 * Boltzmann: pick a priority level with probability ∝ n_level · exp(level / T), where n_level
 * comes from queue_levels (O(levels) rows), then claim that level's oldest row. Every queued
 * row thus has probability ∝ exp(priority / T); T → 0 is fifo, large T approaches uniform.
 */
function boltzmannPlan(ctx: ClaimContext, c: ClaimRequestInput, max: number, got: Claimed[], tries: number, expired: Expired[] | null): Plan<ClaimOutcome> {
  // Until this engine has seen the queue marked sampled, the batch marks it (see markSampledStmts).
  const key = `${ctx.ns}\u0000${ctx.queue}`;
  const mark = ctx.sampled.has(key) ? [] : markSampledStmts(ctx.now, ctx.ns, ctx.queue);
  return {
    stmts: [expire(ctx), ...mark, levelsStmt(ctx.ns, ctx.queue)],
    done: (rs) => {
      const [ex, lv] = [rs[0], rs[rs.length - 1]];
      const moved = [...(expired ?? []), ...expiredOf(ex!)];
      ctx.sampled.add(key);
      const levels = lv!.rows.map((r) => ({ p: Number(r.priority), n: Number(r.queued) }));
      if (!levels.length) return { claimed: got, expired: moved };
      // Draws in order, then one UPDATE per level drawn, claiming that level's oldest rows.
      const picks = sampleLevels(levels, c.temperature, max - got.length, ctx.random);
      const perLevel = new Map<number, number>();
      for (const p of picks) perLevel.set(p, (perLevel.get(p) ?? 0) + 1);
      const stmts = [...perLevel].map(([p, k]) => claimStmt(ctx.now, ctx.ns, ctx.queue, c, ctx.limits.defaultLeaseMs, p, k));
      return followUp({
        stmts,
        done: (rs) => {
          // Hand rows out in draw order: the i-th draw of a level gets that level's i-th oldest row.
          const byLevel = new Map([...perLevel.keys()].map((p, i) => [p, claimOrder(rs[i]!.rows, 'fifo')]));
          const drawn = picks.flatMap((p) => { const r = byLevel.get(p)!.shift(); return r ? [toClaimed(r)] : []; });
          const more = [...got, ...drawn];
          // A level can empty under us (another claim in the same batch); sample again, a few times.
          if (more.length < max && tries < 3 && more.length < levels.reduce((a, l) => a + l.n, 0)) {
            return followUp(boltzmannPlan(ctx, c, max, more, tries + 1, moved));
          }
          return { claimed: more, expired: moved };
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

/** The queue's earliest lease deadline: how long a parked claim may sleep before expiring it itself. */
export function nextLeasePlan(ns: string, queue: string): Plan<number | null> {
  return { stmts: [nextLeaseStmt(ns, queue)], done: ([r]) => deadlineOf(r!) };
}

/** The `next` column of a nextLeaseStmt result: a deadline, or null when nothing runs. */
export function deadlineOf(r: StmtResult): number | null {
  const n = r.rows[0]?.next;
  return n === null || n === undefined ? null : Number(n);
}

/** Expires a queue's overdue leases and reads its next deadline (the alarm's sweep). */
export function sweepPlan(now: number, ns: string, queue: string, limits: Limits): Plan<{ expired: Expired[]; next: number | null }> {
  return {
    stmts: [expireStmt(now, ns, queue, limits.defaultMaxAttempts), nextLeaseStmt(ns, queue)],
    done: ([ex, next]) => ({ expired: expiredOf(ex!), next: deadlineOf(next!) }),
  };
}
