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

/** A plan that needs no statements: answers `value` at once (used for validation-only paths). */
export const constant = <T>(value: T): Plan<T> => ({ stmts: [], done: () => value });
