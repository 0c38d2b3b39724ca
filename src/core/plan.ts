/**
 * A plan is one verb's statements plus how to read their results. Plans from concurrent callers
 * are committed together (see committer.ts), each statement keeping its own guard, and each plan
 * its own answer. A plan may ask for a follow-up plan, e.g. to diagnose why a guard missed.
 */
import type { Stmt, StmtResult } from './port.ts';

export class Then<T> {
  readonly plan: Plan<T>;
  constructor(plan: Plan<T>) {
    this.plan = plan;
  }
}

export interface Plan<T> {
  stmts: Stmt[];
  done(results: StmtResult[]): T | Then<T>;
}

/** Answers with a follow-up plan. (Not named `then`: that would make the module a thenable.) */
export const followUp = <T>(plan: Plan<T>): Then<T> => new Then(plan);

/**
 * Several plans as one: their statements in order, each plan's answer (or its error) in its slot.
 * Follow-ups are not supported here (the plans given are single-round diagnoses).
 */
export function each<T>(plans: Plan<T>[]): Plan<(T | Error)[]> {
  return {
    stmts: plans.flatMap((p) => p.stmts),
    done: (rs) => {
      let at = 0;
      return plans.map((p) => {
        const mine = rs.slice(at, (at += p.stmts.length));
        try {
          const v = p.done(mine);
          if (v instanceof Then) throw new Error('each(): a plan asked for a follow-up');
          return v;
        } catch (e) {
          return e instanceof Error ? e : new Error(String(e));
        }
      });
    },
  };
}

/**
 * A set-based statement answered some items (`out`, null where not); the rest are answered by
 * their own diagnosis plan, run as one follow-up.
 */
export function fillMissed<T>(out: (T | Error | null)[], diagnose: (i: number) => Plan<T>): (T | Error)[] | Then<(T | Error)[]> {
  const missed = out.flatMap((v, i) => (v === null ? [i] : []));
  if (!missed.length) return out as (T | Error)[];
  const all = each(missed.map(diagnose));
  return followUp({
    stmts: all.stmts,
    done: (rs) => {
      const answers = all.done(rs) as (T | Error)[];
      missed.forEach((i, k) => {
        out[i] = answers[k]!;
      });
      return out as (T | Error)[];
    },
  });
}
