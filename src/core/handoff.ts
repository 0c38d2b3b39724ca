/**
 * Hand-off. A claim parked on an empty queue rides along with the next transition that queues
 * work there (a submit, a nack that retries): its guarded claim UPDATE is appended to that
 * transition's statements, so the rows are inserted and claimed in one round trip and one
 * transaction, and the parked claimer answers without a wake and a second round trip. Each claim
 * statement keeps its own guard; one that finds nothing stays parked. Sampled (boltzmann) claims
 * do not ride: they are woken and sample again.
 */
import type { Plan } from './plan.ts';
import { claimOrder, claimStmt, toClaimed, type ClaimInput } from './sql/claim.ts';
import type { Claimed } from './types.ts';
import type { Waiters } from './waiters.ts';

export interface ParkedClaim {
  readonly parked: true;
  input: ClaimInput;
  max: number;
  /** Set while the claim rides in a batch; settles when that batch is done (or failed). */
  riding: Promise<void> | null;
  /** Rows handed to this claim by a batch it rode in. */
  rows: Claimed[] | null;
}

export const parkedClaim = (input: ClaimInput, max: number): ParkedClaim => ({ parked: true, input, max, riding: null, rows: null });

const isParked = (d: unknown): d is ParkedClaim => typeof d === 'object' && d !== null && (d as ParkedClaim).parked === true;

export interface Ride<T> {
  plan: Plan<T>;
  /** True when a rider found fewer rows than it asked for: the queue had nothing left to wake anyone for. */
  drained(): boolean;
  /** Call once the plan settled either way: riders of a failed batch go back to waiting. */
  release(): void;
}

/** Appends the claims parked on `key` to `plan`, to run after its statements in the same batch. */
export function ride<T>(waiters: Waiters, key: string, now: number, ns: string, queue: string, defaultLeaseMs: number, plan: Plan<T>): Ride<T> {
  const riders = waiters.carrying(key, isParked).filter((r) => r.data.riding === null);
  if (!riders.length) return { plan, drained: () => false, release: () => {} };
  let settle!: () => void;
  const riding = new Promise<void>((r) => (settle = r));
  let drained = false;
  for (const r of riders) r.data.riding = riding;
  const release = () => {
    for (const r of riders) r.data.riding = null;
    settle();
  };
  const n = plan.stmts.length;
  return {
    plan: {
      stmts: [...plan.stmts, ...riders.map((r) => claimStmt(now, ns, queue, r.data.input, defaultLeaseMs, null, r.data.max))],
      done: (rs) => {
        riders.forEach((r, i) => {
          const rows = claimOrder(rs[n + i]!.rows, r.data.input.kind).map(toClaimed);
          if (rows.length < r.data.max) drained = true;
          if (rows.length) {
            r.data.rows = rows;
            r.wake();
          }
        });
        release();
        return plan.done(rs.slice(0, n));
      },
    },
    drained: () => drained,
    release,
  };
}
